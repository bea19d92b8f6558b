//! `rawko run` and `rawko resume`: take a task through the agents, live, with every step saved.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_adapters::Recorder;
use rawko_store::{Location, TaskStatus};

use crate::cli::remote::TemporalArgs;
use crate::cli::servers::mcp_servers;
use crate::cli::setup::{DEFAULT_MAX_STEPS, DEFAULT_START, OutputFlags, Setup, Start, exit_code};
use crate::cli::trust::decide_trust;

/// Run a task through the agents until it is done, failed or escalated
#[derive(Debug, Args)]
#[command(after_help = "Examples:\n  \
    rawko run \"add a --verbose flag\"\n  \
    rawko run --agent developer --adapter local --max-steps 20 \"fix the failing test\"\n  \
    rawko run --json \"update the changelog\" > events.jsonl\n\n\
    Every step is saved in the workspace's task store, in rawko's state directory (never in \
    the workspace): `rawko tasks show ID` shows the timeline, and \
    `rawko resume ID` continues a task that was interrupted. Ctrl-C (or SIGTERM) stops the task \
    at once: the model call in flight is abandoned and running commands are killed, every step \
    that finished is kept, and the task is marked cancelled; a second Ctrl-C exits without \
    waiting for that. `rawko resume ID` continues it.\n\n\
    Exit status: 0 when the task is done, 1 when it failed or was escalated, 75 when a fault \
    that outlived its retries (the model unreachable) interrupted it, 130 when cancelled, 2 on \
    bad input; an interrupted or cancelled task resumes.")]
pub struct RunCmd {
    /// What to do
    task: String,
    /// The agent to start with
    #[arg(long, value_name = "NAME", default_value = DEFAULT_START)]
    agent: String,
    /// The adapter instance every agent uses (see `rawko adapters list`) [default: each agent's
    /// own, else defaults.adapter from the config]
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
    /// Most transitions between agents before the task is escalated to you
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_STEPS)]
    max_steps: u32,
    /// Trust this workspace's own .rawko/ agents, adapters and filters (and remember it)
    #[arg(long)]
    trust: bool,
    /// Write every model exchange to FILE, in the format the replay adapter plays back
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Approve configured MCP servers that are new or changed (on a terminal you are asked
    /// instead)
    #[arg(long)]
    yes: bool,
    /// Run the task on Temporal workers (`rawko worker`) instead of here, from this
    /// repository's commit; this work tree is left as it is
    #[arg(long)]
    remote: bool,
    /// With --remote: apply the task's changes to this work tree when it ends (else they are
    /// kept in a patch file, which `git apply` takes)
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    temporal: TemporalArgs,
    #[command(flatten)]
    output: OutputFlags,
}

/// Continue an interrupted task where its last committed step left it
#[derive(Debug, Args)]
#[command(
    after_help = "Committed tool calls are not run again; the agent that was working \
    picks up its conversation from the last saved message. The adapter and step limit the \
    task started with are used again unless given here."
)]
pub struct ResumeCmd {
    /// The task's id (or a unique prefix of it; see `rawko tasks list`)
    task_id: String,
    /// The adapter instance every agent uses [default: what the task started with]
    #[arg(long, value_name = "NAME")]
    adapter: Option<String>,
    /// Trust this workspace's own .rawko/ agents, adapters and filters (and remember it)
    #[arg(long)]
    trust: bool,
    /// Approve configured MCP servers that are new or changed (on a terminal you are asked
    /// instead)
    #[arg(long)]
    yes: bool,
    /// Continue a task that ran on Temporal there, on the workers
    #[arg(long)]
    remote: bool,
    /// With --remote: apply the task's changes to this work tree when it ends
    #[arg(long)]
    apply: bool,
    #[command(flatten)]
    temporal: TemporalArgs,
    #[command(flatten)]
    output: OutputFlags,
}

impl RunCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        if self.task.trim().is_empty() {
            return Err(BadInput::new("the task is empty: say what to do").into());
        }
        if self.max_steps == 0 {
            return Err(BadInput::new("--max-steps must be at least 1").into());
        }
        if self.remote {
            return self.run_remote(cx).await;
        }
        self.temporal.only_with_remote()?;
        apply_only_with_remote(self.apply)?;
        let trust = decide_trust(cx, self.trust, !self.output.json)?;
        let location = cx.store_location()?;
        let fresh = matches!(&location, Location::Sqlite(path) if !path.exists());
        let recorder =
            Recorder::for_flag(self.record.as_deref()).map_err(|e| BadInput::new(e.to_string()))?;
        let store = cx.open_store().await?;
        let mut setup = Setup::new(cx, trust, &self.output)?;
        setup.run.adapter = self.adapter.clone();
        setup.run.recorder = recorder;
        setup.run.max_steps = self.max_steps;
        setup.run.mcp = Some(mcp_servers(cx, self.yes).await?);
        let options = serde_json::json!({
            "adapter": self.adapter,
            "max_steps": self.max_steps,
            "start": self.agent,
        });
        let start = Start::New {
            prompt: &self.task,
            agent: &self.agent,
            options,
        };
        let result = setup.run(start, &store).await;
        if result.is_err() && fresh && store.tasks().await.is_ok_and(|t| t.is_empty()) {
            // A run that could not start leaves no task store behind where there was none.
            let path = store.path().map(Path::to_path_buf);
            drop(store);
            if let Some(path) = path {
                remove_store(&path);
            }
        }
        let (_, end) = result?;
        Ok(exit_code(&end))
    }
}

