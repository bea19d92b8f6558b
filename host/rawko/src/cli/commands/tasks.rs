//! `rawko tasks list` and `rawko tasks show`: what the task store holds, as text, JSON, or the
//! agents' graph with a task's path drawn on it.

use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use crate::cli::remote::TemporalArgs;
use crate::cli::views::task_graph;
use crate::cli::{BadInput, Context, Table, print_json, print_out, terminal_safe};
use rawko_store::{AnyStore, Location, StoreError, Task, TaskStore};

/// Inspect persisted tasks
#[derive(Debug, Args)]
pub struct TasksCmd {
    #[command(subcommand)]
    action: TasksAction,
}

#[derive(Debug, Subcommand)]
enum TasksAction {
    /// Every task in this workspace, newest first
    List {
        /// Every task the store holds, of every workspace (every store in the state
        /// directory), with its workspace and host
        #[arg(long)]
        all: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
        /// The tasks' workflows on Temporal instead, each with what the team store has of it
        #[arg(long, conflicts_with = "all")]
        remote: bool,
        #[command(flatten)]
        temporal: TemporalArgs,
    },
    /// One task in full: timeline, transitions, tool calls, tokens
    Show {
        /// The task id (a unique prefix is enough)
        task: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
        /// Also its workflow on Temporal: status, history, the worker holding its checkout,
        /// and the files its edits change
        #[arg(long, conflicts_with = "format")]
        remote: bool,
        #[command(flatten)]
        temporal: TemporalArgs,
        /// How to print the task: text (the timeline), or the agents' graph as `rawko agents
        /// graph` draws it, in mermaid or dot, with the task's path on it: its steps numbered,
        /// failures in red, where it was resumed and where it stopped
        #[arg(long, value_enum, default_value_t = ShowFormat::Text, conflicts_with = "json")]
        format: ShowFormat,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ShowFormat {
    Text,
    Mermaid,
    Dot,
}

impl TasksCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match &self.action {
            TasksAction::List {
                remote: false,
                temporal,
                ..
            }
            | TasksAction::Show {
                remote: false,
                temporal,
                ..
            } => temporal.only_with_remote()?,
            TasksAction::List {
                remote: true,
                temporal,
                json,
                ..
            } => {
                #[cfg(feature = "temporal")]
                return crate::cli::remote::list_remote(cx, temporal, *json).await;
                #[cfg(not(feature = "temporal"))]
                {
                    let _ = (temporal, json);
                    return Err(crate::cli::remote::unsupported("rawko tasks list --remote"));
                }
            }
            TasksAction::Show {
                remote: true,
                temporal,
                task,
                json,
                ..
            } => {
                #[cfg(feature = "temporal")]
                {
                    let store = crate::cli::remote::team_store(cx).await?;
                    let id = store
                        .task(task)
                        .await
                        .map_err(|e| BadInput::new(e.to_string()))?
                        .id;
                    let view = crate::cli::remote::view(cx, temporal, &store, &id).await?;
                    show(&store, &id, *json, Some(view)).await?;
                    return Ok(ExitCode::SUCCESS);
                }
                #[cfg(not(feature = "temporal"))]
                {
                    let _ = (temporal, task, json);
                    return Err(crate::cli::remote::unsupported("rawko tasks show --remote"));
                }
            }
        }
        let location = cx.store_location()?;
        // A workspace's SQLite store that is not there yet holds no tasks; it is not made
        // just to be read.
        let absent = matches!(&location, Location::Sqlite(path) if !path.exists());
        match self.action {
            TasksAction::List {
                all: true, json, ..
            } if !location.is_shared() => {
                let lease = crate::cli::setup::lease_settings(cx)?;
                let mut tasks = Vec::new();
                for path in rawko_store::stores_in(&cx.dirs.state) {
                    match TaskStore::open(&path) {
                        Ok(store) => {
                            store.set_lease_settings(lease);
                            tasks.extend(store.tasks()?);
                        }
                        Err(e) => eprintln!("warning: {}", terminal_safe(&e.to_string())),
                    }
                }
                tasks.sort_by(|a, b| (b.created_at, &b.id).cmp(&(a.created_at, &a.id)));
                list(&tasks, true, json)?;
                Ok(ExitCode::SUCCESS)
            }
            TasksAction::List { all, json, .. } => {
                if absent {
                    list(&[], false, json)?;
                    return Ok(ExitCode::SUCCESS);
                }
                let store = cx.open_store().await?;
                let tasks = if all {
                    store.tasks().await?
                } else {
                    store
                        .tasks_in(&cx.workspace().display().to_string())
                        .await?
                };
                list(&tasks, all, json)?;
                Ok(ExitCode::SUCCESS)
            }
            TasksAction::Show {
                task, json, format, ..
            } => {
                if absent {
                    return Err(BadInput::new(format!(
                        "no task `{task}`: this workspace has no tasks yet"
                    ))
                    .into());
                }
                let store = cx.open_store().await?;
                let shown = match format {
                    ShowFormat::Text => show(&store, &task, json, None).await,
                    graph => show_graph(cx, &store, &task, graph).await,
                };
                match shown {
                    Err(e) => match e.downcast::<StoreError>() {
                        Ok(StoreError::NoSuchTask(t)) => {
                            Err(BadInput::new(StoreError::NoSuchTask(t).to_string()).into())
                        }
                        Ok(other) => Err(other.into()),
                        Err(e) => Err(e),
                    },
                    Ok(()) => Ok(ExitCode::SUCCESS),
                }
            }
        }
    }
}

