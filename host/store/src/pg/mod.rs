//! The task store on PostgreSQL, for runners on several machines sharing one store: the same
//! records as the SQLite [`TaskStore`](crate::TaskStore), the same leases (holder identity,
//! heartbeat, staleness judged by the server's clock), the same fence on every write of a task
//! whose lease this runner took, and the same refusal of a schema rawko did not create.
//!
//! Everything lives in a schema of rawko's own, `rawko`, and every name in rawko's statements is
//! qualified with it; each connection also puts it first on its search path and keeps
//! synchronous commits on ([`PgConfig`]). Connections come from a small pool, and every write is
//! one transaction, committed before the call returns.

mod blobs;
mod connect;
mod error;
mod schema;
mod transfer;
mod write;

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use deadpool_postgres::Transaction;
use deadpool_postgres::{Manager, ManagerConfig, Pool, PoolError, RecyclingMethod};
use tokio_postgres::{NoTls, Row, Statement};

pub use connect::{PgConfig, redact};
pub use error::{PgError, PgErrorKind};

use write::Fence;

use crate::{
    AuditEntry, Holder, Lease, LeaseSettings, Message, ModelCall, Result, Run, StoreError, Task,
    TaskStatus, ToolCall, Transition, Turn, Usage, WorkspaceId, host_id, new_task_id, now_ms,
    process_start,
};

/// The server's clock, in milliseconds since the Unix epoch, as SQL: every lease is written and
/// judged by it, so that a runner whose own clock is wrong neither keeps nor takes a lease.
macro_rules! pg_now {
    () => {
        "(EXTRACT(EPOCH FROM pg_catalog.now()) * 1000)::bigint"
    };
}

/// A task row's columns, as [`task_row`] reads them.
macro_rules! task_columns {
    () => {
        concat!(
            "id, prompt, status, state, options, steps, summary, created_at, updated_at,
             lease_pid, lease_host, lease_at, lease_start, lease_token, ",
            pg_now!(),
            " - lease_at, workspace_root, workspace_remote, workspace_path, host, trace"
        )
    };
}

/// A message of a turn, returning its id.
const INSERT_MESSAGE: &str = "INSERT INTO rawko.messages (turn_id, role, content, at)
     VALUES ($1, $2, $3, $4) RETURNING id";

/// One call of a turn's model.
const INSERT_MODEL_CALL: &str = "INSERT INTO rawko.model_calls (turn_id, adapter, model,
     response_model, finish_reason, attempt, outcome, started_at, ended_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

