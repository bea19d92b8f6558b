//! The task store: one SQLite file (WAL mode) per workspace, in the user's state directory.
//! ([`pg`] holds the same store on a PostgreSQL server, for runners on several machines.)
//!
//! Everything a run does is written here as it happens: the task, each FSM transition, each
//! agent turn, every message, every tool call with its input, output, verdict and duration,
//! every capability decision (the audit log) and token usage. Each write is its own transaction,
//! committed before the next step begins, so a run killed at any moment can be resumed from what
//! was committed, and nothing that was committed happens twice.
//!
//! The store lives where a repository cannot ship it ([`path_for`]): rawko acts on what the
//! store says (an open turn's pending tool calls run on resume), so a store that came with a
//! repository would be the repository's commands. It is opened defensively all the same: SQLite's
//! defensive mode, no trusted schema, triggers and views off, and no schema object rawko did not
//! create.
//!
//! The schema is versioned with `PRAGMA user_version`; `MIGRATIONS[i]` moves a database from
//! version `i` to `i + 1`, inside one transaction.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

mod any;
mod backend;
mod blobs;
mod lease;
pub mod pg;
mod records;
mod schema;
pub mod transfer;
mod workspace;

pub use any::{AnyStore, Location};
pub use backend::{Store, StoreFuture};
pub use blobs::{Edits, MAX_BLOB, blob_hash};
pub use lease::{
    Holder, LEASE_HEARTBEAT, LEASE_STALE, Lease, LeaseError, LeaseSettings, host_id, host_name,
    process_start,
};
pub use records::{
    AuditEntry, Message, ModelCall, Reply, Run, Task, TaskStatus, ToolCall, Transition, Turn, Usage,
};
use records::{lease_of, task_row, tool_call_row, turn_row};
use schema::{MIGRATIONS, SchemaCheck, check_schema, defend, retry_busy};
pub use workspace::WorkspaceId;

/// [`TaskStore::stamp`]: the task's last update and its rows' largest ids, in one line.
const STAMP_SQL: &str =
    "SELECT COALESCE((SELECT updated_at FROM tasks WHERE id = ?1), -1) || '/' ||
    COALESCE((SELECT max(m.id) FROM messages m JOIN turns t ON t.id = m.turn_id
              WHERE t.task_id = ?1), 0) || '/' ||
    COALESCE((SELECT max(c.id) FROM tool_calls c JOIN turns t ON t.id = c.turn_id
              WHERE t.task_id = ?1), 0) || '/' ||
    COALESCE((SELECT max(id) FROM turns WHERE task_id = ?1), 0) || '/' ||
    COALESCE((SELECT max(id) FROM decisions WHERE task_id = ?1), 0) || '/' ||
    COALESCE((SELECT max(id) FROM runs WHERE task_id = ?1), 0) || '/' ||
    COALESCE((SELECT max(ended_at) FROM turns WHERE task_id = ?1), 0)";

/// The file name of a workspace's store, in its folder of the state directory.
pub const FILE_NAME: &str = "state.db";

/// Where the task store of `workspace` (absolute and canonical) lives under the user's state
/// directory: `<state>/workspaces/<name>-<hash>/state.db`, the name being the workspace's last
/// path component (for people) and the hash that of its whole path (for uniqueness).
pub fn path_for(state_dir: &Path, workspace: &Path) -> PathBuf {
    let name: String = workspace
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
    let hash: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    let folder = if name.is_empty() || name.starts_with('.') {
        hash
    } else {
        format!("{name}-{hash}")
    };
    state_dir.join("workspaces").join(folder).join(FILE_NAME)
}

