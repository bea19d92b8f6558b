//! The activities (`checkout`, `state`) and the seam to rawko ([`TaskSteps`]): what a worker
//! runs for the workflow, heartbeating all the while.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use temporalio_macros::activities;
use temporalio_sdk::ApplicationFailure;
use temporalio_sdk::activities::{ActivityContext, ActivityError};

use crate::payload::{CheckoutInput, CheckoutReport, StateInput, StateReport};

/// Why an activity failed: `Retry` may go better on another attempt (a store connection lost);
/// `Fatal` will not (the commit is not in the repository, the worker lacks an agent, adapter or
/// key the task needs), and ends the
/// task's workflow with the message.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Retry(String),
    #[error("{0}")]
    Fatal(String),
}

pub type StepFuture<T> = Pin<Box<dyn Future<Output = Result<T, StepError>> + Send + 'static>>;

/// A state running on this worker: its result, and how to stop it (the workflow was cancelled).
pub struct StateRun {
    pub result: StepFuture<StateReport>,
    pub cancel: Box<dyn Fn() + Send + Sync>,
}

/// What rawko does in the activities. The `rawko` binary implements it with the same run
/// assembly `rawko run` uses.
pub trait TaskSteps: Send + Sync + 'static {
    /// Give this worker a checkout of `input.repository` for `input.task`, where its states
    /// run; its path on this worker, for people.
    fn checkout(&self, input: CheckoutInput) -> StepFuture<String>;
    /// Run the state `input.task` stands at, one transition, committed to the store; or report
    /// what the store holds when that transition was already committed.
    fn state(&self, input: StateInput, worker: &str) -> StateRun;
}

/// The activities (`checkout`, `state`), as a worker registers them.
pub struct Acts {
    /// This worker's own queue.
    pub(crate) queue: String,
    /// This worker, for people.
    pub(crate) name: String,
    pub(crate) steps: Arc<dyn TaskSteps>,
}

fn failure(e: StepError) -> ActivityError {
    match e {
        StepError::Retry(m) => ActivityError::application(ApplicationFailure::new(m)),
        StepError::Fatal(m) => ActivityError::application(ApplicationFailure::non_retryable(m)),
    }
}

/// Set when this worker stops polling (Ctrl-C, SIGTERM). Temporal then cancels the activities
/// in flight, and that is no cancellation of their tasks: a state stopped so ends as an attempt
/// that failed, and another worker takes the task over.
pub(crate) static STOPPING: AtomicBool = AtomicBool::new(false);

/// Heartbeat every second while `work` runs; stop it when the activity is cancelled.
async fn heartbeating<T>(
    ctx: &ActivityContext,
    work: StepFuture<T>,
    cancel: Option<&(dyn Fn() + Send + Sync)>,
) -> Result<T, ActivityError> {
    let mut work = work;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut cancelled = false;
    loop {
        tokio::select! {
            r = &mut work => return r.map_err(failure),
            _ = tick.tick() => {
                ctx.record_heartbeat(()).await?;
            }
            _ = ctx.cancelled(), if !cancelled => {
                cancelled = true;
                if STOPPING.load(Ordering::SeqCst) {
                    return Err(ActivityError::application(ApplicationFailure::new(
                        "the worker running it stopped",
                    )));
                }
                match cancel {
                    // The state stops and commits its task as cancelled; its report says so.
                    Some(stop) => stop(),
                    None => return Err(ActivityError::cancelled()),
                }
            }
        }
    }
}

#[activities]
impl Acts {
    #[activity(name = "checkout")]
    pub async fn checkout(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: CheckoutInput,
    ) -> Result<CheckoutReport, ActivityError> {
        tracing::info!("task {}: checking out {}", input.task, input.repository.url);
        let checkout = heartbeating(&ctx, self.steps.checkout(input), None).await?;
        Ok(CheckoutReport {
            queue: self.queue.clone(),
            worker: self.name.clone(),
            checkout,
        })
    }

    #[activity(name = "state")]
    pub async fn state(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: StateInput,
    ) -> Result<StateReport, ActivityError> {
        let run = self.steps.state(input, &self.name);
        heartbeating(&ctx, run.result, Some(&*run.cancel)).await
    }
}