/// The tasks as a table (with `all`, of every workspace: their workspace and host too) or JSON.
fn list(tasks: &[Task], all: bool, json: bool) -> std::io::Result<()> {
    if json {
        return print_json(&serde_json::to_value(tasks).unwrap_or_default());
    }
    if tasks.is_empty() {
        return print_out(if all {
            "No tasks in any workspace yet (start one with `rawko run`)."
        } else {
            "No tasks in this workspace yet (start one with `rawko run`)."
        });
    }
    let mut header = vec!["ID", "STATUS", "STATE", "STEPS"];
    if all {
        header.extend(["WORKSPACE", "HOST"]);
    }
    header.push("TASK");
    let mut table = Table::new(&header);
    for t in tasks {
        let prompt: String = t
            .prompt
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        let mut row = vec![
            t.id.clone(),
            t.status.as_str().to_string(),
            t.state.clone(),
            t.steps.to_string(),
        ];
        if all {
            row.push(t.workspace.as_ref().map_or("-", |w| w.label()).to_string());
            row.push(t.host.as_deref().unwrap_or("-").to_string());
        }
        row.push(prompt);
        table.row(row);
    }
    // Prompts, states and ids come from a store that may have come with the repository; the
    // table makes every cell safe.
    print_out(&table.render())
}

