//! The rows the store hands out (tasks, transitions, turns, messages, tool calls, audit entries,
//! usage) and how each is read from its SQL row.

use serde::Serialize;

use crate::lease::{Lease, host_id};
use crate::now_ms;
use crate::workspace::WorkspaceId;

/// Where a task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskStatus {
    /// Started and not finished, and its runner is still at it (or it has no lease: a task
    /// driven without one, as `rawko mcp serve --agents` does).
    Running,
    Done,
    Failed,
    Escalated,
    Cancelled,
    /// Stopped by a fault that outlived its retries (the model unreachable), or its runner is
    /// gone (killed, crashed, its machine down): resumable.
    Interrupted,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Done => "done",
            TaskStatus::Failed => "failed",
            TaskStatus::Escalated => "escalated",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Interrupted => "interrupted",
        }
    }

    /// Whether `rawko resume` takes the task up again: it stopped without ending.
    pub fn is_resumable(self) -> bool {
        matches!(
            self,
            TaskStatus::Running | TaskStatus::Cancelled | TaskStatus::Interrupted
        )
    }

    pub(crate) fn parse(s: &str) -> TaskStatus {
        match s {
            "done" => TaskStatus::Done,
            "failed" => TaskStatus::Failed,
            "escalated" => TaskStatus::Escalated,
            "cancelled" => TaskStatus::Cancelled,
            "interrupted" => TaskStatus::Interrupted,
            _ => TaskStatus::Running,
        }
    }

    pub fn is_finished(self) -> bool {
        self != TaskStatus::Running
    }
}

/// A task row.
#[derive(Debug, Clone, Serialize)]
pub struct Task {
    pub id: String,
    pub prompt: String,
    pub status: TaskStatus,
    /// The current FSM state: an agent's name, or a terminal state.
    pub state: String,
    /// The run options, as JSON.
    pub options: serde_json::Value,
    pub steps: i64,
    /// How it ended; why it stopped, for a task interrupted or cancelled.
    pub summary: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// The workspace it was made in; None for a task an older rawko made.
    pub workspace: Option<WorkspaceId>,
    /// The host it was made on; None for a task an older rawko made.
    pub host: Option<String>,
    /// The trace of the run that first traced it (a W3C `traceparent`), which the traces of
    /// later runs link to; None when no run of it was traced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
}

/// A transition row.
#[derive(Debug, Clone, Serialize)]
pub struct Transition {
    pub from: Option<String>,
    pub to: String,
    pub event: String,
    /// How the target was chosen: `start`, `fixed`, `llm`, `fallback`, `limit`, ...
    pub mode: String,
    pub reason: String,
    pub at: i64,
}

/// A turn row: one agent's stay in one state (or a nested call of an agent as a tool).
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    pub id: i64,
    pub parent_id: Option<i64>,
    pub agent: String,
    pub started_at: i64,
    pub ended_at: Option<i64>,
    pub outcome: Option<String>,
    pub summary: Option<String>,
    pub output: Option<serde_json::Value>,
    pub iterations: i64,
}

/// A message row; `content` is the provider-neutral JSON the agent loop stores.
#[derive(Debug, Clone, Serialize)]
pub struct Message {
    pub id: i64,
    pub role: String,
    pub content: serde_json::Value,
    pub at: i64,
}

/// A tool call row.
#[derive(Debug, Clone, Serialize)]
pub struct ToolCall {
    pub turn_id: i64,
    pub call_id: String,
    pub tool: String,
    pub input: String,
    pub output: String,
    pub is_error: bool,
    /// `allowed`, `denied: <why>`, ... what the host decided before running it.
    pub verdict: String,
    pub duration_us: i64,
    pub at: i64,
}

impl ToolCall {
    /// The record of call `id` of `tool` in `turn`, finished now.
    #[allow(clippy::too_many_arguments)]
    pub fn finished(
        turn: i64,
        id: &str,
        tool: &str,
        input: &str,
        output: &str,
        is_error: bool,
        verdict: &str,
        duration_us: i64,
    ) -> ToolCall {
        ToolCall {
            turn_id: turn,
            call_id: id.to_string(),
            tool: tool.to_string(),
            input: input.to_string(),
            output: output.to_string(),
            is_error,
            verdict: verdict.to_string(),
            duration_us,
            at: crate::now_ms(),
        }
    }
}

/// An audit-log row: one capability decision.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    pub turn_id: Option<i64>,
    /// Who asked: an agent, a tool, a plugin.
    pub subject: String,
    /// `tool`, `fs.read`, `fs.write`, `exec`, `net.http`, `agent`, `transition`, ...
    pub capability: String,
    pub detail: String,
    /// `allow` or `deny`.
    pub decision: String,
    pub reason: String,
    pub at: i64,
}

