//! The `rawko-task` workflow: deterministic, driven only by the reports its activities recorded.

use std::time::Duration;

use temporalio_common::RetryPolicy;
use temporalio_macros::{workflow, workflow_methods};
use temporalio_sdk::{
    ActivityCancellationType, ActivityExecutionError, ActivityOptions, ApplicationFailure,
    ContinueAsNewOptions, TimeoutType, WorkflowContext, WorkflowContextView, WorkflowResult,
    WorkflowTermination,
};

use crate::activities::Acts;
use crate::payload::{CheckoutInput, Progress, StateInput, StateReport, TaskInput, TaskOutcome};

/// States one run of the workflow takes before it continues as new, so that a long task's
/// history stays far below Temporal's limits (each state is a handful of events).
pub const STATES_PER_RUN: u32 = 40;

/// Checkouts one run may make before it gives up: each one follows a worker that was lost.
const MAX_CHECKOUTS: u32 = 20;

/// How long a state may wait for the worker holding its checkout to pick it up. A worker that
/// is alive polls its own queue all the time, so this only runs out when it is gone.
const SCHEDULE_TO_START: Duration = Duration::from_secs(2);

/// How often a running state must be heard from; a worker killed mid-state is noticed after
/// this.
const HEARTBEAT: Duration = Duration::from_secs(3);

/// The longest one state may run (its agent's own timeout is usually shorter).
const STATE_TIMEOUT: Duration = Duration::from_secs(6 * 3600);

/// Retries of a failed attempt (a store connection lost, a worker stopped): every attempt goes
/// on from what the store committed.
fn retries() -> RetryPolicy {
    RetryPolicy::builder()
        .initial_interval(Duration::from_secs(1))
        .backoff_coefficient(2.0)
        .maximum_interval(Duration::from_secs(10))
        .maximum_attempts(6)
        .build()
}

#[workflow]
#[derive(Default)]
pub struct RawkoTask {
    progress: Progress,
}

fn cancelled_or_failed(e: ActivityExecutionError) -> WorkflowTermination {
    match e {
        ActivityExecutionError::Cancelled(_) => WorkflowTermination::cancelled(),
        e => e.into(),
    }
}

/// A schedule-to-start timeout: the worker that holds the checkout no longer polls.
fn worker_lost(e: &ActivityExecutionError) -> bool {
    e.as_timeout().map(|t| t.timeout_type()) == Some(TimeoutType::ScheduleToStart)
}

fn summary_of(agent: &str, steps: u32) -> String {
    format!("{agent}: step {}", steps + 1)
}

#[workflow_methods]
impl RawkoTask {
    #[run(name = "rawko-task")]
    pub async fn run(
        ctx: &mut WorkflowContext<Self>,
        input: TaskInput,
    ) -> WorkflowResult<TaskOutcome> {
        let mut queue = input.worker_queue.clone();
        let mut steps = input.steps;
        let mut state = input.state.clone();
        let mut ran = 0u32;
        let mut checkouts = 0u32;
        // Activity ids are unique within the run and the same on every replay.
        let mut seq = 0u32;
        ctx.state_mut(|s| {
            s.progress.states = input.earlier.clone();
        });
        loop {
            if ran == STATES_PER_RUN {
                let next = TaskInput {
                    worker_queue: queue,
                    steps,
                    state,
                    earlier: ctx.state(|s| s.progress.states.clone()),
                    ..input.clone()
                };
                let never = ctx.continue_as_new(next, ContinueAsNewOptions::default())?;
                match never {}
            }
            let q = match &queue {
                Some(q) => q.clone(),
                None => {
                    if checkouts == MAX_CHECKOUTS {
                        return Err(ApplicationFailure::new(format!(
                            "task {}: {MAX_CHECKOUTS} workers took its checkout and were lost",
                            input.task
                        ))
                        .into());
                    }
                    seq += 1;
                    checkouts += 1;
                    let opts =
                        ActivityOptions::with_start_to_close_timeout(Duration::from_secs(1800))
                            .heartbeat_timeout(HEARTBEAT)
                            .retry_policy(retries())
                            .activity_id(format!("checkout-{seq}"))
                            .summary(format!(
                                "checkout: {} at {}",
                                input.repository.url,
                                short(&input.repository.commit)
                            ))
                            .build();
                    let checkout = CheckoutInput {
                        task: input.task.clone(),
                        repository: input.repository.clone(),
                    };
                    let got = ctx
                        .execute_activity(Acts::checkout, checkout, opts)
                        .await
                        .map_err(cancelled_or_failed)?;
                    ctx.state_mut(|s| {
                        s.progress.worker = Some(got.worker.clone());
                        s.progress.checkout = Some(got.checkout.clone());
                        s.progress.checkouts += 1;
                    });
                    queue = Some(got.queue.clone());
                    got.queue
                }
            };
            seq += 1;
            let opts = ActivityOptions::with_start_to_close_timeout(STATE_TIMEOUT)
                .heartbeat_timeout(HEARTBEAT)
                .schedule_to_start_timeout(SCHEDULE_TO_START)
                .retry_policy(retries())
                .task_queue(q)
                .cancellation_type(ActivityCancellationType::WaitCancellationCompleted)
                .activity_id(format!("state-{seq}"))
                .summary(summary_of(&state, steps))
                .build();
            let step = StateInput {
                task: input.task.clone(),
                steps,
            };
            let report: StateReport = match ctx.execute_activity(Acts::state, step, opts).await {
                Ok(report) => report,
                Err(e) if worker_lost(&e) => {
                    // Whoever checks the task out next goes on from the store.
                    queue = None;
                    continue;
                }
                Err(e) => return Err(cancelled_or_failed(e)),
            };
            ran += 1;
            steps = report.steps;
            state = report.state.clone();
            ctx.state_mut(|s| s.progress.states.push(report.clone()));
            if report.ends_workflow() {
                if report.status == "cancelled" && ctx.cancellation_token().is_cancelled() {
                    return Err(WorkflowTermination::cancelled());
                }
                return Ok(TaskOutcome {
                    task: input.task.clone(),
                    status: report.status,
                    state: report.state,
                    summary: report.summary,
                });
            }
        }
    }

    /// Every state reported so far, and who holds the checkout.
    #[query]
    pub fn progress(&self, _ctx: &WorkflowContextView) -> Progress {
        self.progress.clone()
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

#[cfg(test)]
mod tests {
    #[test]
    fn summaries_name_the_agent_and_the_step() {
        assert_eq!(super::summary_of("developer", 2), "developer: step 3");
        assert_eq!(super::short("0123456789abcdef"), "0123456789ab");
        assert_eq!(super::short("abc"), "abc");
    }
}
