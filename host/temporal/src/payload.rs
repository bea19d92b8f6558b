//! What the workflow history carries: ids, a repository's identity and small reports. Messages,
//! tool outputs and diffs stay in the team store, and nothing here holds a key.

use serde::{Deserialize, Serialize};

/// Where a task's workspace comes from: a repository every worker can fetch, at one commit.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Repository {
    /// What `git clone` takes: the workspace's remote, or its path when it has none.
    pub url: String,
    /// The commit the task starts from.
    pub commit: String,
    /// The uncommitted changes the task starts with, on top of the commit: the hash of a patch
    /// in the team store (untracked and binary files included), not the patch itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changes: Option<String>,
}

/// The workflow's input; continue-as-new carries it on with what the run before it learnt.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TaskInput {
    /// The task's id in the team store.
    pub task: String,
    pub repository: Repository,
    /// The own queue of the worker that holds the task's checkout, once one does.
    #[serde(default)]
    pub worker_queue: Option<String>,
    /// Transitions the task had taken when this run began (the store's count).
    #[serde(default)]
    pub steps: u32,
    /// The agent the task stands at when this run begins.
    pub state: String,
    /// States earlier runs of this workflow reported, carried for the progress query.
    #[serde(default)]
    pub earlier: Vec<StateReport>,
}

/// `checkout`'s input.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct CheckoutInput {
    pub task: String,
    pub repository: Repository,
}

/// Which worker checked the task out.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct CheckoutReport {
    /// The worker's own queue, where the task's states go from now on.
    pub queue: String,
    /// The worker, for people (`pid@host`).
    pub worker: String,
    /// Where the checkout is on that worker, for people.
    #[serde(default)]
    pub checkout: String,
}

/// `state`'s input: run the state task `task` stands at after `steps` transitions.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct StateInput {
    pub task: String,
    /// The store's transition count this state starts from: its idempotency key. A retried
    /// activity that finds more transitions in the store reports what was committed instead
    /// of running anything.
    pub steps: u32,
}

/// What one state did, as the store recorded it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StateReport {
    /// The agent that ran.
    pub agent: String,
    /// The tools it called, in order (names only; their input and output are in the store).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Where the task stands now: the next agent, or a terminal state.
    pub state: String,
    /// The task's status after the state: running, done, failed, escalated, cancelled,
    /// interrupted.
    pub status: String,
    /// The store's transition count after the state.
    pub steps: u32,
    /// The state's own summary, or the task's when it finished (cut short; the store has it).
    #[serde(default)]
    pub summary: String,
    /// The worker that ran it.
    #[serde(default)]
    pub worker: String,
    /// Whether this report was read back from the store (a retried activity whose state had
    /// already committed) rather than from a state run now.
    #[serde(default)]
    pub recorded: bool,
}

impl StateReport {
    /// Whether the task is over (or stopped, to be resumed): nothing more runs in this workflow.
    pub fn ends_workflow(&self) -> bool {
        self.status != "running"
    }
}

/// How the workflow ended.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct TaskOutcome {
    pub task: String,
    pub status: String,
    pub state: String,
    pub summary: String,
}

/// The answer to the `progress` query.
#[derive(Serialize, Deserialize, Clone, Debug, Default)]
pub struct Progress {
    /// Every state reported so far, oldest first.
    pub states: Vec<StateReport>,
    /// The worker holding the checkout, when one does.
    pub worker: Option<String>,
    /// Where that worker's checkout is.
    #[serde(default)]
    pub checkout: Option<String>,
    /// Checkouts so far in this run (more than one: a worker was lost).
    pub checkouts: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_end_the_workflow_only_when_the_task_stops() {
        let mut r = StateReport {
            agent: "developer".into(),
            tools: vec!["Edit".into()],
            state: "tester".into(),
            status: "running".into(),
            steps: 2,
            summary: String::new(),
            worker: "1@h".into(),
            recorded: false,
        };
        assert!(!r.ends_workflow());
        for status in ["done", "failed", "escalated", "cancelled", "interrupted"] {
            r.status = status.into();
            assert!(r.ends_workflow(), "{status}");
        }
    }

    #[test]
    fn an_input_without_the_carried_fields_still_reads() {
        let input: TaskInput = serde_json::from_value(serde_json::json!({
            "task": "t1",
            "repository": {"url": "/r", "commit": "abc"},
            "state": "planner",
        }))
        .unwrap();
        assert_eq!(
            (input.steps, input.worker_queue, input.earlier.len()),
            (0, None, 0)
        );
    }
}