impl AuditEntry {
    /// A decision made now, about no turn yet; long texts are cut to what the log keeps.
    pub fn new(
        subject: &str,
        capability: &str,
        detail: &str,
        decision: &str,
        reason: &str,
    ) -> AuditEntry {
        AuditEntry {
            turn_id: None,
            subject: subject.to_string(),
            capability: capability.to_string(),
            detail: detail.chars().take(500).collect(),
            decision: decision.to_string(),
            reason: reason.chars().take(1000).collect(),
            at: now_ms(),
        }
    }

    /// The same decision, made in `turn`.
    pub fn in_turn(self, turn: i64) -> AuditEntry {
        AuditEntry {
            turn_id: Some(turn),
            ..self
        }
    }
}

/// One run of a task: the first, and each that resumed it, by whom, when, how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Run {
    pub id: i64,
    pub host: String,
    pub pid: i64,
    /// The run's trace (a W3C `traceparent`), when its traces were exported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<String>,
    pub started_at: i64,
    /// None while it runs, or when it was killed before it could say.
    pub ended_at: Option<i64>,
    pub status: Option<String>,
}

/// One model call: which model was asked and which answered, how it ended (`ok`, or the kind of
/// failure: `transport`, `http_status`, `malformed_response`, `model_error`, `timeout`,
/// `cancelled`), and whether it was a call asked again (`attempt` > 0).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelCall {
    pub turn_id: i64,
    pub adapter: String,
    pub model: String,
    pub response_model: Option<String>,
    pub finish_reason: Option<String>,
    pub attempt: i64,
    pub outcome: String,
    pub started_at: i64,
    pub ended_at: i64,
}

/// A model's reply as a turn keeps it: its content and what it cost.
#[derive(Debug, Clone, Copy)]
pub struct Reply<'a> {
    pub content: &'a serde_json::Value,
    pub adapter: &'a str,
    /// The model that answered.
    pub model: &'a str,
    pub usage: &'a Usage,
}

/// Tokens one model call used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cache_read: i64,
    pub cache_write: i64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        self.input_tokens += o.input_tokens;
        self.output_tokens += o.output_tokens;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
    }
}

/// A task row (with its lease, columns 9 to 14, then its workspace and host), its status as it
/// is now, leases going stale after `stale`.
pub(crate) fn task_row(
    r: &rusqlite::Row<'_>,
    stale: std::time::Duration,
) -> rusqlite::Result<Task> {
    let status: String = r.get(2)?;
    let options: String = r.get(4)?;
    let mut task = Task {
        id: r.get(0)?,
        prompt: r.get(1)?,
        status: TaskStatus::parse(&status),
        state: r.get(3)?,
        options: serde_json::from_str(&options).unwrap_or(serde_json::Value::Null),
        steps: r.get(5)?,
        summary: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
        workspace: r
            .get::<_, Option<String>>(17)?
            .map(|path| -> rusqlite::Result<WorkspaceId> {
                Ok(WorkspaceId {
                    root: r.get(15)?,
                    remote: r.get(16)?,
                    path,
                })
            })
            .transpose()?,
        host: r.get(18)?,
        trace: r.get(19)?,
    };
    if task.status == TaskStatus::Running
        && let Some(lease) = lease_of(r, 9)?
        && let Some(why) = lease.gone(&host_id(), stale)
    {
        task.status = TaskStatus::Interrupted;
        task.summary = Some(why);
    }
    Ok(task)
}

/// The lease in columns `at..at + 6` (pid, host, heartbeat, start, token, age by the store's
/// clock), if one is held.
pub(crate) fn lease_of(r: &rusqlite::Row<'_>, at: usize) -> rusqlite::Result<Option<Lease>> {
    let pid: Option<i64> = r.get(at)?;
    let host: Option<String> = r.get(at + 1)?;
    let beat: Option<i64> = r.get(at + 2)?;
    Ok(match (pid, host, beat) {
        (Some(pid), Some(host), Some(at_ms)) => Some(Lease {
            pid: u32::try_from(pid).unwrap_or(u32::MAX),
            host,
            at: at_ms,
            start: r.get(at + 3)?,
            token: r.get(at + 4)?,
            age: r.get::<_, Option<i64>>(at + 5)?.unwrap_or(0),
        }),
        _ => None,
    })
}

pub(crate) fn turn_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Turn> {
    let output: Option<String> = r.get(7)?;
    Ok(Turn {
        id: r.get(0)?,
        parent_id: r.get(1)?,
        agent: r.get(2)?,
        started_at: r.get(3)?,
        ended_at: r.get(4)?,
        outcome: r.get(5)?,
        summary: r.get(6)?,
        output: output.and_then(|o| serde_json::from_str(&o).ok()),
        iterations: r.get(8)?,
    })
}

pub(crate) fn tool_call_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ToolCall> {
    Ok(ToolCall {
        turn_id: r.get(0)?,
        call_id: r.get(1)?,
        tool: r.get(2)?,
        input: r.get(3)?,
        output: r.get(4)?,
        is_error: r.get(5)?,
        verdict: r.get(6)?,
        duration_us: r.get(7)?,
        at: r.get(8)?,
    })
}