/// The task as the store has it; `remote`, its workflow on Temporal (as JSON, and as text to
/// print after the rest).
async fn show(
    store: &AnyStore,
    id: &str,
    json: bool,
    remote: Option<(serde_json::Value, String)>,
) -> anyhow::Result<()> {
    let task = store.task(id).await?;
    let transitions = store.transitions(&task.id).await?;
    let turns = store.turns(&task.id).await?;
    let calls = store.tool_calls(&task.id).await?;
    let decisions = store.decisions(&task.id).await?;
    let usage = store.task_usage(&task.id).await?;
    if json {
        print_json(&json!({
            "task": task,
            "transitions": transitions,
            "turns": turns,
            "tool_calls": calls,
            "model_calls": store.model_calls(&task.id).await?,
            "decisions": decisions,
            "usage": usage,
            "runs": store.runs(&task.id).await?,
            "remote": remote.as_ref().map(|(v, _)| v),
        }))?;
        return Ok(());
    }
    let mut out = String::new();
    out.push_str(&format!(
        "task {}  {}  (state {}, {} steps)\n",
        task.id,
        task.status.as_str(),
        task.state,
        task.steps
    ));
    out.push_str(&format!("  {}\n", task.prompt.replace('\n', "\n  ")));
    if let Some(s) = &task.summary {
        if task.status.is_resumable() {
            out.push_str(&format!(
                "stopped: {s} (`rawko resume {}` continues it)\n",
                task.id
            ));
        } else {
            out.push_str(&format!("result: {s}\n"));
        }
    }
    out.push_str(&format!(
        "tokens: {} in, {} out\n",
        usage.input_tokens, usage.output_tokens
    ));
    if let Some(trace) = task.trace.as_deref().and_then(|t| t.split('-').nth(1)) {
        out.push_str(&format!("trace: {}\n", terminal_safe(trace)));
    }
    out.push_str("\ntimeline:\n");
    for turn in &turns {
        let indent = if turn.parent_id.is_some() {
            "    "
        } else {
            "  "
        };
        out.push_str(&format!(
            "{indent}{} [{}] {} iteration{}: {}\n",
            turn.agent,
            turn.outcome.as_deref().unwrap_or("in progress"),
            turn.iterations,
            if turn.iterations == 1 { "" } else { "s" },
            turn.summary
                .as_deref()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
        ));
        for c in calls.iter().filter(|c| c.turn_id == turn.id) {
            let input: String = c.input.chars().take(80).collect();
            out.push_str(&format!(
                "{indent}  {} {} {input}  [{}, {:.1} ms]\n",
                if c.is_error { "✗" } else { "✓" },
                c.tool,
                c.verdict,
                c.duration_us as f64 / 1000.0
            ));
        }
    }
    out.push_str("\ntransitions:\n");
    for t in &transitions {
        out.push_str(&format!(
            "  {} -> {}  on {} ({}: {})\n",
            t.from.as_deref().unwrap_or("start"),
            t.to,
            t.event,
            t.mode,
            t.reason
        ));
    }
    // A runner that was gone when another took the task over.
    let interruptions: Vec<_> = decisions
        .iter()
        .filter(|d| d.capability == "lease")
        .collect();
    if !interruptions.is_empty() {
        out.push_str("\ninterrupted:\n");
        for d in interruptions {
            out.push_str(&format!("  {}; {}\n", d.reason, d.detail));
        }
    }
    let denied: Vec<_> = decisions
        .iter()
        .filter(|d| d.decision != "allow" && d.capability != "lease")
        .collect();
    if !denied.is_empty() {
        out.push_str("\ndenied or overridden:\n");
        for d in denied {
            out.push_str(&format!(
                "  {} {} {}: {} ({})\n",
                d.subject, d.capability, d.detail, d.decision, d.reason
            ));
        }
    }
    if let Some((_, text)) = &remote {
        out.push_str(&format!("\non Temporal:\n{text}"));
    }
    // Summaries, tool input and reasons are model output; the store may be a stranger's.
    print_out(&terminal_safe(&out))?;
    Ok(())
}

/// The agents' graph, from the task's first agent, with the task's path drawn on it.
async fn show_graph(
    cx: &Context,
    store: &AnyStore,
    id: &str,
    format: ShowFormat,
) -> anyhow::Result<()> {
    let task = store.task(id).await?;
    let transitions = store.transitions(&task.id).await?;
    let turns = store.turns(&task.id).await?;
    let runs = store.runs(&task.id).await?;
    let (graph, overlay) = task_graph(cx, &task, &transitions, &turns, &runs)?;
    print_out(&match format {
        ShowFormat::Dot => graph.to_dot(Some(&overlay)),
        _ => graph.to_mermaid(Some(&overlay)),
    })?;
    Ok(())
}
