//! The client side: start a task's workflow, ask how far it got, cancel it, wait for its end.

use std::time::Duration;

use temporalio_client::errors::{WorkflowGetResultError, WorkflowStartError};
use temporalio_client::{
    Client, RpcOptions, WorkflowCancelOptions, WorkflowGetResultOptions, WorkflowIdReusePolicy,
    WorkflowQueryOptions, WorkflowStartOptions,
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
            Err(WorkflowGetResultError::Failed(e)) => Follow::Failed(e.to_string()),
            Err(e) => Follow::Failed(e.to_string()),
        }
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn queue(&self) -> &str {
        &self.queue
    }
}
