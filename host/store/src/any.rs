//! The store a command works with, whichever backend the user chose: the SQLite file of the
//! workspace (the default) or a PostgreSQL server shared by several machines. [`Location`] says
//! which, [`AnyStore`] is the opened store, with every call of both backends as an async method.

use std::path::{Path, PathBuf};

use crate::pg::{PgConfig, PgStore};
use crate::transfer::{Moved, TransferError};
use crate::{
    AuditEntry, Edits, Lease, LeaseSettings, ModelCall, Result, Run, Task, TaskStore, Usage,
    WorkspaceId,
};

/// Where the task store is.
#[derive(Debug, Clone)]
pub enum Location {
    /// A workspace's SQLite file.
    Sqlite(PathBuf),
    /// A PostgreSQL server, shared by every workspace and machine that names it.
    Pg(Box<PgConfig>),
}

impl Location {
    /// The store as messages name it: the file's path, or the URL without its password.
    pub fn label(&self) -> String {
        match self {
            Location::Sqlite(path) => path.display().to_string(),
            Location::Pg(config) => config.label(),
        }
    }

    /// Whether the store is shared by every workspace (a server), rather than this workspace's.
    pub fn is_shared(&self) -> bool {
        matches!(self, Location::Pg(_))
    }
}

/// An open task store of either backend.
#[derive(Debug)]
pub enum AnyStore {
    Sqlite(TaskStore),
    Pg(PgStore),
}

/// Each call, forwarded to the backend that holds the store.
macro_rules! forward {
    ($( $(#[$doc:meta])* fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $out:ty; )*) => {
        impl AnyStore {
            $( $(#[$doc])* pub async fn $name(&self $(, $arg: $ty)*) -> Result<$out> {
                match self {
                    AnyStore::Sqlite(s) => s.$name($($arg),*),
                    AnyStore::Pg(p) => p.$name($($arg),*).await,
                }
            } )*
        }
    };
}

forward! {
    /// Create a task in `state` with a fresh id, and return the id.
    fn create_task(&self, prompt: &str, state: &str, options: &serde_json::Value) -> String;
    /// Every task the store holds, newest first.
    fn tasks(&self) -> Vec<Task>;
    /// The tasks of the workspace at `path`, newest first.
    fn tasks_in(&self, path: &str) -> Vec<Task>;
    /// Take the task's lease for this runner; the holder's lease when another runner has it.
    fn acquire_lease(&self, task: &str) -> std::result::Result<(), Lease>;
    /// Renew this runner's lease; false when the lease is no longer this runner's.
    fn renew_lease(&self, task: &str) -> bool;
    fn release_lease(&self, task: &str) -> ();
    /// Set a stopped task running again; false when it had already finished.
    fn reopen(&self, task: &str) -> bool;
    fn runs(&self, task: &str) -> Vec<Run>;
    fn model_calls(&self, task: &str) -> Vec<ModelCall>;
    fn decisions(&self, task: &str) -> Vec<AuditEntry>;
    /// How many replies the adapter instance `adapter` has given in the task.
    fn completions(&self, task: &str, adapter: &str) -> u32;
    /// The tokens of each turn of the task that used any.
    fn usage_by_turn(&self, task: &str) -> Vec<(i64, Usage)>;
    /// What changes whenever anything of the task is committed.
    fn stamp(&self, task: &str) -> String;
    /// Keep `data` by its hash, and return the hash.
    fn put_blob(&self, data: &[u8]) -> String;
    /// The blob named `hash`, checked against it; None when the store has none.
    fn blob(&self, hash: &str) -> Option<Vec<u8>>;
    /// Record the edits of `task`'s checkout after `steps` transitions (a patch's blob).
    fn set_edits(&self, task: &str, steps: i64, patch: &str) -> ();
    /// The latest edits recorded of `task`.
    fn edits(&self, task: &str) -> Option<Edits>;
}

impl AnyStore {
    /// Open (creating where it is a file) the store at `location`, and bring its schema up to
    /// date, refusing one that holds anything rawko did not create or that a newer rawko wrote.
    pub async fn open(location: &Location) -> Result<AnyStore> {
        Ok(match location {
            Location::Sqlite(path) => AnyStore::Sqlite(TaskStore::open(path)?),
            Location::Pg(config) => AnyStore::Pg(PgStore::open(config).await?),
        })
    }

    /// Another connection to the same store, for a thread of its own (a heartbeat): opened
    /// without migrating, which the first connection did.
    pub async fn open_beside(&self) -> Result<AnyStore> {
        let beside = match self {
            AnyStore::Sqlite(s) => AnyStore::Sqlite(TaskStore::open(s.path())?),
            AnyStore::Pg(p) => AnyStore::Pg(p.beside()?),
        };
        beside.set_lease_settings(self.lease_settings());
        Ok(beside)
    }

    /// Where the store is.
    pub fn location(&self) -> Location {
        match self {
            AnyStore::Sqlite(s) => Location::Sqlite(s.path().to_path_buf()),
            AnyStore::Pg(p) => Location::Pg(Box::new(p.config().clone())),
        }
    }

    /// The store as messages name it: the file's path, or the URL without its password.
    pub fn label(&self) -> String {
        match self {
            AnyStore::Sqlite(s) => s.path().display().to_string(),
            AnyStore::Pg(p) => p.label().to_string(),
        }
    }

    /// The SQLite file, for a SQLite store.
    pub fn path(&self) -> Option<&Path> {
        match self {
            AnyStore::Sqlite(s) => Some(s.path()),
            AnyStore::Pg(_) => None,
        }
    }

    /// How leases are renewed and when they go stale, from now on.
    pub fn set_lease_settings(&self, settings: LeaseSettings) {
        match self {
            AnyStore::Sqlite(s) => s.set_lease_settings(settings),
            AnyStore::Pg(p) => p.set_lease_settings(settings),
        }
    }

    pub fn lease_settings(&self) -> LeaseSettings {
        match self {
            AnyStore::Sqlite(s) => s.lease_settings(),
            AnyStore::Pg(p) => p.lease_settings(),
        }
    }

    /// The workspace the tasks this store creates from now on belong to.
    pub fn set_workspace(&self, workspace: WorkspaceId) {
        match self {
            AnyStore::Sqlite(s) => s.set_workspace(workspace),
            AnyStore::Pg(p) => p.set_workspace(workspace),
        }
    }

    pub fn has_workspace(&self) -> bool {
        match self {
            AnyStore::Sqlite(s) => s.has_workspace(),
            AnyStore::Pg(p) => p.has_workspace(),
        }
    }

    /// Write all tasks, or one, as JSON lines ([`crate::transfer`]).
    pub async fn export(
        &self,
        task: Option<&str>,
        out: &mut dyn std::io::Write,
    ) -> std::result::Result<Moved, TransferError> {
        match self {
            AnyStore::Sqlite(s) => s.export(task, out),
            AnyStore::Pg(p) => p.export(task, out).await,
        }
    }

    /// Read an export into this store, all of it or nothing ([`crate::transfer`]).
    pub async fn import(
        &self,
        input: &mut dyn std::io::BufRead,
    ) -> std::result::Result<Moved, TransferError> {
        match self {
            AnyStore::Sqlite(s) => s.import(input),
            AnyStore::Pg(p) => p.import(input).await,
        }
    }
}
