//! A write in one round trip. A transaction written as `BEGIN`, a check, the statements and
//! `COMMIT`, each awaited in turn, waits on the server four or five times before its commit
//! is flushed; here every message of the transaction is sent at once and the answers are read
//! together, so a write costs one round trip and one flush of the server's log.
//!
//! What makes that safe is that nothing sent depends on an answer: the statements are prepared
//! beforehand (once per connection), and the lease fence is itself a statement that fails when
//! this runner no longer holds the task's lease. A failure aborts the transaction on the
//! server, which then runs nothing more of it and turns the `COMMIT` already sent into a
//! rollback; the first failure in the order sent is the one reported.
//!
//! Every message goes to the connection when its request is first polled, and the requests are
//! polled in the order given, before any answer is awaited, so the server sees them in that
//! order. A write dropped before it was first polled sent nothing; one dropped after sent all of
//! it, `COMMIT` included, so its connection never goes back to the pool inside a transaction.

use std::future::Future;
use std::pin::Pin;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use super::{Changed, Client, PgStore, lease_of, lock};
use crate::{Holder, Result, StoreError};

/// A statement's parameters.
pub(super) type Params<'a> = Vec<&'a (dyn ToSql + Sync)>;

/// The statement that fails unless this runner holds task `$1`'s lease: it divides by the
/// number of matching rows, and locks the row (shared) until the transaction ends, so no
/// takeover can come between the check and the writes after it.
const FENCE: &str = "SELECT 1 / (SELECT pg_catalog.count(*) FROM (
     SELECT 1 FROM rawko.tasks
     WHERE id = $1 AND lease_pid = $2 AND lease_host = $3 AND lease_token = $4
       AND lease_at IS NOT NULL
     FOR SHARE) held)::int";

/// PostgreSQL's code for a division by zero: the fence's refusal.
const FENCE_REFUSED: &str = "22012";

/// Which task's lease a write must still hold.
#[derive(Clone, Copy)]
pub(super) enum Fence<'a> {
    Task(&'a str),
    Turn(i64),
}

type Answer<'a> =
    Pin<Box<dyn Future<Output = std::result::Result<Vec<Row>, tokio_postgres::Error>> + Send + 'a>>;

impl PgStore {
    /// Run `statements` (SQL and parameters, in order) as one transaction behind the lease
    /// fence for `fence`, with a change notice for `changed`, in one round trip; the rows each
    /// statement returned.
    pub(super) async fn write_once(
        &self,
        fence: Fence<'_>,
        changed: Changed<'_>,
        statements: Vec<(&'static str, Params<'_>)>,
    ) -> Result<Vec<Vec<Row>>> {
        let client = self.client().await?;
        let fenced = self.fenced_task(&client, fence).await?;
        let me = Holder::this_process();
        let pid = i64::from(me.pid);
        let fence_params: Option<Params<'_>> = fenced
            .as_ref()
            .map(|task| vec![task as _, &pid as _, &me.host as _, &me.token as _]);
        let fence_statement = match fenced {
            Some(_) => Some(self.prepare(&client, FENCE).await?),
            None => None,
        };
        let mut prepared: Vec<Statement> = Vec::with_capacity(statements.len());
        for (sql, _) in &statements {
            prepared.push(self.prepare(&client, sql).await?);
        }
        let (notice_sql, notice_param): (&str, &(dyn ToSql + Sync)) = match &changed {
            Changed::Task(task) => ("SELECT pg_notify('rawko_changes', $1)", task),
            Changed::Turn(turn) => (
                "SELECT pg_notify('rawko_changes', task_id) FROM rawko.turns WHERE id = $1",
                turn,
            ),
        };
        let notice = self.prepare(&client, notice_sql).await?;

        // Nothing below awaits before every request is sent.
        let c: &tokio_postgres::Client = &client;
        let mut sent: Vec<Answer<'_>> = Vec::with_capacity(statements.len() + 4);
        sent.push(Box::pin(async move {
            c.batch_execute("BEGIN").await.map(|()| Vec::new())
        }));
        let mut fence_at = None;
        if let (Some(s), Some(p)) = (&fence_statement, &fence_params) {
            fence_at = Some(sent.len());
            sent.push(Box::pin(c.query(s, p)));
        }
        let first_statement = sent.len();
        for (s, (_, p)) in prepared.iter().zip(&statements) {
            sent.push(Box::pin(c.query(s, p)));
        }
        sent.push(Box::pin(
            c.query(&notice, std::slice::from_ref(&notice_param)),
        ));
        sent.push(Box::pin(async move {
            c.batch_execute("COMMIT").await.map(|()| Vec::new())
        }));
        let answers = futures::future::join_all(sent).await;

        let mut rows = Vec::with_capacity(statements.len());
        for (i, answer) in answers.into_iter().enumerate() {
            match answer {
                Ok(r) => {
                    if (first_statement..first_statement + statements.len()).contains(&i) {
                        rows.push(r);
                    }
                }
                Err(e)
                    if fence_at == Some(i) && e.code().map(|c| c.code()) == Some(FENCE_REFUSED) =>
                {
                    let task = fenced.unwrap_or_default();
                    return Err(self.taken_over(&client, task).await);
                }
                Err(e) => return Err(self.err(e)),
            }
        }
        Ok(rows)
    }