/// A finished tool call, unless the turn has one of its id already.
const INSERT_TOOL_CALL: &str = "INSERT INTO rawko.tool_calls
     (turn_id, call_id, tool, input, output, is_error, verdict, duration_us, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
     ON CONFLICT (turn_id, call_id) DO NOTHING
     RETURNING id";

/// An audit row.
const INSERT_DECISION: &str = "INSERT INTO rawko.decisions
     (task_id, turn_id, subject, capability, detail, decision, reason, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

/// The tokens one reply cost.
const INSERT_USAGE: &str = "INSERT INTO rawko.usage (turn_id, adapter, model, input_tokens,
     output_tokens, cache_read, cache_write, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

const TURN_COLUMNS: &str =
    "id, parent_id, agent, started_at, ended_at, outcome, summary, output, iterations";

/// The schema version this rawko makes and knows (a store at a higher one is refused).
pub const SCHEMA_VERSION: usize = schema::MIGRATIONS.len();

/// The tables whose rows have an identity id.
const IDENTITY_TABLES: &[&str] = &[
    "transitions",
    "turns",
    "messages",
    "tool_calls",
    "decisions",
    "usage",
    "runs",
    "model_calls",
];

/// How many connections one rawko keeps to the store.
const POOL_SIZE: usize = 4;

/// An open PostgreSQL task store.
pub struct PgStore {
    pool: Pool,
    config: PgConfig,
    label: String,
    lease: Mutex<LeaseSettings>,
    workspace: Mutex<Option<WorkspaceId>>,
    /// The tasks whose lease this store's runner took: their records are changed only while it
    /// still holds it.
    held: Mutex<HashSet<String>>,
    /// The task of each turn the fence has looked up (a turn never changes task).
    turn_tasks: Mutex<std::collections::HashMap<i64, String>>,
    /// A connection was found lost: the idle ones are dropped before the next is handed out,
    /// since the lost one may not know it yet (the server's goodbye still unread).
    lost: AtomicBool,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("store", &self.label)
            .finish()
    }
}

type Client = deadpool_postgres::Object;

/// The channel every write names its task on, for `rawko ui`'s live pages: `LISTEN
/// rawko_changes` hears the task's id once each write that changed it commits.
pub const CHANGES: &str = "rawko_changes";

/// Hears which tasks change: the id of each task a write changed, once that write commits
/// (from any rawko using the store), on a connection of its own.
pub struct Listener {
    // The connection lives as long as its client.
    _client: tokio_postgres::Client,
    changes: futures::channel::mpsc::UnboundedReceiver<String>,
}

impl Listener {
    /// `LISTEN` on [`CHANGES`] on a new connection to `config`'s server. Must be called inside
    /// a tokio runtime, which drives the connection.
    pub async fn start(config: &PgConfig) -> std::result::Result<Listener, PgError> {
        use futures::StreamExt as _;
        let label = config.label();
        let (client, mut connection) = config
            .config
            .connect(NoTls)
            .await
            .map_err(|e| PgError::connect(&label, &e, false))?;
        let (sender, changes) = futures::channel::mpsc::unbounded();
        tokio::spawn(async move {
            let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
            while let Some(Ok(message)) = messages.next().await {
                if let tokio_postgres::AsyncMessage::Notification(n) = message
                    && sender.unbounded_send(n.payload().to_string()).is_err()
                {
                    break;
                }
            }
        });
        client
            .batch_execute(&format!("LISTEN {CHANGES}"))
            .await
            .map_err(|e| PgError::connect(&label, &e, true))?;
        Ok(Listener {
            _client: client,
            changes,
        })
    }

    /// The next task changed; None once the connection is gone.
    pub async fn next(&mut self) -> Option<String> {
        use futures::StreamExt as _;
        self.changes.next().await
    }
}

/// Which task a write changed: named, or found from one of its turns.
#[derive(Clone, Copy)]
enum Changed<'a> {
    Task(&'a str),
    Turn(i64),
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl PgStore {
    /// Connect to the store `config` names and bring its schema up to date. The `rawko` schema
    /// must hold nothing but what rawko's migrations made: anything else is an error naming it,
    /// and a schema a newer rawko made is refused.
    pub async fn open(config: &PgConfig) -> Result<PgStore> {
        let store = PgStore::unopened(config)?;
        let mut client = store.connect(false).await?;
        schema::migrate(&mut client, &store.label).await?;
        Ok(store)
    }

    /// A store on `config`'s server whose schema has not been checked: connections are made as
    /// they are needed.
    fn unopened(config: &PgConfig) -> Result<PgStore> {
        let label = config.label();
        let manager = Manager::from_config(
            config.config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .build()
            .map_err(|e| PgError::new(&label, PgErrorKind::Config(e.to_string())))?;
        Ok(PgStore {
            pool,
            config: config.clone(),
            label,
            lease: Default::default(),
            workspace: Default::default(),
            held: Default::default(),
            turn_tasks: Default::default(),
            lost: AtomicBool::new(false),
        })
    }

    /// Another pool of connections to the same store, for a thread of its own (a heartbeat), with
    /// this one's lease settings; its schema is not checked again.
    pub fn beside(&self) -> Result<PgStore> {
        let store = PgStore::unopened(&self.config)?;
        store.set_lease_settings(self.lease_settings());
        Ok(store)
    }

    /// Where the store is.
    pub fn config(&self) -> &PgConfig {
        &self.config
    }

    /// The store's URL, without its password.
    pub fn label(&self) -> &str {
        &self.label
    }

    async fn connect(&self, was_open: bool) -> Result<Client> {
        if self.lost.swap(false, Ordering::Relaxed) {
            self.pool.retain(|_, _| false);
        }
        self.pool.get().await.map_err(|e| {
            StoreError::Pg(match e {
                PoolError::Backend(e) => PgError::connect(&self.label, &e, was_open),
                other => PgError::new(&self.label, PgErrorKind::Sql(other.to_string())),
            })
        })
    }

    async fn client(&self) -> Result<Client> {
        self.connect(true).await
    }

    /// `sql` prepared on the transaction's connection, once per connection: a statement then
    /// costs one round trip to the server instead of two.
    async fn prepared(&self, tx: &Transaction<'_>, sql: &str) -> Result<Statement> {
        tx.prepare_cached(sql).await.map_err(|e| self.err(e))
    }

    /// The rows of a read, its statement prepared once per connection.
    async fn read(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<Row>> {
        let c = self.client().await?;
        let statement = c.prepare_cached(sql).await.map_err(|e| self.err(e))?;
        c.query(&statement, params).await.map_err(|e| self.err(e))
    }

    async fn read_one(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Row> {
        let c = self.client().await?;
        let statement = c.prepare_cached(sql).await.map_err(|e| self.err(e))?;
        c.query_one(&statement, params)
            .await
            .map_err(|e| self.err(e))
    }

    async fn read_opt(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Option<Row>> {
        let c = self.client().await?;
        let statement = c.prepare_cached(sql).await.map_err(|e| self.err(e))?;
        c.query_opt(&statement, params)
            .await
            .map_err(|e| self.err(e))
    }

    /// A write whose `INSERT ... RETURNING` returned nothing: the server did not do what it
    /// said it did.
    fn no_row(&self, table: &str) -> StoreError {
        StoreError::Pg(PgError::new(
            &self.label,
            PgErrorKind::Sql(format!("an insert into {table} returned no row")),
        ))
    }

    fn err(&self, e: tokio_postgres::Error) -> StoreError {
        let e = PgError::query(&self.label, &e);
        if e.is_connection_lost() {
            self.lost.store(true, Ordering::Relaxed);
        }
        StoreError::Pg(e)
    }

    /// How leases are renewed and when they go stale, from now on.
    pub fn set_lease_settings(&self, settings: LeaseSettings) {
        *lock(&self.lease) = settings;
    }

    pub fn lease_settings(&self) -> LeaseSettings {
        *lock(&self.lease)
    }

    /// The workspace the tasks this store creates from now on belong to.
    pub fn set_workspace(&self, workspace: WorkspaceId) {
        *lock(&self.workspace) = Some(workspace);
    }

    pub fn has_workspace(&self) -> bool {
        lock(&self.workspace).is_some()
    }

    fn stale(&self) -> Duration {
        lock(&self.lease).stale
    }

    fn holds(&self, task: &str) -> bool {
        lock(&self.held).contains(task)
    }

    /// After rows were written with ids of their own (an import keeps a store's ids), move each
    /// table's id sequence past the largest id, so the next row rawko adds does not take one.
    pub async fn advance_ids(&self) -> Result<()> {
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(|e| self.err(e))?;
        Self::advance_ids_in(&tx).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))
    }

    async fn advance_ids_in(
        tx: &Transaction<'_>,
    ) -> std::result::Result<(), tokio_postgres::Error> {
        for table in IDENTITY_TABLES {
            tx.execute(
                &format!(
                    "SELECT pg_catalog.setval(pg_catalog.pg_get_serial_sequence('rawko.{table}', \
                     'id'), GREATEST((SELECT max(id) FROM rawko.{table}), 1), \
                     (SELECT max(id) IS NOT NULL FROM rawko.{table}))"
                ),
                &[],
            )
            .await?;
        }
        Ok(())
    }

    // ---- tasks ----

    /// Create a task in `state` with a fresh id, and return the id.
    pub async fn create_task(
        &self,
        prompt: &str,
        state: &str,
        options: &serde_json::Value,
    ) -> Result<String> {
        let now = now_ms();
        let workspace = lock(&self.workspace).clone();
        let workspace = workspace.as_ref();
        let options = options.to_string();
        let (root, remote, path) = (
            workspace.and_then(|w| w.root.as_deref()),
            workspace.and_then(|w| w.remote.as_deref()),
            workspace.map(|w| w.path.as_str()),
        );
        let host = host_id();
        let c = self.client().await?;
        loop {
            let id = new_task_id();
            let inserted = c
                .execute(
                    "INSERT INTO rawko.tasks (id, prompt, status, state, options, created_at,
                                              updated_at, workspace_root, workspace_remote,
                                              workspace_path, host)
                     VALUES ($1, $2, 'running', $3, $4, $5, $5, $6, $7, $8, $9)
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &id, &prompt, &state, &options, &now, &root, &remote, &path, &host,
                    ],
                )
                .await
                .map_err(|e| self.err(e))?;
            if inserted == 1 {
                return Ok(id);
            }
        }
    }

    /// The task `id`, or the unique task whose id starts with `id`; its status as it is now.
    pub async fn task(&self, id: &str) -> Result<Task> {
        let pattern = format!(
            "{}%",
            id.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let rows = self
            .read(
                concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM rawko.tasks WHERE id = $1 OR id LIKE $2 ESCAPE '\\'
                     ORDER BY id = $1 DESC LIMIT 2"
                ),
                &[&id, &pattern],
            )
            .await?;
        let stale = self.stale();
        let rows: Vec<Task> = rows.iter().map(|r| task_row(r, stale)).collect();
        match rows.as_slice() {
            [t] => Ok(t.clone()),
            [t, _] if t.id == id => Ok(t.clone()),
            _ => Err(StoreError::NoSuchTask(id.to_string())),
        }
    }

    /// Every task, newest first, each with its status as it is now (see
    /// [`TaskStore::tasks`](crate::TaskStore::tasks)).
    pub async fn tasks(&self) -> Result<Vec<Task>> {
        let rows = self
            .read(
                concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM rawko.tasks ORDER BY created_at DESC, id DESC"
                ),
                &[],
            )
            .await?;
        let stale = self.stale();
        Ok(rows.iter().map(|r| task_row(r, stale)).collect())
    }

    /// The tasks of workspace `path`, newest first; a task that does not say belongs to every
    /// workspace, as in the SQLite store.
    pub async fn tasks_in(&self, path: &str) -> Result<Vec<Task>> {
        let rows = self
            .read(
                concat!(
                    "SELECT ",
                    task_columns!(),
                    " FROM rawko.tasks WHERE workspace_path = $1 OR workspace_path IS NULL
                     ORDER BY created_at DESC, id DESC"
                ),
                &[&path],
            )
            .await?;
        let stale = self.stale();
        Ok(rows.iter().map(|r| task_row(r, stale)).collect())
    }

    /// Move a task to `to`, recording the transition, in one transaction.
    pub async fn transition(&self, task: &str, t: &Transition, status: TaskStatus) -> Result<()> {
        self.transition_after(task, t, status, None).await
    }

    /// Commit a transition together with what deciding it cost.
    pub async fn transition_after(
        &self,
        task: &str,
        t: &Transition,
        status: TaskStatus,
        usage: Option<(i64, &str, &str, &Usage)>,
    ) -> Result<()> {
        let at = now_ms();
        let status = status.as_str();
        let mut statements: Vec<(&'static str, write::Params<'_>)> = Vec::with_capacity(3);
        if let Some((turn, adapter, model, u)) = &usage {
            statements.push((
                INSERT_USAGE,
                write::usage_params(turn, adapter, model, u, &at),
            ));
        }
        statements.push((
            "INSERT INTO rawko.transitions (task_id, from_state, to_state, event, mode, reason, at)
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
            vec![&task, &t.from, &t.to, &t.event, &t.mode, &t.reason, &t.at],
        ));
        statements.push((
            "UPDATE rawko.tasks SET state = $2, status = $3, steps = steps + 1, updated_at = $4
             WHERE id = $1",
            vec![&task, &t.to, &status, &t.at],
        ));
        self.write_once(Fence::Task(task), Changed::Task(task), statements)
            .await
            .map(drop)
    }

    /// Become `task`'s one runner, as [`TaskStore::acquire_lease`](crate::TaskStore::acquire_lease):
    /// its lease is taken unless another runner holds it and is still at it, with the task's row
    /// locked meanwhile, the heartbeat written and judged by the server's clock.
    pub async fn acquire_lease(&self, task: &str) -> Result<std::result::Result<(), Lease>> {
        let me = Holder::this_process();
        let stale = self.stale();
        let mut c = self.client().await?;
        let tx = c.transaction().await.map_err(|e| self.err(e))?;
        let row = tx
            .query_opt(
                &self
                    .prepared(
                        &tx,
                        concat!(
                            "SELECT lease_pid, lease_host, lease_at, lease_start, lease_token, ",
                            pg_now!(),
                            " - lease_at, status FROM rawko.tasks WHERE id = $1 FOR UPDATE"
                        ),
                    )
                    .await?,
                &[&task],
            )
            .await
            .map_err(|e| self.err(e))?;
        if let Some(row) = row
            && let Some(lease) = lease_of(&row, 0)
            && !lease.held_by(me)
        {
            match lease.gone(&me.host, stale) {
                None => {
                    tx.rollback().await.map_err(|e| self.err(e))?;
                    return Ok(Err(lease));
                }
                Some(why) if row.get::<_, String>(6) == TaskStatus::Running.as_str() => {
                    tx.execute(
                        &self
                            .prepared(
                                &tx,
                                "INSERT INTO rawko.decisions
                         (task_id, subject, capability, detail, decision, reason, at)
                         VALUES ($1, 'rawko', 'lease', $2, 'interrupted', $3, $4)",
                            )
                            .await?,
                        &[
                            &task,
                            &format!("taken over by pid {} on {}", me.pid, me.host),
                            &why,
                            &now_ms(),
                        ],
                    )
                    .await
                    .map_err(|e| self.err(e))?;
                }
                Some(_) => {}
            }
        }
        tx.execute(
            &self
                .prepared(
                    &tx,
                    concat!(
                        "UPDATE rawko.tasks SET lease_pid = $2, lease_host = $3, lease_token = $4,
                                        lease_start = $5, lease_at = ",
                        pg_now!(),
                        " WHERE id = $1"
                    ),
                )
                .await?,
            &[
                &task,
                &(me.pid as i64),
                &me.host,
                &me.token,
                &process_start(me.pid),
            ],
        )
        .await
        .map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        lock(&self.held).insert(task.to_string());
        Ok(Ok(()))
    }

    /// Renew this process's lease on `task` (a heartbeat, by the server's clock); false when it
    /// is not this process's any more.
    pub async fn renew_lease(&self, task: &str) -> Result<bool> {
        let me = Holder::this_process();
        let n = self
            .client()
            .await?
            .execute(
                concat!(
                    "UPDATE rawko.tasks SET lease_at = ",
                    pg_now!(),
                    " WHERE id = $1 AND lease_pid = $2 AND lease_host = $3 AND lease_token = $4"
                ),
                &[&task, &(me.pid as i64), &me.host, &me.token],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Give up this process's lease on `task`; a lease another runner holds stays.
    pub async fn release_lease(&self, task: &str) -> Result<()> {
        let me = Holder::this_process();
        self.client()
            .await?
            .execute(
                "UPDATE rawko.tasks SET lease_pid = NULL, lease_host = NULL, lease_at = NULL,
                                        lease_start = NULL, lease_token = NULL
                 WHERE id = $1 AND lease_pid = $2 AND lease_host = $3 AND lease_token = $4",
                &[&task, &(me.pid as i64), &me.host, &me.token],
            )
            .await
            .map_err(|e| self.err(e))?;
        lock(&self.held).remove(task);
        Ok(())
    }

    /// Take a cancelled or interrupted task up again where it stopped.
    pub async fn reopen(&self, task: &str) -> Result<bool> {
        let n = self
            .client()
            .await?
            .execute(
                "UPDATE rawko.tasks SET status = 'running', summary = NULL, updated_at = $2
                 WHERE id = $1 AND status IN ('cancelled', 'interrupted')",
                &[&task, &now_ms()],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    /// Record the trace of the run that first traced `task`; a task that has one keeps it.
    /// Returns the one it has.
    pub async fn set_trace(&self, task: &str, traceparent: &str) -> Result<String> {
        let c = self.client().await?;
        c.execute(
            "UPDATE rawko.tasks SET trace = $2 WHERE id = $1 AND trace IS NULL",
            &[&task, &traceparent],
        )
        .await
        .map_err(|e| self.err(e))?;
        let row = c
            .query_one("SELECT trace FROM rawko.tasks WHERE id = $1", &[&task])
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.get::<_, Option<String>>(0).unwrap_or_default())
    }

    /// Record that this process starts a run of `task`; returns the run's id.
    pub async fn start_run(&self, task: &str, trace: Option<&str>) -> Result<i64> {
        let (host, pid, at) = (host_id(), i64::from(std::process::id()), now_ms());
        let rows = self
            .write_once(
                Fence::Task(task),
                Changed::Task(task),
                vec![(
                    "INSERT INTO rawko.runs (task_id, host, pid, trace, started_at)
                     VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    vec![&task, &host, &pid, &trace, &at],
                )],
            )
            .await?;
        first_value(&rows, 0).ok_or_else(|| self.no_row("runs"))
    }

    /// Record how run `run` of `task` ended.
    pub async fn end_run(&self, task: &str, run: i64, status: &str) -> Result<()> {
        let at = now_ms();
        self.write_once(
            Fence::Task(task),
            Changed::Task(task),
            vec![(
                "UPDATE rawko.runs SET ended_at = $2, status = $3 WHERE id = $1",
                vec![&run, &at, &status],
            )],
        )
        .await
        .map(drop)
    }

    /// The runs of a task, in order.
    pub async fn runs(&self, task: &str) -> Result<Vec<Run>> {
        let rows = self
            .read(
                "SELECT id, host, pid, trace, started_at, ended_at, status FROM rawko.runs
                 WHERE task_id = $1 ORDER BY id",
                &[&task],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Run {
                id: r.get(0),
                host: r.get(1),
                pid: r.get(2),
                trace: r.get(3),
                started_at: r.get(4),
                ended_at: r.get(5),
                status: r.get(6),
            })
            .collect())
    }

    /// Record one model call.
    pub async fn record_model_call(&self, m: &ModelCall) -> Result<()> {
        self.write_once(
            Fence::Turn(m.turn_id),
            Changed::Turn(m.turn_id),
            vec![(INSERT_MODEL_CALL, write::model_call_params(m))],
        )
        .await
        .map(drop)
    }

    /// The model calls of a task, in order.
    pub async fn model_calls(&self, task: &str) -> Result<Vec<ModelCall>> {
        let rows = self
            .read(
                "SELECT m.turn_id, m.adapter, m.model, m.response_model, m.finish_reason,
                        m.attempt, m.outcome, m.started_at, m.ended_at
                 FROM rawko.model_calls m JOIN rawko.turns t ON t.id = m.turn_id
                 WHERE t.task_id = $1 ORDER BY m.id",
                &[&task],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| ModelCall {
                turn_id: r.get(0),
                adapter: r.get(1),
                model: r.get(2),
                response_model: r.get(3),
                finish_reason: r.get(4),
                attempt: r.get(5),
                outcome: r.get(6),
                started_at: r.get(7),
                ended_at: r.get(8),
            })
            .collect())
    }

    /// Set a task's status and closing summary.
    pub async fn finish_task(&self, task: &str, status: TaskStatus, summary: &str) -> Result<()> {
        let (status, at) = (status.as_str(), now_ms());
        self.write_once(
            Fence::Task(task),
            Changed::Task(task),
            vec![(
                "UPDATE rawko.tasks SET status = $2, summary = $3, updated_at = $4 WHERE id = $1",
                vec![&task, &status, &summary, &at],
            )],
        )
        .await
        .map(drop)
    }

    pub async fn transitions(&self, task: &str) -> Result<Vec<Transition>> {
        let rows = self
            .read(
                "SELECT from_state, to_state, event, mode, reason, at FROM rawko.transitions
                 WHERE task_id = $1 ORDER BY id",
                &[&task],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| Transition {
                from: r.get(0),
                to: r.get(1),
                event: r.get(2),
                mode: r.get(3),
                reason: r.get(4),
                at: r.get(5),
            })
            .collect())
    }

    // ---- turns ----

    /// Start a turn of `agent` (nested under `parent` when an agent is called as a tool).
    pub async fn start_turn(&self, task: &str, agent: &str, parent: Option<i64>) -> Result<i64> {
        let at = now_ms();
        let rows = self
            .write_once(
                Fence::Task(task),
                Changed::Task(task),
                vec![(
                    "INSERT INTO rawko.turns (task_id, parent_id, agent, started_at)
                     VALUES ($1, $2, $3, $4) RETURNING id",
                    vec![&task, &parent, &agent, &at],
                )],
            )
            .await?;
        first_value(&rows, 0).ok_or_else(|| self.no_row("turns"))
    }

    /// Close a turn with its outcome.
    pub async fn end_turn(
        &self,
        turn: i64,
        outcome: &str,
        summary: &str,
        output: Option<&serde_json::Value>,
    ) -> Result<()> {
        let (output, at) = (output.map(|o| o.to_string()), now_ms());
        self.write_once(
            Fence::Turn(turn),
            Changed::Turn(turn),
            vec![(
                "UPDATE rawko.turns SET ended_at = $2, outcome = $3, summary = $4, output = $5
                 WHERE id = $1",
                vec![&turn, &at, &outcome, &summary, &output],
            )],
        )
        .await
        .map(drop)
    }

    /// Count one more model round trip in a turn.
    pub async fn bump_iterations(&self, turn: i64) -> Result<i64> {
        let rows = self
            .write_once(
                Fence::Turn(turn),
                Changed::Turn(turn),
                vec![(
                    "UPDATE rawko.turns SET iterations = iterations + 1 WHERE id = $1
                     RETURNING iterations",
                    vec![&turn],
                )],
            )
            .await?;
        Ok(first_value(&rows, 0).unwrap_or(0))
    }

    /// The turns of a task, in order.
    pub async fn turns(&self, task: &str) -> Result<Vec<Turn>> {
        let rows = self
            .client()
            .await?
            .query(
                &format!("SELECT {TURN_COLUMNS} FROM rawko.turns WHERE task_id = $1 ORDER BY id"),
                &[&task],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(rows.iter().map(turn_row).collect())
    }

    /// The unfinished top-level turn of a task, if a run stopped inside one.
    pub async fn open_turn(&self, task: &str, agent: &str) -> Result<Option<Turn>> {
        let row = self
            .client()
            .await?
            .query_opt(
                &format!(
                    "SELECT {TURN_COLUMNS} FROM rawko.turns
                     WHERE task_id = $1 AND agent = $2 AND parent_id IS NULL AND ended_at IS NULL
                     ORDER BY id DESC LIMIT 1"
                ),
                &[&task, &agent],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.as_ref().map(turn_row))
    }

    /// The unfinished turn of `agent` called as a tool from turn `parent`, if a run stopped
    /// inside it.
    pub async fn open_child_turn(&self, parent: i64, agent: &str) -> Result<Option<Turn>> {
        let row = self
            .client()
            .await?
            .query_opt(
                &format!(
                    "SELECT {TURN_COLUMNS} FROM rawko.turns
                     WHERE parent_id = $1 AND agent = $2 AND ended_at IS NULL
                     ORDER BY id DESC LIMIT 1"
                ),
                &[&parent, &agent],
            )
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.as_ref().map(turn_row))
    }

    // ---- messages ----

    pub async fn append_message(
        &self,
        turn: i64,
        role: &str,
        content: &serde_json::Value,
    ) -> Result<i64> {
        let content = content.to_string();
        let at = now_ms();
        let rows = self
            .write_once(
                Fence::Turn(turn),
                Changed::Turn(turn),
                vec![(INSERT_MESSAGE, vec![&turn, &role, &content, &at])],
            )
            .await?;
        first_value(&rows, 0).ok_or_else(|| self.no_row("messages"))
    }

    /// Commit a model's reply and the tokens it cost together.
    pub async fn append_reply(
        &self,
        turn: i64,
        content: &serde_json::Value,
        adapter: &str,
        model: &str,
        u: &Usage,
    ) -> Result<i64> {
        let content = content.to_string();
        let at = now_ms();
        let rows = self
            .write_once(
                Fence::Turn(turn),
                Changed::Turn(turn),
                vec![
                    (INSERT_MESSAGE, vec![&turn, &"assistant", &content, &at]),
                    (
                        INSERT_USAGE,
                        write::usage_params(&turn, &adapter, &model, u, &at),
                    ),
                ],
            )
            .await?;
        first_value(&rows, 0).ok_or_else(|| self.no_row("messages"))
    }

    /// How many completions of adapter instance `adapter` task `task` has kept.
    pub async fn completions(&self, task: &str, adapter: &str) -> Result<u32> {
        let row = self
            .read_one(
                "SELECT COUNT(*) FROM rawko.usage u JOIN rawko.turns t ON t.id = u.turn_id
                 WHERE t.task_id = $1 AND u.adapter = $2",
                &[&task, &adapter],
            )
            .await?;
        Ok(row.get::<_, i64>(0).max(0) as u32)
    }

    pub async fn messages(&self, turn: i64) -> Result<Vec<Message>> {
        let rows = self
            .read(
                "SELECT id, role, content, at FROM rawko.messages WHERE turn_id = $1 ORDER BY id",
                &[&turn],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let content: String = r.get(2);
                Message {
                    id: r.get(0),
                    role: r.get(1),
                    content: serde_json::from_str(&content)
                        .unwrap_or(serde_json::Value::String(content)),
                    at: r.get(3),
                }
            })
            .collect())
    }

    // ---- tool calls ----

    /// Record a finished tool call. A call id already recorded for the turn is kept as it was:
    /// a call runs at most once.
    pub async fn record_tool_call(&self, t: &ToolCall) -> Result<bool> {
        let rows = self
            .write_once(
                Fence::Turn(t.turn_id),
                Changed::Turn(t.turn_id),
                vec![(INSERT_TOOL_CALL, write::tool_call_params(t))],
            )
            .await?;
        Ok(rows.first().is_some_and(|r| !r.is_empty()))
    }

    /// The recorded result of call `call_id` in `turn`, if it ran.
    pub async fn tool_call(&self, turn: i64, call_id: &str) -> Result<Option<ToolCall>> {
        let row = self
            .read_opt(
                "SELECT turn_id, call_id, tool, input, output, is_error, verdict, duration_us, at
                 FROM rawko.tool_calls WHERE turn_id = $1 AND call_id = $2",
                &[&turn, &call_id],
            )
            .await?;
        Ok(row.as_ref().map(tool_call_row))
    }

    /// Every tool call of a task, in order.
    pub async fn tool_calls(&self, task: &str) -> Result<Vec<ToolCall>> {
        let rows = self
            .read(
                "SELECT c.turn_id, c.call_id, c.tool, c.input, c.output, c.is_error, c.verdict,
                        c.duration_us, c.at
                 FROM rawko.tool_calls c JOIN rawko.turns t ON t.id = c.turn_id
                 WHERE t.task_id = $1 ORDER BY c.id",
                &[&task],
            )
            .await?;
        Ok(rows.iter().map(tool_call_row).collect())
    }

    // ---- audit log ----

    pub async fn record_decision(&self, task: &str, d: &AuditEntry) -> Result<()> {
        self.write_once(
            Fence::Task(task),
            Changed::Task(task),
            vec![(INSERT_DECISION, write::decision_params(&task, d))],
        )
        .await
        .map(drop)
    }

    pub async fn decisions(&self, task: &str) -> Result<Vec<AuditEntry>> {
        let rows = self
            .read(
                "SELECT turn_id, subject, capability, detail, decision, reason, at
                 FROM rawko.decisions WHERE task_id = $1 ORDER BY id",
                &[&task],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| AuditEntry {
                turn_id: r.get(0),
                subject: r.get(1),
                capability: r.get(2),
                detail: r.get(3),
                decision: r.get(4),
                reason: r.get(5),
                at: r.get(6),
            })
            .collect())
    }

    // ---- usage ----

    pub async fn record_usage(
        &self,
        turn: i64,
        adapter: &str,
        model: &str,
        u: &Usage,
    ) -> Result<()> {
        let at = now_ms();
        self.write_once(
            Fence::Turn(turn),
            Changed::Turn(turn),
            vec![(
                INSERT_USAGE,
                write::usage_params(&turn, &adapter, &model, u, &at),
            )],
        )
        .await
        .map(drop)
    }

    /// Total tokens a task used.
    /// The tokens of each turn of `task` that used any, by turn id.
    pub async fn usage_by_turn(&self, task: &str) -> Result<Vec<(i64, Usage)>> {
        let rows = self
            .read(
                "SELECT u.turn_id, SUM(u.input_tokens)::bigint, SUM(u.output_tokens)::bigint,
                        SUM(u.cache_read)::bigint, SUM(u.cache_write)::bigint
                 FROM rawko.usage u JOIN rawko.turns t ON t.id = u.turn_id WHERE t.task_id = $1
                 GROUP BY u.turn_id ORDER BY u.turn_id",
                &[&task],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                (
                    r.get(0),
                    Usage {
                        input_tokens: r.get(1),
                        output_tokens: r.get(2),
                        cache_read: r.get(3),
                        cache_write: r.get(4),
                    },
                )
            })
            .collect())
    }

    /// What changes whenever anything of `task` is committed.
    pub async fn stamp(&self, task: &str) -> Result<String> {
        let r = self
            .read_one(
                "SELECT COALESCE((SELECT updated_at FROM rawko.tasks WHERE id = $1), -1) || '/' ||
                    COALESCE((SELECT max(m.id) FROM rawko.messages m
                              JOIN rawko.turns t ON t.id = m.turn_id WHERE t.task_id = $1), 0)
                    || '/' ||
                    COALESCE((SELECT max(c.id) FROM rawko.tool_calls c
                              JOIN rawko.turns t ON t.id = c.turn_id WHERE t.task_id = $1), 0)
                    || '/' ||
                    COALESCE((SELECT max(id) FROM rawko.turns WHERE task_id = $1), 0) || '/' ||
                    COALESCE((SELECT max(id) FROM rawko.decisions WHERE task_id = $1), 0) || '/' ||
                    COALESCE((SELECT max(id) FROM rawko.runs WHERE task_id = $1), 0) || '/' ||
                    COALESCE((SELECT max(ended_at) FROM rawko.turns WHERE task_id = $1), 0)",
                &[&task],
            )
            .await?;
        Ok(r.get(0))
    }

    pub async fn task_usage(&self, task: &str) -> Result<Usage> {
        let r = self
            .read_one(
                "SELECT COALESCE(SUM(u.input_tokens),0)::bigint,
                        COALESCE(SUM(u.output_tokens),0)::bigint,
                        COALESCE(SUM(u.cache_read),0)::bigint,
                        COALESCE(SUM(u.cache_write),0)::bigint
                 FROM rawko.usage u JOIN rawko.turns t ON t.id = u.turn_id WHERE t.task_id = $1",
                &[&task],
            )
            .await?;
        Ok(Usage {
            input_tokens: r.get(0),
            output_tokens: r.get(1),
            cache_read: r.get(2),
            cache_write: r.get(3),
        })
    }
}

