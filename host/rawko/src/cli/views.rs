//! What the views of a task share: the agents' graph with the path the task took on it, as
//! `rawko tasks show --format mermaid|dot` prints it and `rawko ui` draws it.

use crate::cli::Context;
use crate::cli::lookup::search_path;
use rawko_agents::graph::{Call, Graph, Mark, Overlay, Step};
use rawko_agents::registry::Registry;
use rawko_store::{Run, Task, Transition, Turn};

/// The agents' graph from the task's first state (the agents the workspace would use now),
/// and the path the task took on it.
pub fn task_graph(
    cx: &Context,
    task: &Task,
    transitions: &[Transition],
    turns: &[Turn],
    runs: &[Run],
) -> anyhow::Result<(Graph, Overlay)> {
    let overlay = path_of(task, transitions, turns, runs);
    Ok((path_graph(&agents_graph(cx)?, &overlay), overlay))
}

/// The graph of every agent the workspace would use now.
pub fn agents_graph(cx: &Context) -> anyhow::Result<Graph> {
    let arbiter = cx
        .config_layers()?
        .merged()
        .arbiter
        .map(|a| a.mode)
        .unwrap_or_default();
    let registry = Registry::load(&search_path(cx));
    Ok(Graph::of(
        registry.agents().map(|a| a.as_ref()),
        cx.workspace_trust(),
        arbiter,
    ))
}

/// What of `whole` to draw with a task's path: what its first state reaches.
pub fn path_graph(whole: &Graph, overlay: &Overlay) -> Graph {
    let start = overlay.steps.first().map(|s| s.to.as_str());
    start
        .and_then(|s| whole.reachable_from(s))
        .unwrap_or_else(|| whole.clone())
}

/// The path a task took, as the store recorded it: where it started, each transition in order
/// (with how the next state was chosen when the table did not simply decide), the agents asked
/// as tools, where each later run resumed it, and where it stopped if it has not ended.
pub fn path_of(task: &Task, transitions: &[Transition], turns: &[Turn], runs: &[Run]) -> Overlay {
    let mut overlay = Overlay::default();
    let first = transitions
        .first()
        .and_then(|t| t.from.clone())
        .or_else(|| {
            turns
                .iter()
                .find(|t| t.parent_id.is_none())
                .map(|t| t.agent.clone())
        })
        .unwrap_or_else(|| task.state.clone());
    overlay.steps.push(Step {
        from: None,
        to: first.clone(),
        label: "start".to_string(),
        failure: false,
    });
    for t in transitions {
        let label = match t.mode.as_str() {
            "fixed" | "start" => t.event.clone(),
            mode => format!("{}, {mode}", t.event),
        };
        overlay.steps.push(Step {
            from: Some(t.from.clone().unwrap_or_else(|| first.clone())),
            to: t.to.clone(),
            label,
            failure: matches!(t.event.as_str(), "failed" | "max_iterations" | "timeout"),
        });
    }
    // Agents asked by others, as tools: each caller and callee once, with how often.
    for turn in turns {
        let Some(caller) = turn
            .parent_id
            .and_then(|p| turns.iter().find(|t| t.id == p))
        else {
            continue;
        };
        match overlay
            .calls
            .iter_mut()
            .find(|c| c.caller == caller.agent && c.callee == turn.agent)
        {
            Some(c) => c.times += 1,
            None => overlay.calls.push(Call {
                caller: caller.agent.clone(),
                callee: turn.agent.clone(),
                times: 1,
            }),
        }
    }
    // A later run took the task up in the state the last transition before it left.
    for (n, run) in runs.iter().enumerate().skip(1) {
        let state = transitions
            .iter()
            .rfind(|t| t.at <= run.started_at)
            .map_or(first.as_str(), |t| t.to.as_str());
        overlay.marks.push(Mark {
            state: state.to_string(),
            label: format!("run {}: resumed here", n + 1),
        });
    }
    if task.status.is_resumable() {
        overlay.marks.push(Mark {
            state: task.state.clone(),
            label: format!("{} here", task.status.as_str()),
        });
    }
    overlay
}
