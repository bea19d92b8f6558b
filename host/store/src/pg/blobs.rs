//! The PostgreSQL store's blobs and task edits: the same records as the SQLite store's
//! ([`crate::blobs`]).

use super::PgStore;
use crate::blobs::{Edits, blob_hash, check_size, checked};
use crate::{Result, now_ms};

impl PgStore {
    /// Keep `data` (once, however often it is put) and return its hash.
    pub async fn put_blob(&self, data: &[u8]) -> Result<String> {
        check_size(data)?;
        let hash = blob_hash(data);
        self.client()
            .await?
            .execute(
                "INSERT INTO rawko.blobs (hash, size, data, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (hash) DO NOTHING",
                &[&hash, &(data.len() as i64), &data, &now_ms()],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(hash)
    }

    /// The blob named `hash`; None when the store has none.
    pub async fn blob(&self, hash: &str) -> Result<Option<Vec<u8>>> {
        let row = self
            .client()
            .await?
            .query_opt("SELECT data FROM rawko.blobs WHERE hash = $1", &[&hash])
            .await
            .map_err(|e| self.err(e))?;
        checked(hash, row.map(|r| r.get::<_, Vec<u8>>(0)))
    }

    /// Record that `task`'s checkout, after `steps` transitions, is its start plus `patch`. An
    /// older record (fewer steps) never replaces a newer one.
    pub async fn set_edits(&self, task: &str, steps: i64, patch: &str) -> Result<()> {
        self.client()
            .await?
            .execute(
                "INSERT INTO rawko.task_edits (task_id, steps, patch, at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (task_id) DO UPDATE SET steps = excluded.steps,
                     patch = excluded.patch, at = excluded.at
                 WHERE excluded.steps >= rawko.task_edits.steps",
                &[&task, &steps, &patch, &now_ms()],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    /// The latest edits recorded of `task`.
    pub async fn edits(&self, task: &str) -> Result<Option<Edits>> {
        let row = self
            .client()
            .await?
            .query_opt(
                "SELECT steps, patch FROM rawko.task_edits WHERE task_id = $1",
                &[&task],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.map(|r| Edits {
            steps: r.get(0),
            patch: r.get(1),
        }))
    }
}
