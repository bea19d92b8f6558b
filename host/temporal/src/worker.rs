//! The worker: two pollers in one process, the shared queue (with workflows and checkouts) and
//! the worker's own queue (with the states of the tasks it holds).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use temporalio_client::Client;
use temporalio_common::telemetry::{Logger, TelemetryOptions};
use temporalio_sdk::runtime::RuntimeOptions;
use temporalio_sdk::runtime::worker_tuner::{FixedSizeSlotSupplier, TunerHolder};
use temporalio_sdk::{Runtime, Worker};

use crate::activities::{Acts, STOPPING, TaskSteps};
use crate::workflow::RawkoTask;

/// How a worker polls.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// The shared queue clients start tasks on.
    pub queue: String,
    /// Tasks this worker runs at once (states and checkouts each).
    pub max_tasks: usize,
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
        STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
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
