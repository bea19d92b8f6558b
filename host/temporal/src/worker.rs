//! The worker: two pollers in one process (the shared queue, with workflows and checkouts, and
//! the worker's own queue, with the states of the tasks it holds), the activities, and the seam
//! to rawko ([`TaskSteps`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use temporalio_client::Client;
use temporalio_common::telemetry::{Logger, TelemetryOptions};
use temporalio_macros::activities;
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::runtime::RuntimeOptions;
use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder};
use temporalio_sdk::{ApplicationFailure, Runtime, Worker};

use crate::payload::{CheckoutInput, CheckoutReport, StateInput, StateReport};
use crate::workflow::RawkoTask;

/// Why an activity failed: `Retry` may go better on another attempt (a store connection lost);
/// `Fatal` will not (the revision cannot be fetched, a pinned plugin is missing), and ends the
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
    /// Give this worker a checkout of `input.repository` for `input.task`, where its states run.
    fn checkout(&self, input: CheckoutInput) -> StepFuture<()>;
    /// Run the state `input.task` stands at, one transition, committed to the store; or report
    /// what the store holds when that transition was already committed.
    fn state(&self, input: StateInput, worker: &str) -> StateRun;
}

/// How a worker polls.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The shared queue clients start tasks on.
    pub queue: String,
    /// Tasks this worker runs at once (states and checkouts each).
    pub max_tasks: usize,
}

/// The activities (`checkout`, `state`), as a worker registers them.
pub struct Acts {
    /// This worker's own queue.
    queue: String,
    /// This worker, for people.
    name: String,
    steps: Arc<dyn TaskSteps>,
}

fn failure(e: StepError) -> ActivityError {
    match e {
        StepError::Retry(m) => ActivityError::application(ApplicationFailure::new(m)),
        StepError::Fatal(m) => ActivityError::application(ApplicationFailure::non_retryable(m)),
    }
}

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
        heartbeating(&ctx, self.steps.checkout(input), None).await?;
        Ok(CheckoutReport {
            queue: self.queue.clone(),
            worker: self.name.clone(),
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

/// Why a worker stopped other than by a signal.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("cannot start the Temporal runtime: {0}")]
    Runtime(String),
    #[error("cannot start polling: {0}")]
    Create(String),
    #[error("{0}")]
    Run(String),
}

/// Poll `options.queue` (workflows and checkouts) and this worker's own queue (states) until
/// `stop` resolves, then finish what runs and return.
pub async fn run_worker(
    client: Client,
    options: WorkerOptions,
    steps: Arc<dyn TaskSteps>,
    stop: impl Future<Output = ()>,
) -> Result<(), WorkerError> {
    let log = Logger::Console {
        filter: std::env::var("RAWKO_TEMPORAL_LOG").unwrap_or_else(|_| "warn".into()),
        format: None,
    };
    let telemetry = TelemetryOptions::builder().logging(log).build();
    let runtime_options = RuntimeOptions::builder()
        .telemetry_options(telemetry)
        .build()
        .map_err(|e| WorkerError::Runtime(e.to_string()))?;
    let runtime = Runtime::from_current_tokio(runtime_options)
        .map_err(|e| WorkerError::Runtime(e.to_string()))?;
    let host = hostname();
    let name = format!("{}@{host}", std::process::id());
    let own = format!("{}/{name}", options.queue);
    let acts = || Acts {
        queue: own.clone(),
        name: name.clone(),
        steps: steps.clone(),
    };
    let slots = options.max_tasks.max(1);
    let tuner = || {
        TunerHolder::builder()
            .workflow_task_slot_supplier(FixedSizeSlotSupplier::new(slots.max(2)))
            .activity_task_slot_supplier(FixedSizeSlotSupplier::new(slots))
            .local_activity_task_slot_supplier(FixedSizeSlotSupplier::new(1))
            .nexus_task_slot_supplier(FixedSizeSlotSupplier::new(1))
            .build()
    };
    let shared = temporalio_sdk::WorkerOptions::new(options.queue.clone())
        .register_workflow::<RawkoTask>()
        .map_err(|e| WorkerError::Create(e.to_string()))?
        .register_activities(acts())
        .tuner(tuner())
        .sticky_queue_schedule_to_start_timeout(Duration::from_secs(2))
        .graceful_shutdown_period(Duration::from_secs(10))
        .build();
    let mine = temporalio_sdk::WorkerOptions::new(own.clone())
        .register_activities(acts())
        .tuner(tuner())
        .graceful_shutdown_period(Duration::from_secs(10))
        .build();
    let mut shared = Worker::new(&runtime, client.clone(), shared)
        .map_err(|e| WorkerError::Create(e.to_string()))?;
    let mut mine =
        Worker::new(&runtime, client, mine).map_err(|e| WorkerError::Create(e.to_string()))?;
    let (stop_shared, stop_mine) = (shared.shutdown_handle(), mine.shutdown_handle());
    let polls = async { tokio::join!(shared.run(), mine.run()) };
    let stopping = async {
        stop.await;
        stop_shared();
        stop_mine();
        std::future::pending::<()>().await
    };
    let (a, b) = tokio::select! {
        r = polls => r,
        () = stopping => unreachable!("the stop future never resolves"),
    };
    for r in [a, b] {
        r.map_err(|e| WorkerError::Run(e.to_string()))?;
    }
    Ok(())
}

/// This machine's name, for the worker's identity.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}
