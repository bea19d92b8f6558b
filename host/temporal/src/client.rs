//! The client side: start a task's workflow, ask how far it got, cancel it, wait for its end.

use std::time::Duration;

use std::time::{SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use temporalio_client::errors::{
    WorkflowGetResultError, WorkflowInteractionError, WorkflowStartError,
};
use temporalio_client::{
    Client, RpcOptions, WorkflowCancelOptions, WorkflowDescribeOptions, WorkflowExecutionStatus,
    WorkflowGetResultOptions, WorkflowIdReusePolicy, WorkflowListOptions, WorkflowQueryOptions,
    WorkflowStartOptions,
};

use crate::payload::{Progress, TaskInput, TaskOutcome};
use crate::workflow::RawkoTask;
use crate::workflow_id;

/// A Temporal server's tasks, as a client sees them.
pub struct Remote {
    client: Client,
    /// The shared queue tasks start on.
    queue: String,
    namespace: String,
}

/// Why a task's workflow could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("task {0} already runs on Temporal (workflow {1}); `rawko tasks show {0}` follows it")]
    Running(String, String),
    #[error("Temporal refused to start task {task}: {reason}")]
    Refused { task: String, reason: String },
}

/// A task's workflow as Temporal keeps it (its latest run).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Execution {
    /// The task's id in the team store.
    pub task: String,
    /// running, completed, failed, cancelled, terminated, continued-as-new, timed-out, paused.
    pub status: &'static str,
    pub run: String,
    pub queue: String,
    /// Milliseconds since the Unix epoch.
    pub started_ms: Option<i64>,
    pub closed_ms: Option<i64>,
    /// Events in the run's history.
    pub events: i64,
}

/// Why a workflow failed: the deepest cause its failure carries. A workflow that failed because
/// an activity did says only that at the top ("Activity task failed", and the event's number);
/// the activity's own message, the reason, is at the bottom.
fn reason(e: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = e.to_string();
    let mut at = e.source();
    while let Some(e) = at {
        let text = e.to_string();
        if !text.trim().is_empty() {
            reason = text;
        }
        at = e.source();
    }
    reason
}

fn status_name(s: WorkflowExecutionStatus) -> &'static str {
    match s {
        WorkflowExecutionStatus::Running => "running",
        WorkflowExecutionStatus::Completed => "completed",
        WorkflowExecutionStatus::Failed => "failed",
        WorkflowExecutionStatus::Canceled => "cancelled",
        WorkflowExecutionStatus::Terminated => "terminated",
        WorkflowExecutionStatus::ContinuedAsNew => "continued-as-new",
        WorkflowExecutionStatus::TimedOut => "timed-out",
        WorkflowExecutionStatus::Paused => "paused",
        _ => "unknown",
    }
}

fn ms(t: Option<SystemTime>) -> Option<i64> {
    t.and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| d.as_millis() as i64)
}

/// The task a workflow id names, when it is one of rawko's.
fn task_of(workflow: &str) -> Option<&str> {
    workflow.strip_prefix(crate::WORKFLOW_PREFIX)
}

/// How a followed workflow ended.
#[derive(Debug)]
pub enum Follow {
    /// It returned: the task finished (or stopped, to be resumed) with this outcome.
    Ended(TaskOutcome),
    /// It was cancelled (Ctrl-C, or `temporal workflow cancel`).
    Cancelled,
    /// It failed, was terminated or timed out, with why.
    Failed(String),
}

impl Remote {
    pub fn new(client: Client, namespace: &str, queue: &str) -> Remote {
        Remote {
            client,
            queue: queue.to_string(),
            namespace: namespace.to_string(),
        }
    }

