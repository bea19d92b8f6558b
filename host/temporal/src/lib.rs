//! rawko's tasks on Temporal: the `rawko-task` workflow, its activities, the worker that polls
//! for them and the client that starts, follows and cancels them.
//!
//! The boundary is drawn so that the workflow only decides from recorded results. The FSM
//! itself (the engine `rawko run` drives) runs inside the `state` activity, one state per
//! activity: the agent's turn with its model calls and tool calls, and the arbiter's decision,
//! each committed to the team store as it happens, exactly as in a local run. Everything that
//! reads a clock, waits, retries, writes the store or touches the workspace therefore happens in
//! an activity, on a worker; the workflow sees only each state's report (which agent ran, which
//! tools it called, where the arbiter sent the task) and picks the next activity from it.
//!
//! What rawko does is behind one trait, [`TaskSteps`], that the `rawko` binary implements with
//! its own run assembly: this crate knows nothing of agents, stores or sandboxes, so the same
//! engine serves `rawko run` and `rawko worker`.
//!
//! A task's states run on the worker that holds its checkout (the per-worker task queue that
//! Temporal documents for this): `checkout` runs on the shared queue, on whichever worker takes
//! it, and answers with that worker's own queue; the task's states go there with a short
//! schedule-to-start timeout. When that worker dies its queue has no poller, the state times
//! out before it starts, and the workflow checks the task out again, on another worker, which
//! goes on from the store.

mod activities;
mod client;
mod connect;
mod payload;
mod worker;
mod workflow;

pub use activities::{Acts, StateRun, StepError, StepFuture, TaskSteps};
pub use client::{Execution, Follow, Remote, StartError};
pub use connect::{Address, ConnectError, connect};
pub use payload::{
    CheckoutInput, CheckoutReport, Progress, Repository, StateInput, StateReport, TaskInput,
    TaskOutcome,
};
pub use worker::{WorkerError, WorkerOptions, run_worker};
pub use workflow::RawkoTask;

/// The workflow type every rawko task runs as.
pub const WORKFLOW_TYPE: &str = "rawko-task";

/// The task queue workers poll and clients start tasks on when nothing else is said.
pub const DEFAULT_QUEUE: &str = "rawko";

/// The namespace used when nothing else is said.
pub const DEFAULT_NAMESPACE: &str = "default";

/// What every rawko task's workflow id starts with.
pub const WORKFLOW_PREFIX: &str = "rawko-task-";

/// The workflow id of rawko task `task`: one workflow at a time per task.
pub fn workflow_id(task: &str) -> String {
    format!("{WORKFLOW_PREFIX}{task}")
}