/// A task row (its lease in columns 9 to 14, then its workspace, host and trace), its status as
/// it is now, leases going stale after `stale`.
fn task_row(r: &Row, stale: Duration) -> Task {
    let status: String = r.get(2);
    let options: String = r.get(4);
    let mut task = Task {
        id: r.get(0),
        prompt: r.get(1),
        status: TaskStatus::parse(&status),
        state: r.get(3),
        options: serde_json::from_str(&options).unwrap_or(serde_json::Value::Null),
        steps: r.get(5),
        summary: r.get(6),
        created_at: r.get(7),
        updated_at: r.get(8),
        workspace: r.get::<_, Option<String>>(17).map(|path| WorkspaceId {
            root: r.get(15),
            remote: r.get(16),
            path,
        }),
        host: r.get(18),
        trace: r.get(19),
    };
    if task.status == TaskStatus::Running
        && let Some(lease) = lease_of(r, 9)
        && let Some(why) = lease.gone(&host_id(), stale)
    {
        task.status = TaskStatus::Interrupted;
        task.summary = Some(why);
    }
    task
}

/// The first column of the first row statement `at` of a write returned.
fn first_value(rows: &[Vec<Row>], at: usize) -> Option<i64> {
    rows.get(at)?.first().map(|r| r.get(0))
}