    /// The task whose lease a write for `fence` must check: none when this runner took no
    /// lease on it (a store used without leases, or another runner's task being read).
    async fn fenced_task(&self, client: &Client, fence: Fence<'_>) -> Result<Option<String>> {
        let task = match fence {
            Fence::Task(task) => task.to_string(),
            Fence::Turn(turn) => {
                if lock(&self.held).is_empty() {
                    return Ok(None);
                }
                // A turn never changes task: each is looked up once.
                let known = lock(&self.turn_tasks).get(&turn).cloned();
                match known {
                    Some(task) => task,
                    None => {
                        let statement = self
                            .prepare(client, "SELECT task_id FROM rawko.turns WHERE id = $1")
                            .await?;
                        let found = client
                            .query_opt(&statement, &[&turn])
                            .await
                            .map_err(|e| self.err(e))?;
                        let Some(row) = found else { return Ok(None) };
                        let task: String = row.get(0);
                        lock(&self.turn_tasks).insert(turn, task.clone());
                        task
                    }
                }
            }
        };
        Ok(self.holds(&task).then_some(task))
    }

    /// The error for a write the fence refused: who holds the lease now, if anyone.
    async fn taken_over(&self, client: &Client, task: String) -> StoreError {
        let holder = match self
            .prepare(
                client,
                "SELECT lease_pid, lease_host, lease_at, lease_start, lease_token, 0::bigint
                 FROM rawko.tasks WHERE id = $1",
            )
            .await
        {
            Ok(s) => client.query_opt(&s, &[&task]).await.ok().flatten(),
            Err(_) => None,
        };
        StoreError::TakenOver {
            task,
            by: holder
                .and_then(|r| lease_of(&r, 0))
                .map(|l| format!("pid {} on {}", l.pid, l.host)),
        }
    }

    /// `sql` prepared on `client`'s connection, once per connection.
    async fn prepare(&self, client: &Client, sql: &str) -> Result<Statement> {
        client.prepare_cached(sql).await.map_err(|e| self.err(e))
    }
}

/// The parameters of [`super::INSERT_USAGE`].
pub(super) fn usage_params<'a>(
    turn: &'a i64,
    adapter: &'a &'a str,
    model: &'a &'a str,
    u: &'a crate::Usage,
    at: &'a i64,
) -> Params<'a> {
    vec![
        turn,
        adapter,
        model,
        &u.input_tokens,
        &u.output_tokens,
        &u.cache_read,
        &u.cache_write,
        at,
    ]
}