    /// Start `input.task`'s workflow on the shared queue. A task whose earlier workflow ended
    /// (a cancelled or interrupted one being resumed) may start again; one still running may
    /// not.
    pub async fn start(&self, input: TaskInput, summary: &str) -> Result<(), StartError> {
        let id = workflow_id(&input.task);
        let task = input.task.clone();
        let options = WorkflowStartOptions::new(self.queue.clone(), id.clone())
            .id_reuse_policy(WorkflowIdReusePolicy::AllowDuplicate)
            .static_summary(summary.to_string())
            .build();
        match self
            .client
            .start_workflow(RawkoTask::run, input, options)
            .await
        {
            Ok(_) => Ok(()),
            Err(WorkflowStartError::AlreadyStarted { .. }) => Err(StartError::Running(task, id)),
            Err(WorkflowStartError::Rpc(status)) => Err(StartError::Refused {
                task,
                reason: status.message().to_string(),
            }),
            Err(e) => Err(StartError::Refused {
                task,
                reason: e.to_string(),
            }),
        }
    }

    /// What the task's workflow has reported so far. A query needs a worker to answer it:
    /// without one it fails after `wait`.
    pub async fn progress(&self, task: &str, wait: Duration) -> Result<Progress, String> {
        let handle = self
            .client
            .get_workflow_handle::<RawkoTask>(workflow_id(task));
        let options = WorkflowQueryOptions::builder()
            .rpc_options(RpcOptions::builder().timeout(wait).build())
            .build();
        handle
            .query(RawkoTask::progress, (), options)
            .await
            .map_err(|e| e.to_string())
    }

    /// Ask the task's workflow to stop: the state running now stops and the task is kept,
    /// cancelled, to be resumed.
    pub async fn cancel(&self, task: &str, reason: &str) -> Result<(), String> {
        let handle = self
            .client
            .get_workflow_handle::<RawkoTask>(workflow_id(task));
        handle
            .cancel(
                WorkflowCancelOptions::builder()
                    .reason(reason.to_string())
                    .build(),
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// Wait for the task's workflow to end, following it across continue-as-new.
    pub async fn wait(&self, task: &str) -> Follow {
        let handle = self
            .client
            .get_workflow_handle::<RawkoTask>(workflow_id(task));
        match handle.get_result(WorkflowGetResultOptions::default()).await {
            Ok(outcome) => Follow::Ended(outcome),
            Err(WorkflowGetResultError::Cancelled { .. }) => Follow::Cancelled,
            Err(WorkflowGetResultError::Failed(e)) => Follow::Failed(reason(&*e)),
            Err(e) => Follow::Failed(e.to_string()),
        }
    }

    /// The tasks' workflows in this namespace, newest first, at most `limit`.
    pub async fn list(&self, limit: usize) -> Result<Vec<Execution>, String> {
        let options = WorkflowListOptions::builder()
            .limit(limit)
            .rpc_options(
                RpcOptions::builder()
                    .timeout(Duration::from_secs(10))
                    .build(),
            )
            .build();
        let query = format!("WorkflowType = '{}'", crate::WORKFLOW_TYPE);
        let mut stream = self.client.list_workflows(query, options);
        let mut out = Vec::new();
        while let Some(item) = stream.next().await {
            let w = item.map_err(|e| e.to_string())?;
            let Some(task) = task_of(w.id()) else {
                continue;
            };
            out.push(Execution {
                task: task.to_string(),
                status: status_name(w.status()),
                run: w.run_id().to_string(),
                queue: w.task_queue().to_string(),
                started_ms: ms(w.start_time()),
                closed_ms: ms(w.close_time()),
                events: w.history_length(),
            });
        }
        Ok(out)
    }

    /// The task's workflow, or None when Temporal has none of it.
    pub async fn describe(&self, task: &str) -> Result<Option<Execution>, String> {
        let handle = self
            .client
            .get_workflow_handle::<RawkoTask>(workflow_id(task));
        let options = WorkflowDescribeOptions::builder()
            .rpc_options(
                RpcOptions::builder()
                    .timeout(Duration::from_secs(10))
                    .build(),
            )
            .build();
        match handle.describe(options).await {
            Ok(d) => Ok(Some(Execution {
                task: task.to_string(),
                status: status_name(d.status()),
                run: d.run_id().to_string(),
                queue: d.task_queue().to_string(),
                started_ms: ms(d.start_time()),
                closed_ms: ms(d.close_time()),
                events: d.history_length() as i64,
            })),
            Err(WorkflowInteractionError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn queue(&self) -> &str {
        &self.queue
    }
}