impl ResumeCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        if !self.remote {
            self.temporal.only_with_remote()?;
            apply_only_with_remote(self.apply)?;
        }
        if self.remote {
            #[cfg(feature = "temporal")]
            return crate::cli::remote::resume_remote(
                cx,
                &self.temporal,
                &self.task_id,
                &self.output,
                self.apply,
            )
            .await;
            #[cfg(not(feature = "temporal"))]
            return Err(crate::cli::remote::unsupported("rawko resume --remote"));
        }
        if let Location::Sqlite(path) = cx.store_location()?
            && !path.exists()
        {
            return Err(BadInput::new(format!(
                "no tasks in this workspace ({} does not exist)",
                path.display()
            ))
            .into());
        }
        let store = cx.open_store().await?;
        let task = store
            .task(&self.task_id)
            .await
            .map_err(|e| BadInput::new(e.to_string()))?;
        if !task.status.is_resumable() {
            print_out(&format!(
                "task {} is already {}: {}",
                task.id,
                task.status.as_str(),
                rawko_text::block(task.summary.as_deref().unwrap_or(""), 2000)
            ))?;
            return Ok(ExitCode::from(if task.status == TaskStatus::Done {
                0
            } else {
                1
            }));
        }
        let trust = decide_trust(cx, self.trust, !self.output.json)?;
        let adapter = self.adapter.clone().or_else(|| {
            task.options
                .get("adapter")
                .and_then(|a| a.as_str())
                .map(str::to_string)
        });
        let max_steps = task
            .options
            .get("max_steps")
            .and_then(|m| m.as_u64())
            .map(|m| m.clamp(1, u32::MAX as u64) as u32)
            .unwrap_or(DEFAULT_MAX_STEPS);
        let mut setup = Setup::new(cx, trust, &self.output)?;
        setup.run.adapter = adapter;
        setup.run.max_steps = max_steps;
        setup.run.mcp = Some(mcp_servers(cx, self.yes).await?);
        if matches!(task.status, TaskStatus::Cancelled | TaskStatus::Interrupted) {
            store.reopen(&task.id).await?;
        }
        let (_, end) = setup.run(Start::Resume { id: &task.id }, &store).await?;
        Ok(exit_code(&end))
    }
}

impl RunCmd {
    /// The task on Temporal: the workers' config decides adapters and tools, so only what the
    /// task itself says travels (its start agent, adapter and step limit).
    async fn run_remote(self, cx: &Context) -> anyhow::Result<ExitCode> {
        if self.record.is_some() {
            return Err(BadInput::new(
                "--record writes the model exchanges of a run on this machine, and a remote \
                 task's model calls are made on the workers",
            )
            .into());
        }
        #[cfg(feature = "temporal")]
        {
            let options = serde_json::json!({
                "adapter": self.adapter,
                "max_steps": self.max_steps,
                "start": self.agent,
            });
            crate::cli::remote::run_remote(
                cx,
                &self.temporal,
                &self.task,
                &self.agent,
                options,
                &self.output,
                self.apply,
            )
            .await
        }
        #[cfg(not(feature = "temporal"))]
        {
            let _ = (cx, &self.temporal);
            Err(crate::cli::remote::unsupported("rawko run --remote"))
        }
    }
}

/// `--apply` names a remote task's changes: without `--remote` there are none to apply.
fn apply_only_with_remote(apply: bool) -> anyhow::Result<()> {
    if apply {
        return Err(BadInput::new(
            "--apply applies the changes of a task that ran on Temporal: it goes with --remote \
             (a task run here changes this work tree itself)",
        )
        .into());
    }
    Ok(())
}

/// Remove a task store and its WAL files, and its folder if nothing else is in it.
fn remove_store(path: &Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    if let Some(dir) = path.parent() {
        // Fails, as it should, when the directory holds anything else.
        let _ = std::fs::remove_dir(dir);
    }
}
