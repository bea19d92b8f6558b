//! Files kept by content hash: a remote task's uncommitted changes, as the client sent them, and
//! the edits its states have made so far, each a patch. Workflow payloads carry only the hash;
//! a worker that takes a task over applies both to a fresh checkout and loses nothing that a
//! finished state wrote. A blob is read back only when its bytes still hash to its name.

use rusqlite::{OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::{Result, StoreError, TaskStore, now_ms};

/// The largest blob a store takes (64 MiB): a patch beyond it belongs in a commit.
pub const MAX_BLOB: usize = 64 << 20;

/// A blob's name: `sha256:` and the hex digest of its bytes.
pub fn blob_hash(data: &[u8]) -> String {
    format!("sha256:{:x}", Sha256::digest(data))
}

/// The edits a task's states made to its checkout, as of the state that committed them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edits {
    /// The task's transition count when the patch was taken.
    pub steps: i64,
    /// The patch's blob: from the task's starting tree (its commit and the client's changes)
    /// to the checkout after that state.
    pub patch: String,
}

/// Refuse bytes too large to keep.
pub(crate) fn check_size(data: &[u8]) -> Result<()> {
    if data.len() > MAX_BLOB {
        return Err(StoreError::TooLarge {
            size: data.len(),
            limit: MAX_BLOB,
        });
    }
    Ok(())
}

/// The bytes read under `hash`, when they are what it names.
pub(crate) fn checked(hash: &str, data: Option<Vec<u8>>) -> Result<Option<Vec<u8>>> {
    match data {
        Some(d) if blob_hash(&d) != hash => Err(StoreError::Corrupt(format!(
            "blob {hash} does not hash to its name"
        ))),
        other => Ok(other),
    }
}

impl TaskStore {
    /// Keep `data` (once, however often it is put) and return its hash.
    pub fn put_blob(&self, data: &[u8]) -> Result<String> {
        check_size(data)?;
        let hash = blob_hash(data);
        self.conn.execute(
            "INSERT INTO blobs (hash, size, data, created_at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (hash) DO NOTHING",
            params![hash, data.len() as i64, data, now_ms()],
        )?;
        Ok(hash)
    }

    /// The blob named `hash`; None when the store has none.
    pub fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let data = self
            .conn
            .query_row("SELECT data FROM blobs WHERE hash = ?1", [hash], |r| {
                r.get::<_, Vec<u8>>(0)
            })
            .optional()?;
        checked(hash, data)
    }

    /// Record that `task`'s checkout, after `steps` transitions, is its start plus `patch` (a
    /// blob put before). An older record (fewer steps) never replaces a newer one.
    pub fn set_edits(&self, task: &str, steps: i64, patch: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO task_edits (task_id, steps, patch, at) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (task_id) DO UPDATE SET steps = excluded.steps, patch = excluded.patch,
                 at = excluded.at
             WHERE excluded.steps >= task_edits.steps",
            params![task, steps, patch, now_ms()],
        )?;
        Ok(())
    }

    /// The latest edits recorded of `task`.
    pub fn edits(&self, task: &str) -> Result<Option<Edits>> {
        Ok(self
            .conn
            .query_row(
                "SELECT steps, patch FROM task_edits WHERE task_id = ?1",
                [task],
                |r| {
                    Ok(Edits {
                        steps: r.get(0)?,
                        patch: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }
}