/// The lease in columns `at..at + 6` (pid, host, heartbeat, start, token, age by the server's
/// clock), if one is held.
fn lease_of(r: &Row, at: usize) -> Option<Lease> {
    let pid: Option<i64> = r.get(at);
    let host: Option<String> = r.get(at + 1);
    let beat: Option<i64> = r.get(at + 2);
    match (pid, host, beat) {
        (Some(pid), Some(host), Some(at_ms)) => Some(Lease {
            pid: u32::try_from(pid).unwrap_or(u32::MAX),
            host,
            at: at_ms,
            start: r.get(at + 3),
            token: r.get(at + 4),
            age: r.get::<_, Option<i64>>(at + 5).unwrap_or(0),
        }),
        _ => None,
    }
}

fn turn_row(r: &Row) -> Turn {
    let output: Option<String> = r.get(7);
    Turn {
        id: r.get(0),
        parent_id: r.get(1),
        agent: r.get(2),
        started_at: r.get(3),
        ended_at: r.get(4),
        outcome: r.get(5),
        summary: r.get(6),
        output: output.and_then(|o| serde_json::from_str(&o).ok()),
        iterations: r.get(8),
    }
}

fn tool_call_row(r: &Row) -> ToolCall {
    ToolCall {
        turn_id: r.get(0),
        call_id: r.get(1),
        tool: r.get(2),
        input: r.get(3),
        output: r.get(4),
        is_error: r.get(5),
        verdict: r.get(6),
        duration_us: r.get(7),
        at: r.get(8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_with_an_identity_id_is_advanced() {
        let mut made: Vec<&str> = Vec::new();
        for m in schema::MIGRATIONS {
            let mut table = None;
            for line in m.lines() {
                if let Some(rest) = line.strip_prefix("CREATE TABLE rawko.") {
                    table = rest.split([' ', '(']).next();
                }
                if line.contains("GENERATED BY DEFAULT AS IDENTITY") {
                    made.extend(table);
                }
            }
        }
        made.sort_unstable();
        let mut listed = IDENTITY_TABLES.to_vec();
        listed.sort_unstable();
        assert_eq!(made, listed);
    }
}