/// Every task store under the state directory (each workspace's [`path_for`]), in a stable
/// order.
pub fn stores_in(state_dir: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(state_dir.join("workspaces"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join(FILE_NAME))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// A store that could not be opened or written.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("task store {}: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error(
        "task store {} was written by a newer rawko (schema version {found}, this rawko knows up to {known}); upgrade rawko",
        path.display()
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: usize,
    },
    #[error("cannot create {}: {source}", path.display())]
    Dir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "task store {} holds a {what} that rawko did not create; it was not used. Move it away to start afresh",
        path.display()
    )]
    Foreign { path: PathBuf, what: String },
    #[error("task store: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A PostgreSQL store that could not be reached, opened, read or written ([`pg::PgError`]).
    #[error(transparent)]
    Pg(#[from] pg::PgError),
    #[error("no task `{0}` in this workspace (see `rawko tasks list`)")]
    NoSuchTask(String),
    /// This runner held the task's lease and does not any more: another runner took the task
    /// over (this one's heartbeat went stale). Nothing more is written of it from here.
    #[error(
        "task {task} was taken over by {} while this runner was stalled; this runner stopped \
         without changing it (`rawko tasks show {task}` says where it is)",
        by.as_deref().unwrap_or("another runner (which has since let it go)")
    )]
    TakenOver { task: String, by: Option<String> },
    #[error("{size} bytes is more than the store keeps in one blob ({limit} bytes)")]
    TooLarge { size: usize, limit: usize },
    /// What the store returned is not what was written (a blob whose bytes changed).
    #[error("task store: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// Whether the task was taken over by another runner (see [`StoreError::TakenOver`]).
    pub fn is_taken_over(&self) -> bool {
        matches!(self, StoreError::TakenOver { .. })
    }

    /// Whether the connection to a PostgreSQL store was lost while it was in use: the task is
    /// not at fault, and a run stopped by it can be resumed.
    pub fn is_connection_lost(&self) -> bool {
        matches!(self, StoreError::Pg(e) if e.is_connection_lost())
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// What SQLite's integrity check found wrong in a store's file, in its own words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Damaged(pub String);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The store's clock, in milliseconds since the Unix epoch, as SQL: every lease is written and
/// judged by it, so that a runner whose own clock is wrong neither keeps nor takes a lease.
macro_rules! store_now {
    () => {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    };
}

/// A task row's columns, as [`records::task_row`] reads them.
macro_rules! task_columns {
    () => {
        concat!(
            "id, prompt, status, state, options, steps, summary, created_at, updated_at,
             lease_pid, lease_host, lease_at, lease_start, lease_token, ",
            store_now!(),
            " - lease_at, workspace_root, workspace_remote, workspace_path, host, trace"
        )
    };
}

/// An open task store.
pub struct TaskStore {
    conn: Connection,
    path: PathBuf,
    lease: std::cell::Cell<LeaseSettings>,
    workspace: std::cell::RefCell<Option<WorkspaceId>>,
    /// The tasks whose lease this store's runner took: their state is changed only while it
    /// still holds it.
    held: std::cell::RefCell<std::collections::HashSet<String>>,
    /// The task of each turn the fence has looked up (a turn never changes task).
    turn_tasks: std::cell::RefCell<std::collections::HashMap<i64, String>>,
    /// The stamps [`TaskStore::stamp`] computed, with the database's `data_version` and this
    /// connection's own change count they were computed at.
    stamps: std::cell::RefCell<(i64, u64, std::collections::HashMap<String, String>)>,
}

impl std::fmt::Debug for TaskStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskStore")
            .field("path", &self.path)
            .finish()
    }
}