/// The parameters of [`super::INSERT_MODEL_CALL`].
pub(super) fn model_call_params(m: &crate::ModelCall) -> Params<'_> {
    vec![
        &m.turn_id,
        &m.adapter,
        &m.model,
        &m.response_model,
        &m.finish_reason,
        &m.attempt,
        &m.outcome,
        &m.started_at,
        &m.ended_at,
    ]
}

/// The parameters of [`super::INSERT_DECISION`].
pub(super) fn decision_params<'a>(task: &'a &'a str, d: &'a crate::AuditEntry) -> Params<'a> {
    vec![
        task,
        &d.turn_id,
        &d.subject,
        &d.capability,
        &d.detail,
        &d.decision,
        &d.reason,
        &d.at,
    ]
}

/// The parameters of [`super::INSERT_TOOL_CALL`].
pub(super) fn tool_call_params(t: &crate::ToolCall) -> Params<'_> {
    vec![
        &t.turn_id,
        &t.call_id,
        &t.tool,
        &t.input,
        &t.output,
        &t.is_error,
        &t.verdict,
        &t.duration_us,
        &t.at,
    ]
}

impl PgStore {
    /// Record one call of a turn's model, with the turn's count of model round trips, and (when
    /// the model answered) its reply and what the reply cost, in one transaction; the reply's
    /// message id.
    pub async fn record_answer(
        &self,
        task: &str,
        turn: i64,
        iterations: i64,
        call: &crate::ModelCall,
        reply: Option<crate::Reply<'_>>,
        decisions: &[crate::AuditEntry],
    ) -> Result<Option<i64>> {
        let at = crate::now_ms();
        let content = reply.map(|r| r.content.to_string());
        let mut statements: Vec<(&'static str, Params<'_>)> = vec![
            (
                "UPDATE rawko.turns SET iterations = $2 WHERE id = $1",
                vec![&turn, &iterations],
            ),
            (super::INSERT_MODEL_CALL, model_call_params(call)),
        ];
        if let (Some(r), Some(content)) = (&reply, &content) {
            statements.push((
                super::INSERT_MESSAGE,
                vec![&turn, &"assistant", content, &at],
            ));
            statements.push((
                super::INSERT_USAGE,
                usage_params(&turn, &r.adapter, &r.model, r.usage, &at),
            ));
        }
        let message = statements.len() - 2;
        for d in decisions {
            statements.push((super::INSERT_DECISION, decision_params(&task, d)));
        }
        let rows = self
            .write_once(Fence::Turn(turn), Changed::Turn(turn), statements)
            .await?;
        match reply {
            Some(_) => super::first_value(&rows, message)
                .map(Some)
                .ok_or_else(|| self.no_row("messages")),
            None => Ok(None),
        }
    }

    /// The message of a step's tool results, and with it the step's last tool call (when it is
    /// not recorded yet), in one transaction; the message's id.
    pub async fn record_results(
        &self,
        task: &str,
        turn: i64,
        last: Option<&crate::ToolCall>,
        decisions: &[crate::AuditEntry],
        content: &serde_json::Value,
    ) -> Result<i64> {
        let at = crate::now_ms();
        let content = content.to_string();
        let mut statements: Vec<(&'static str, Params<'_>)> = Vec::with_capacity(2);
        for d in decisions {
            statements.push((super::INSERT_DECISION, decision_params(&task, d)));
        }
        if let Some(t) = last {
            statements.push((super::INSERT_TOOL_CALL, tool_call_params(t)));
        }
        let message = statements.len();
        statements.push((super::INSERT_MESSAGE, vec![&turn, &"user", &content, &at]));
        let rows = self
            .write_once(Fence::Turn(turn), Changed::Turn(turn), statements)
            .await?;
        super::first_value(&rows, message).ok_or_else(|| self.no_row("messages"))
    }
}