impl TaskStore {
    /// Open (creating if needed) the store at `path`, and bring its schema up to date. The
    /// file must hold nothing but rawko's own schema: a trigger, view or table rawko did not
    /// create is an error, so a store edited by someone else is refused rather than obeyed.
    pub fn open(path: &Path) -> Result<TaskStore> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let open_err = |source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        let conn = Connection::open(path).map_err(open_err)?;
        defend(&conn).map_err(open_err)?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(open_err)?;
        // WAL: readers (`rawko tasks show` during a run) never block the writer, and a commit
        // is one append. NORMAL synchronisation keeps every commit across a process crash or
        // kill; only a power failure can lose the last few, never corrupt the file.
        // Switching a new file to WAL takes an exclusive lock without waiting on the busy
        // handler: another rawko creating the same store at this moment makes it fail at once.
        retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL")).map_err(open_err)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(open_err)?;
        conn.pragma_update(None, "foreign_keys", true)
            .map_err(open_err)?;
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(open_err)?;
        if version as usize > MIGRATIONS.len() {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                known: MIGRATIONS.len(),
            });
        }
        // Each step takes the write lock first and reads the version under it: two rawkos
        // opening a new store at once migrate it once, the second seeing the first's work.
        loop {
            retry_busy(|| conn.execute_batch("BEGIN IMMEDIATE")).map_err(open_err)?;
            let step = (|| -> std::result::Result<bool, SchemaCheck> {
                let at: i64 = conn
                    .pragma_query_value(None, "user_version", |r| r.get(0))
                    .map_err(SchemaCheck::Sql)?;
                // Checked under the lock, at the version it is: no migration runs next to a
                // trigger someone else put there, and nothing is used that rawko did not create.
                check_schema(&conn, (at.max(0) as usize).min(MIGRATIONS.len()))?;
                let Some(sql) = MIGRATIONS.get(at as usize) else {
                    return Ok(false);
                };
                let migrate = || -> rusqlite::Result<()> {
                    conn.execute_batch(sql)?;
                    conn.pragma_update(None, "user_version", at + 1)
                };
                migrate().map_err(SchemaCheck::Sql)?;
                Ok(true)
            })();

            match step {
                Ok(true) => conn.execute_batch("COMMIT").map_err(open_err)?,
                Ok(false) => {
                    conn.execute_batch("COMMIT").map_err(open_err)?;
                    break;
                }
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    return Err(match e {
                        SchemaCheck::Sql(source) => open_err(source),
                        SchemaCheck::Foreign(what) => StoreError::Foreign {
                            path: path.to_path_buf(),
                            what,
                        },
                    });
                }
            }
        }
        Ok(TaskStore {
            conn,
            path: path.to_path_buf(),
            lease: Default::default(),
            workspace: Default::default(),
            held: Default::default(),
            turn_tasks: Default::default(),
            stamps: Default::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How leases are renewed and when they go stale, from now on.
    pub fn set_lease_settings(&self, settings: LeaseSettings) {
        self.lease.set(settings);
    }

    pub fn lease_settings(&self) -> LeaseSettings {
        self.lease.get()
    }

    /// The workspace the tasks this store creates from now on belong to.
    pub fn set_workspace(&self, workspace: WorkspaceId) {
        *self.workspace.borrow_mut() = Some(workspace);
    }

    /// Whether [`TaskStore::set_workspace`] has said whose tasks this store creates.
    pub fn has_workspace(&self) -> bool {
        self.workspace.borrow().is_some()
    }

    /// `PRAGMA integrity_check`: `Ok(())` when the file is sound.
    pub fn integrity_check(&self) -> Result<std::result::Result<(), Damaged>> {
        let report: String = self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
        Ok(if report == "ok" {
            Ok(())
        } else {
            Err(Damaged(report))
        })
    }

    // ---- tasks ----

    /// Create a task in `state` with a fresh id, and return the id.
    pub fn create_task(
        &self,
        prompt: &str,
        state: &str,
        options: &serde_json::Value,
    ) -> Result<String> {
        let now = now_ms();
        let workspace = self.workspace.borrow().clone();
        let workspace = workspace.as_ref();
        loop {
            let id = new_task_id();
            let inserted = self.conn.execute(
                "INSERT OR IGNORE INTO tasks (id, prompt, status, state, options, created_at,
                                              updated_at, workspace_root, workspace_remote,
                                              workspace_path, host)
                 VALUES (?1, ?2, 'running', ?3, ?4, ?5, ?5, ?6, ?7, ?8, ?9)",
                params![
                    id,
                    prompt,
                    state,
                    options.to_string(),
                    now,
                    workspace.and_then(|w| w.root.as_deref()),
                    workspace.and_then(|w| w.remote.as_deref()),
                    workspace.map(|w| w.path.as_str()),
                    host_id(),
                ],
            )?;
            if inserted == 1 {
                return Ok(id);
            }
        }
    }

    /// The task `id`, or the unique task whose id starts with `id`; its status as it is now
    /// (see [`TaskStore::tasks`]).
    pub fn task(&self, id: &str) -> Result<Task> {
        let mut stmt = self.conn.prepare_cached(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE id = ?1 OR id LIKE ?2 ESCAPE '\\' ORDER BY id = ?1 DESC LIMIT 2"
        ))?;
        let pattern = format!(
            "{}%",
            id.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let rows: Vec<Task> = stmt
            .query_map(params![id, pattern], |r| {
                task_row(r, self.lease.get().stale)
            })?
            .collect::<std::result::Result<_, _>>()?;
        match rows.as_slice() {
            [t] => Ok(t.clone()),
            [t, _] if t.id == id => Ok(t.clone()),
            _ => Err(StoreError::NoSuchTask(id.to_string())),
        }
    }

    /// Every task, newest first, each with its status as it is now: a task stored as running
    /// whose runner is gone (its lease says so: [`Lease::gone`]) reads interrupted, with why as
    /// its summary, until a runner takes it up again.
    pub fn tasks(&self) -> Result<Vec<Task>> {
        let mut stmt = self.conn.prepare_cached(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks ORDER BY created_at DESC, id DESC"
        ))?;
        let rows = stmt
            .query_map([], |r| task_row(r, self.lease.get().stale))?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    /// The tasks of workspace `path`, newest first, as [`TaskStore::tasks`]; a task an older
    /// rawko made, which does not say, belongs to the workspace whose store holds it.
    pub fn tasks_in(&self, path: &str) -> Result<Vec<Task>> {
        let mut stmt = self.conn.prepare_cached(concat!(
            "SELECT ",
            task_columns!(),
            " FROM tasks WHERE workspace_path = ?1 OR workspace_path IS NULL
             ORDER BY created_at DESC, id DESC"
        ))?;
        let rows = stmt
            .query_map([path], |r| task_row(r, self.lease.get().stale))?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    /// Move a task to `to`, recording the transition, in one transaction.
    pub fn transition(&self, task: &str, t: &Transition, status: TaskStatus) -> Result<()> {
        self.transition_after(task, t, status, None)
    }

    /// Commit a transition together with what deciding it cost: `(turn, adapter, model,
    /// usage)` of the arbiter's completion, so a resumed task counts exactly the completions
    /// whose decisions it kept.
    pub fn transition_after(
        &self,
        task: &str,
        t: &Transition,
        status: TaskStatus,
        usage: Option<(i64, &str, &str, &Usage)>,
    ) -> Result<()> {
        self.fence(task)?;
        let tx = self.conn.unchecked_transaction()?;
        if let Some((turn, adapter, model, u)) = usage {
            self.insert_usage(turn, adapter, model, u)?;
        }
        tx.execute(
            "INSERT INTO transitions (task_id, from_state, to_state, event, mode, reason, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![task, t.from, t.to, t.event, t.mode, t.reason, t.at],
        )?;
        tx.execute(
            "UPDATE tasks SET state = ?2, status = ?3, steps = steps + 1, updated_at = ?4 WHERE id = ?1",
            params![task, t.to, status.as_str(), t.at],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Become `task`'s one runner: take its lease unless another runner holds it and is still
    /// at it ([`Lease::gone`] says not). Returns the holder when it is someone else. Taking a
    /// running task over from a runner that is gone records, in the audit log, that the task was
    /// interrupted and why. The lease is held by this process's whole identity ([`Holder`]) and
    /// its heartbeat written by the store's clock.
    pub fn acquire_lease(&self, task: &str) -> Result<std::result::Result<(), Lease>> {
        let me = Holder::this_process();
        let stale = self.lease.get().stale;
        retry_busy(|| self.conn.execute_batch("BEGIN IMMEDIATE"))?;
        let held = (|| -> rusqlite::Result<Option<Lease>> {
            let row = self
                .conn
                .query_row(
                    concat!(
                        "SELECT lease_pid, lease_host, lease_at, lease_start, lease_token, ",
                        store_now!(),
                        " - lease_at, status FROM tasks WHERE id = ?1"
                    ),
                    params![task],
                    |r| Ok((lease_of(r, 0)?, r.get::<_, String>(6)?)),
                )
                .optional()?;
            if let Some((Some(lease), status)) = row
                && !lease.held_by(me)
            {
                match lease.gone(&me.host, stale) {
                    None => return Ok(Some(lease)),
                    Some(why) if status == TaskStatus::Running.as_str() => {
                        self.conn.execute(
                            "INSERT INTO decisions
                             (task_id, subject, capability, detail, decision, reason, at)
                             VALUES (?1, 'rawko', 'lease', ?2, 'interrupted', ?3, ?4)",
                            params![
                                task,
                                format!("taken over by pid {} on {}", me.pid, me.host),
                                why,
                                now_ms()
                            ],
                        )?;
                    }
                    Some(_) => {}
                }
            }
            self.conn.execute(
                concat!(
                    "UPDATE tasks SET lease_pid = ?2, lease_host = ?3, lease_token = ?4,
                                      lease_start = ?5, lease_at = ",
                    store_now!(),
                    " WHERE id = ?1"
                ),
                params![
                    task,
                    me.pid as i64,
                    me.host,
                    me.token,
                    process_start(me.pid)
                ],
            )?;
            Ok(None)
        })();
        match held {
            Ok(holder) => {
                self.conn.execute_batch("COMMIT")?;
                if holder.is_none() {
                    self.held.borrow_mut().insert(task.to_string());
                }
                Ok(holder.map_or(Ok(()), Err))
            }
            Err(e) => {
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e.into())
            }
        }
    }

    /// Renew this process's lease on `task` (a heartbeat, by the store's clock); false when it
    /// is not this process's any more.
    pub fn renew_lease(&self, task: &str) -> Result<bool> {
        let me = Holder::this_process();
        let n = self.conn.execute(
            concat!(
                "UPDATE tasks SET lease_at = ",
                store_now!(),
                " WHERE id = ?1 AND lease_pid = ?2 AND lease_host = ?3 AND lease_token = ?4"
            ),
            params![task, me.pid as i64, me.host, me.token],
        )?;
        Ok(n == 1)
    }

    /// Give up this process's lease on `task`; a lease another runner holds stays.
    pub fn release_lease(&self, task: &str) -> Result<()> {
        let me = Holder::this_process();
        self.conn.execute(
            "UPDATE tasks SET lease_pid = NULL, lease_host = NULL, lease_at = NULL,
                              lease_start = NULL, lease_token = NULL
             WHERE id = ?1 AND lease_pid = ?2 AND lease_host = ?3 AND lease_token = ?4",
            params![task, me.pid as i64, me.host, me.token],
        )?;
        self.held.borrow_mut().remove(task);
        Ok(())
    }

    /// Take a cancelled or interrupted task up again where it stopped (`rawko resume`). A task
    /// that reads interrupted only because its runner is gone is still stored as running, and
    /// stays so: [`TaskStore::acquire_lease`] takes it over.
    pub fn reopen(&self, task: &str) -> Result<bool> {
        let n = self.conn.execute(
            "UPDATE tasks SET status = 'running', summary = NULL, updated_at = ?2
             WHERE id = ?1 AND status IN ('cancelled', 'interrupted')",
            params![task, now_ms()],
        )?;
        Ok(n == 1)
    }

    /// Record the trace of the run that first traced `task` (a W3C `traceparent`); a task that
    /// has one keeps it. Returns the one it has.
    pub fn set_trace(&self, task: &str, traceparent: &str) -> Result<String> {
        self.conn.execute(
            "UPDATE tasks SET trace = ?2 WHERE id = ?1 AND trace IS NULL",
            params![task, traceparent],
        )?;
        Ok(self
            .conn
            .query_row("SELECT trace FROM tasks WHERE id = ?1", [task], |r| {
                r.get::<_, Option<String>>(0)
            })?
            .unwrap_or_default())
    }

    /// Record that this process starts a run of `task` (its first or a resume), with its trace
    /// when traced; returns the run's id, for [`TaskStore::end_run`].
    pub fn start_run(&self, task: &str, trace: Option<&str>) -> Result<i64> {
        self.fence(task)?;
        self.conn.execute(
            "INSERT INTO runs (task_id, host, pid, trace, started_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![task, host_id(), std::process::id(), trace, now_ms()],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Record how run `run` of `task` ended.
    pub fn end_run(&self, task: &str, run: i64, status: &str) -> Result<()> {
        self.fence(task)?;
        self.conn.execute(
            "UPDATE runs SET ended_at = ?2, status = ?3 WHERE id = ?1",
            params![run, now_ms(), status],
        )?;
        Ok(())
    }

    /// The runs of a task, in order.
    pub fn runs(&self, task: &str) -> Result<Vec<Run>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, host, pid, trace, started_at, ended_at, status FROM runs
             WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([task], |r| {
                Ok(Run {
                    id: r.get(0)?,
                    host: r.get(1)?,
                    pid: r.get(2)?,
                    trace: r.get(3)?,
                    started_at: r.get(4)?,
                    ended_at: r.get(5)?,
                    status: r.get(6)?,
                })
            })?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    /// Record one model call (see [`ModelCall`]).
    pub fn record_model_call(&self, c: &ModelCall) -> Result<()> {
        self.fence_turn(c.turn_id)?;
        self.insert_model_call(c)
    }

    fn insert_model_call(&self, c: &ModelCall) -> Result<()> {
        self.conn.execute(
            "INSERT INTO model_calls (turn_id, adapter, model, response_model, finish_reason,
                                      attempt, outcome, started_at, ended_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                c.turn_id,
                c.adapter,
                c.model,
                c.response_model,
                c.finish_reason,
                c.attempt,
                c.outcome,
                c.started_at,
                c.ended_at
            ],
        )?;
        Ok(())
    }

    /// The model calls of a task, in order.
    pub fn model_calls(&self, task: &str) -> Result<Vec<ModelCall>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT m.turn_id, m.adapter, m.model, m.response_model, m.finish_reason, m.attempt,
                    m.outcome, m.started_at, m.ended_at
             FROM model_calls m JOIN turns t ON t.id = m.turn_id
             WHERE t.task_id = ?1 ORDER BY m.id",
        )?;
        let rows = stmt
            .query_map([task], |r| {
                Ok(ModelCall {
                    turn_id: r.get(0)?,
                    adapter: r.get(1)?,
                    model: r.get(2)?,
                    response_model: r.get(3)?,
                    finish_reason: r.get(4)?,
                    attempt: r.get(5)?,
                    outcome: r.get(6)?,
                    started_at: r.get(7)?,
                    ended_at: r.get(8)?,
                })
            })?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    /// Set a task's status and closing summary (e.g. cancelled by the user).
    pub fn finish_task(&self, task: &str, status: TaskStatus, summary: &str) -> Result<()> {
        self.fence(task)?;
        self.conn.execute(
            "UPDATE tasks SET status = ?2, summary = ?3, updated_at = ?4 WHERE id = ?1",
            params![task, status.as_str(), summary, now_ms()],
        )?;
        Ok(())
    }

    /// Refuse to change `task` when this store's runner took its lease and no longer holds it:
    /// another runner took the task over. Every write of a task's records checks it first, so
    /// a runner that was stalled past the staleness writes nothing once it wakes. (Checked
    /// before the write rather than inside its transaction, which would turn SQLite's read
    /// snapshot into a write lock that another writer may have moved past.)
    fn fence(&self, task: &str) -> Result<()> {
        if !self.held.borrow().contains(task) {
            return Ok(());
        }
        let me = Holder::this_process();
        let lease = self
            .conn
            .query_row(
                "SELECT lease_pid, lease_host, lease_at, lease_start, lease_token, 0 FROM tasks
                 WHERE id = ?1",
                params![task],
                |r| lease_of(r, 0),
            )
            .optional()?
            .flatten();
        match lease {
            Some(l) if l.held_by(me) => Ok(()),
            other => Err(StoreError::TakenOver {
                task: task.to_string(),
                by: other.map(|l| format!("pid {} on {}", l.pid, l.host)),
            }),
        }
    }

    /// [`TaskStore::fence`] for the task of `turn`.
    fn fence_turn(&self, turn: i64) -> Result<()> {
        if self.held.borrow().is_empty() {
            return Ok(());
        }
        let known = self.turn_tasks.borrow().get(&turn).cloned();
        let task = match known {
            Some(task) => task,
            None => {
                let task: Option<String> = self
                    .conn
                    .query_row("SELECT task_id FROM turns WHERE id = ?1", [turn], |r| {
                        r.get(0)
                    })
                    .optional()?;
                let Some(task) = task else {
                    return Ok(());
                };
                self.turn_tasks.borrow_mut().insert(turn, task.clone());
                task
            }
        };
        self.fence(&task)
    }

    pub fn transitions(&self, task: &str) -> Result<Vec<Transition>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT from_state, to_state, event, mode, reason, at FROM transitions
             WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([task], |r| {
                Ok(Transition {
                    from: r.get(0)?,
                    to: r.get(1)?,
                    event: r.get(2)?,
                    mode: r.get(3)?,
                    reason: r.get(4)?,
                    at: r.get(5)?,
                })
            })?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    // ---- turns ----

    /// Start a turn of `agent` (nested under `parent` when an agent is called as a tool).
    pub fn start_turn(&self, task: &str, agent: &str, parent: Option<i64>) -> Result<i64> {
        self.fence(task)?;
        self.conn.execute(
            "INSERT INTO turns (task_id, parent_id, agent, started_at) VALUES (?1, ?2, ?3, ?4)",
            params![task, parent, agent, now_ms()],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Close a turn with its outcome.
    pub fn end_turn(
        &self,
        turn: i64,
        outcome: &str,
        summary: &str,
        output: Option<&serde_json::Value>,
    ) -> Result<()> {
        self.fence_turn(turn)?;
        self.conn.execute(
            "UPDATE turns SET ended_at = ?2, outcome = ?3, summary = ?4, output = ?5 WHERE id = ?1",
            params![
                turn,
                now_ms(),
                outcome,
                summary,
                output.map(|o| o.to_string())
            ],
        )?;
        Ok(())
    }

    /// Count one more model round trip in a turn.
    pub fn bump_iterations(&self, turn: i64) -> Result<i64> {
        self.fence_turn(turn)?;
        self.conn.execute(
            "UPDATE turns SET iterations = iterations + 1 WHERE id = ?1",
            [turn],
        )?;
        Ok(self
            .conn
            .query_row("SELECT iterations FROM turns WHERE id = ?1", [turn], |r| {
                r.get(0)
            })?)
    }

    /// The turns of a task, in order.
    pub fn turns(&self, task: &str) -> Result<Vec<Turn>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, parent_id, agent, started_at, ended_at, outcome, summary, output, iterations
             FROM turns WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([task], turn_row)?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    /// The unfinished top-level turn of a task, if a run stopped inside one.
    pub fn open_turn(&self, task: &str, agent: &str) -> Result<Option<Turn>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, parent_id, agent, started_at, ended_at, outcome, summary, output, iterations
             FROM turns WHERE task_id = ?1 AND agent = ?2 AND parent_id IS NULL AND ended_at IS NULL
             ORDER BY id DESC LIMIT 1",
        )?;
        Ok(stmt.query_row(params![task, agent], turn_row).optional()?)
    }

    /// The unfinished turn of `agent` called as a tool from turn `parent`, if a run stopped
    /// inside it.
    pub fn open_child_turn(&self, parent: i64, agent: &str) -> Result<Option<Turn>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, parent_id, agent, started_at, ended_at, outcome, summary, output, iterations
             FROM turns WHERE parent_id = ?1 AND agent = ?2 AND ended_at IS NULL
             ORDER BY id DESC LIMIT 1",
        )?;
        Ok(stmt
            .query_row(params![parent, agent], turn_row)
            .optional()?)
    }

    // ---- messages ----

    pub fn append_message(
        &self,
        turn: i64,
        role: &str,
        content: &serde_json::Value,
    ) -> Result<i64> {
        self.fence_turn(turn)?;
        self.insert_message(turn, role, content)
    }

    fn insert_message(&self, turn: i64, role: &str, content: &serde_json::Value) -> Result<i64> {
        self.conn.execute(
            "INSERT INTO messages (turn_id, role, content, at) VALUES (?1, ?2, ?3, ?4)",
            params![turn, role, content.to_string(), now_ms()],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Commit a model's reply and the tokens it cost together, so a resumed task counts exactly
    /// the completions whose replies it kept.
    pub fn append_reply(
        &self,
        turn: i64,
        content: &serde_json::Value,
        adapter: &str,
        model: &str,
        u: &Usage,
    ) -> Result<i64> {
        self.fence_turn(turn)?;
        let tx = self.conn.unchecked_transaction()?;
        let id = self.insert_message(turn, "assistant", content)?;
        self.insert_usage(turn, adapter, model, u)?;
        tx.commit()?;
        Ok(id)
    }

    /// Record one call of a turn's model, with the turn's count of model round trips, and
    /// (when the model answered) its reply, what the reply cost and the audit rows of what it
    /// asked for that were decided at once, in one transaction; the reply's message id.
    pub fn record_answer(
        &self,
        task: &str,
        turn: i64,
        iterations: i64,
        call: &ModelCall,
        reply: Option<Reply<'_>>,
        decisions: &[AuditEntry],
    ) -> Result<Option<i64>> {
        self.fence_turn(turn)?;
        let tx = self.conn.unchecked_transaction()?;
        for d in decisions {
            self.insert_decision(task, d)?;
        }
        self.conn.execute(
            "UPDATE turns SET iterations = ?2 WHERE id = ?1",
            params![turn, iterations],
        )?;
        self.insert_model_call(call)?;
        let id = match reply {
            Some(r) => {
                let id = self.insert_message(turn, "assistant", r.content)?;
                self.insert_usage(turn, r.adapter, r.model, r.usage)?;
                Some(id)
            }
            None => None,
        };
        tx.commit()?;
        Ok(id)
    }

    /// How many completions of adapter instance `adapter` task `task` has kept.
    pub fn completions(&self, task: &str, adapter: &str) -> Result<u32> {
        let n: i64 = self.conn.query_row(
            "SELECT COUNT(*) FROM usage u JOIN turns t ON t.id = u.turn_id
             WHERE t.task_id = ?1 AND u.adapter = ?2",
            params![task, adapter],
            |r| r.get(0),
        )?;
        Ok(n.max(0) as u32)
    }

    pub fn messages(&self, turn: i64) -> Result<Vec<Message>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, role, content, at FROM messages WHERE turn_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([turn], |r| {
                let content: String = r.get(2)?;
                Ok(Message {
                    id: r.get(0)?,
                    role: r.get(1)?,
                    content: serde_json::from_str(&content)
                        .unwrap_or(serde_json::Value::String(content)),
                    at: r.get(3)?,
                })
            })?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    // ---- tool calls ----

    /// Record a finished tool call. A call id already recorded for the turn is kept as it was:
    /// a call runs at most once.
    pub fn record_tool_call(&self, c: &ToolCall) -> Result<bool> {
        self.fence_turn(c.turn_id)?;
        self.insert_tool_call(c)
    }

    fn insert_tool_call(&self, c: &ToolCall) -> Result<bool> {
        let inserted = self.conn.execute(
            "INSERT OR IGNORE INTO tool_calls
             (turn_id, call_id, tool, input, output, is_error, verdict, duration_us, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                c.turn_id,
                c.call_id,
                c.tool,
                c.input,
                c.output,
                c.is_error,
                c.verdict,
                c.duration_us,
                c.at
            ],
        )?;
        Ok(inserted == 1)
    }

    /// The message of a step's tool results, and with it the step's last tool call (when it
    /// is not recorded yet) and the audit rows its run made, in one transaction; the message's
    /// id.
    pub fn record_results(
        &self,
        task: &str,
        turn: i64,
        last: Option<&ToolCall>,
        decisions: &[AuditEntry],
        content: &serde_json::Value,
    ) -> Result<i64> {
        self.fence_turn(turn)?;
        let tx = self.conn.unchecked_transaction()?;
        for d in decisions {
            self.insert_decision(task, d)?;
        }
        if let Some(c) = last {
            self.insert_tool_call(c)?;
        }
        let id = self.insert_message(turn, "user", content)?;
        tx.commit()?;
        Ok(id)
    }

    /// The recorded result of call `call_id` in `turn`, if it ran.
    pub fn tool_call(&self, turn: i64, call_id: &str) -> Result<Option<ToolCall>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT turn_id, call_id, tool, input, output, is_error, verdict, duration_us, at
             FROM tool_calls WHERE turn_id = ?1 AND call_id = ?2",
        )?;
        Ok(stmt
            .query_row(params![turn, call_id], tool_call_row)
            .optional()?)
    }

    /// Every tool call of a task, in order.
    pub fn tool_calls(&self, task: &str) -> Result<Vec<ToolCall>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT c.turn_id, c.call_id, c.tool, c.input, c.output, c.is_error, c.verdict, c.duration_us, c.at
             FROM tool_calls c JOIN turns t ON t.id = c.turn_id WHERE t.task_id = ?1 ORDER BY c.id",
        )?;
        let rows = stmt
            .query_map([task], tool_call_row)?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    // ---- audit log ----

    pub fn record_decision(&self, task: &str, d: &AuditEntry) -> Result<()> {
        self.fence(task)?;
        self.insert_decision(task, d)
    }

    fn insert_decision(&self, task: &str, d: &AuditEntry) -> Result<()> {
        self.conn.execute(
            "INSERT INTO decisions (task_id, turn_id, subject, capability, detail, decision, reason, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![task, d.turn_id, d.subject, d.capability, d.detail, d.decision, d.reason, d.at],
        )?;
        Ok(())
    }

    pub fn decisions(&self, task: &str) -> Result<Vec<AuditEntry>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT turn_id, subject, capability, detail, decision, reason, at
             FROM decisions WHERE task_id = ?1 ORDER BY id",
        )?;
        let rows = stmt
            .query_map([task], |r| {
                Ok(AuditEntry {
                    turn_id: r.get(0)?,
                    subject: r.get(1)?,
                    capability: r.get(2)?,
                    detail: r.get(3)?,
                    decision: r.get(4)?,
                    reason: r.get(5)?,
                    at: r.get(6)?,
                })
            })?
            .collect::<std::result::Result<_, _>>()?;
        Ok(rows)
    }

    // ---- usage ----

    pub fn record_usage(&self, turn: i64, adapter: &str, model: &str, u: &Usage) -> Result<()> {
        self.fence_turn(turn)?;
        self.insert_usage(turn, adapter, model, u)
    }

    fn insert_usage(&self, turn: i64, adapter: &str, model: &str, u: &Usage) -> Result<()> {
        self.conn.execute(
            "INSERT INTO usage (turn_id, adapter, model, input_tokens, output_tokens, cache_read, cache_write, at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![turn, adapter, model, u.input_tokens, u.output_tokens, u.cache_read, u.cache_write, now_ms()],
        )?;
        Ok(())
    }

    /// Total tokens a task used.
    /// The tokens of each turn of `task` that used any, by turn id.
    pub fn usage_by_turn(&self, task: &str) -> Result<Vec<(i64, Usage)>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT u.turn_id, SUM(u.input_tokens), SUM(u.output_tokens), SUM(u.cache_read),
                    SUM(u.cache_write)
             FROM usage u JOIN turns t ON t.id = u.turn_id WHERE t.task_id = ?1
             GROUP BY u.turn_id ORDER BY u.turn_id",
        )?;
        let rows = stmt.query_map([task], |r| {
            Ok((
                r.get(0)?,
                Usage {
                    input_tokens: r.get(1)?,
                    output_tokens: r.get(2)?,
                    cache_read: r.get(3)?,
                    cache_write: r.get(4)?,
                },
            ))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// What changes whenever anything of `task` is committed: a view asks it often, and reads
    /// the task again when it moved.
    ///
    /// Asked again while nothing was committed (`PRAGMA data_version` counts other connections'
    /// commits, the connection's total changes its own), it answers from memory without reading
    /// any table: a page polling an idle store costs one pragma.
    pub fn stamp(&self, task: &str) -> Result<String> {
        let version: i64 = self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?;
        let own = self.conn.total_changes();
        let mut stamps = self.stamps.borrow_mut();
        if (stamps.0, stamps.1) != (version, own) {
            *stamps = (version, own, Default::default());
        }
        if let Some(stamp) = stamps.2.get(task) {
            return Ok(stamp.clone());
        }
        let stamp: String = self.conn.query_row(STAMP_SQL, [task], |r| r.get(0))?;
        stamps.2.insert(task.to_string(), stamp.clone());
        Ok(stamp)
    }

    pub fn task_usage(&self, task: &str) -> Result<Usage> {
        Ok(self.conn.query_row(
            "SELECT COALESCE(SUM(u.input_tokens),0), COALESCE(SUM(u.output_tokens),0),
                    COALESCE(SUM(u.cache_read),0), COALESCE(SUM(u.cache_write),0)
             FROM usage u JOIN turns t ON t.id = u.turn_id WHERE t.task_id = ?1",
            [task],
            |r| {
                Ok(Usage {
                    input_tokens: r.get(0)?,
                    output_tokens: r.get(1)?,
                    cache_read: r.get(2)?,
                    cache_write: r.get(3)?,
                })
            },
        )?)
    }
}

/// A short id that sorts by creation time: seconds since 2024 in base 36, then four random
/// base-36 characters. Easy to type, unique within a workspace in practice, and checked.
fn new_task_id() -> String {
    const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let secs = (now_ms() / 1000 - 1_704_067_200).max(0) as u64;
    let mut out = Vec::new();
    let mut v = secs;
    loop {
        out.push(DIGITS[(v % 36) as usize]);
        v /= 36;
        if v == 0 {
            break;
        }
    }
    out.reverse();
    for _ in 0..4 {
        out.push(DIGITS[fastrand::usize(..36)]);
    }
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests;
