//! What every command that runs agents assembles: the task store, the run's setup (workspace,
//! adapters, tools, filters, MCP servers, limits, where events go), how it starts, and the exit
//! status its end maps to. `run`, `resume`, `demo`, `acp` and `mcp serve` all run tasks through
//! this one path, so a task behaves the same whichever command started it.

use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;

use crate::cli::live::Live;
use crate::cli::{BadInput, Context, print_out};
use rawko_config::Trust;
use rawko_fsm::events::{JsonLines, Quiet, RunEvent};
use rawko_fsm::{CancelFlag, TaskEnd};
use rawko_session::SharedSink;
use rawko_session::run::{Prepared, RunConfig, RunOptions, SetupError};
use rawko_store::{self as store, AnyStore, Location, TaskStatus};

pub use rawko_session::run::{DEFAULT_MAX_STEPS, Start};

/// The agent a task starts with when `--agent` is not given.
pub const DEFAULT_START: &str = "planner";

/// How a run reports, shared by `run`, `resume` and `demo`.
#[derive(Debug, Args, Clone, Default)]
pub struct OutputFlags {
    /// Print one JSON event per line on stdout instead of the live view
    #[arg(long, conflicts_with = "quiet")]
    pub json: bool,
    /// Print only the result
    #[arg(short, long)]
    pub quiet: bool,
    /// Ask for each reply in one piece instead of streamed
    #[arg(long)]
    pub no_stream: bool,
}

/// Open (creating) the SQLite task store at `path`; a store that cannot be opened is bad input.
pub fn open_sqlite(path: &Path) -> anyhow::Result<AnyStore> {
    store::TaskStore::open(path)
        .map(AnyStore::Sqlite)
        .map_err(|e| BadInput::new(e.to_string()).into())
}

/// A run that could not be assembled, as the command line reports it: what the user wrote or
/// typed is bad input (exit status 2).
fn setup_error(e: SetupError) -> anyhow::Error {
    match e {
        SetupError::Input(message) => BadInput::new(message).into(),
        other => other.into(),
    }
}

/// What a command that runs agents assembles: the run's options (from its flags) and how it
/// reports. [`Setup::prepare`] reads the config layers into a checked [`RunConfig`] and
/// assembles the run from it.
#[derive(Clone)]
pub struct Setup {
    pub run: RunOptions,
    pub output: OutputFlags,
    /// End with where the timeline is (not for a demo whose workspace is about to go).
    pub timeline_hint: bool,
    /// Where the run's events go instead of the terminal or `--json` (an editor over ACP).
    pub sink: Option<SharedSink>,
}

/// The lease settings of the user's config (`store: {lease: {heartbeatMs, staleMs}}`; a
/// workspace's config never sets them), today's values where not set: for the commands that
/// judge leases without running a task (a run's own come with its [`RunConfig`]).
pub fn lease_settings(cx: &Context) -> anyhow::Result<store::LeaseSettings> {
    rawko_session::run::lease_settings(cx.user_config()?)
        .map_err(|e| BadInput::new(e.to_string()).into())
}

impl Setup {
    /// A run in `cx`'s workspace with its directories, the config's adapters and the default
    /// step limit.
    pub fn new(cx: &Context, trust: Trust, output: &OutputFlags) -> anyhow::Result<Setup> {
        let mut run = RunOptions::new(
            cx.workspace().to_path_buf(),
            [
                cx.dirs.data.clone(),
                cx.dirs.config.clone(),
                cx.dirs.cache.clone(),
            ],
            trust,
            cx.launch()?,
        );
        run.stream = !output.no_stream;
        run.traces = crate::cli::telemetry::links();
        Ok(Setup {
            run,
            output: output.clone(),
            timeline_hint: true,
            sink: None,
        })
    }

    fn events(&self) -> SharedSink {
        if let Some(sink) = &self.sink {
            sink.clone()
        } else if self.output.json {
            Arc::new(JsonLines::default())
        } else if self.output.quiet {
            Arc::new(Quiet)
        } else {
            Arc::new(Live::new(std::io::stderr().is_terminal()))
        }
    }

    /// Prepare, drive the task to its end and report it: the task's id and how it ended.
    pub async fn run(
        self,
        start: Start<'_>,
        store: &AnyStore,
    ) -> anyhow::Result<(String, TaskEnd)> {
        let output = self.output.clone();
        let timeline_hint = self.timeline_hint;
        let workspace = self.run.workspace.clone();
        let run = self.prepare(start, store).await?;
        let id = run.task().to_string();
        // One runner per task: a second `rawko resume` of a task being run stops here.
        if let Err(holder) = store.acquire_lease(&id).await? {
            return Err(BadInput::new(format!(
                "task {id} is being run by rawko (pid {} on {}); wait for it to end, or stop it \
                 (Ctrl-C) and `rawko resume {id}`",
                holder.pid,
                rawko_text::line(&holder.host, 80)
            ))
            .into());
        }
        let cancel = CancelFlag::default();
        let heartbeat = Heartbeat::start(store, &id, &cancel).await?;
        let end = drive_with(run, store, cancel, true).await;
        drop(heartbeat);
        let _ = store.release_lease(&id).await;
        let end = end?;
        report(
            store,
            ClosingDiff::Workspace(&workspace),
            &id,
            &end,
            &output,
            timeline_hint,
        )
        .await?;
        Ok((id, end))
    }

    /// Read and check the config, load the agents, plugins and adapters; create (or find) the
    /// task.
    pub async fn prepare(self, start: Start<'_>, store: &AnyStore) -> anyhow::Result<Prepared> {
        let events = self.events();
        let config = RunConfig::load(self.run, &*events).map_err(setup_error)?;
        config
            .prepare(start, store, events)
            .await
            .map_err(setup_error)
    }
}

/// Drive a prepared task to its end (or until Ctrl-C).
pub async fn drive(run: Prepared, store: &AnyStore) -> anyhow::Result<TaskEnd> {
    drive_with(run, store, CancelFlag::default(), true).await
}

/// Drive a prepared task to its end or until `cancel` is set; with `signals`, Ctrl-C and
/// SIGTERM set it.
pub async fn drive_with(
    run: Prepared,
    store: &AnyStore,
    cancel: CancelFlag,
    signals: bool,
) -> anyhow::Result<TaskEnd> {
    let watcher = signals.then(|| {
        let cancel = cancel.clone();
        let events = run.events().clone();
        let (location, task) = (store.location(), run.task().to_string());
        tokio::spawn(async move {
            // SIGTERM (a service manager, `kill`, a closing terminal's job control) is
            // treated as Ctrl-C: stop now, keep what finished, mark the task cancelled;
            // twice, exit at once.
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            let mut stop = async || {
                tokio::select! {
                    r = tokio::signal::ctrl_c() => r.is_ok(),
                    Some(()) = async {
                        match term.as_mut() {
                            Some(t) => t.recv().await,
                            None => std::future::pending().await,
                        }
                    } => true,
                }
            };
            if stop().await {
                cancel.cancel();
                // Running commands are stopped (their whole process trees), and no other
                // starts.
                rawko_shell::exec::stop_all();
                events.emit(&RunEvent::Warning {
                    message: "cancelling: stopping the model call and commands in flight \
                                  (Ctrl-C again exits at once; `rawko resume` continues)"
                        .into(),
                });
                if stop().await {
                    // Leave no spinner behind on the user's terminal.
                    if std::io::stderr().is_terminal() {
                        eprint!("\r\x1b[2K");
                    }
                    // The task is left cancelled, not `running`, and free to resume.
                    stopped_at_once(location, &task);
                    eprintln!("stopped at once; `rawko resume {task}` continues the task");
                    std::process::exit(130);
                }
            }
        })
    });
    let end = run.drive(store, cancel).await;
    if let Some(w) = watcher {
        w.abort();
    }
    Ok(end?)
}

/// Mark `task` cancelled and free to resume, from a connection of its own: the run's own is in
/// the middle of a step.
fn stopped_at_once(location: Location, task: &str) {
    let task = task.to_string();
    let done = std::thread::spawn(move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        rt.block_on(async {
            if let Ok(s) = AnyStore::open(&location).await {
                let _ = s
                    .finish_task(
                        &task,
                        TaskStatus::Cancelled,
                        "stopped at once (a second Ctrl-C)",
                    )
                    .await;
                let _ = s.release_lease(&task).await;
            }
        });
    });
    let _ = done.join();
}

/// Renews this runner's lease on a task from its own thread (and its own connection) until
/// dropped, so a long model call or tool never lets the lease go stale. A renewal that finds the
/// lease another runner's (this one was stalled past the staleness, and the task taken over)
/// stops the run: the commands in flight are killed and the engine stops at once, and its store
/// refuses to change the task any more ([`store::StoreError::TakenOver`]).
pub struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    /// Start renewing this runner's lease on `task` in `store`, at the store's lease settings.
    pub async fn start(
        store: &AnyStore,
        task: &str,
        cancel: &CancelFlag,
    ) -> anyhow::Result<Heartbeat> {
        let lease = store.lease_settings();
        let beside = store.open_beside().await?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (task, cancel) = (task.to_string(), cancel.clone());
        let thread = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(lease.heartbeat)
            {
                match rt.block_on(beside.renew_lease(&task)) {
                    Ok(true) => {}
                    Ok(false) => {
                        cancel.cancel();
                        rawko_shell::exec::stop_all();
                        return;
                    }
                    // The store is busy or unreachable this time: the next beat tries again.
                    Err(e) => tracing::warn!("renewing the lease on task {task}: {e}"),
                }
            }
        });
        Ok(Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The end of a run, for a person or a script.
pub async fn report(
    store: &AnyStore,
    diff: ClosingDiff<'_>,
    id: &str,
    end: &TaskEnd,
    output: &OutputFlags,
    timeline_hint: bool,
) -> anyhow::Result<()> {
    if output.json {
        // The task_finished event has said it all.
        return Ok(());
    }
    let summary = rawko_text::block(&end.summary, 20_000);
    if output.quiet {
        print_out(&summary)?;
        return Ok(());
    }
    let usage = store.task_usage(id).await.unwrap_or_default();
    let headline = match end.status {
        TaskStatus::Done => format!("Task {id} is done."),
        TaskStatus::Cancelled => format!(
            "Task {id} was cancelled at {}; `rawko resume {id}` continues it.",
            end.state
        ),
        TaskStatus::Interrupted => format!(
            "Task {id} was interrupted at {} (the model could not be reached); `rawko resume \
             {id}` continues it.",
            end.state
        ),
        TaskStatus::Running => format!("Task {id} stopped at {}.", end.state),
        other => format!("Task {id} {}.", other.as_str()),
    };
    let hint = if timeline_hint {
        format!(" · `rawko tasks show {id}` for the timeline")
    } else {
        String::new()
    };
    // The files the task's Write and Edit calls changed, from the store (not from git, which
    // would run programs the repository's config names).
    let mut changed: Vec<String> = Vec::new();
    for c in store.tool_calls(id).await.unwrap_or_default() {
        if c.is_error || !matches!(c.tool.as_str(), "Write" | "Edit") {
            continue;
        }
        let path = serde_json::from_str::<serde_json::Value>(&c.input)
            .ok()
            .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string));
        if let Some(p) = path
            && !changed.contains(&p)
        {
            changed.push(p);
        }
    }
    if let ClosingDiff::Patch(patch) = diff {
        // A remote task's files are the patch's, whichever tool changed them.
        changed = patch_files(patch);
    }
    let files = if changed.is_empty() {
        String::new()
    } else {
        let diff = match diff {
            ClosingDiff::Workspace(workspace) => task_diff(workspace, &changed),
            ClosingDiff::Patch(patch) => patch_text(patch),
        }
        .map(|d| format!("\n{d}"))
        .unwrap_or_default();
        format!("\nfiles changed: {}{diff}", changed.join(", "))
    };
    print_out(&format!(
        "\n{headline}\n{summary}\n{files}\ntokens: {} in, {} out{hint}",
        usage.input_tokens + usage.cache_read + usage.cache_write,
        usage.output_tokens,
    ))?;
    Ok(())
}

/// Where the closing report's diff comes from.
pub enum ClosingDiff<'a> {
    /// The workspace the task ran in, against its `HEAD`.
    Workspace(&'a Path),
    /// A patch of the task's changes (a remote task's, kept in the store).
    #[cfg_attr(not(feature = "temporal"), allow(dead_code))]
    Patch(&'a [u8]),
}

/// The files a patch changes, from its `diff --git a/X b/Y` headers (Y; git quotes a name
/// with unusual bytes, `"b/\\056x"`, and the quoting is undone).
pub fn patch_files(patch: &[u8]) -> Vec<String> {
    patch
        .split(|&b| b == b'\n')
        .filter_map(|l| l.strip_prefix(b"diff --git "))
        .filter_map(|l| {
            let b = if l.ends_with(b"\"") {
                // The new name is quoted; an unquoted old name holds no `"`, a quoted one
                // ends at its closing quote.
                let start = if l.starts_with(b"\"") {
                    let (_, len) = rawko_git::unquote(l)?;
                    len + 1
                } else {
                    l.windows(4).position(|w| w == b" \"b/")? + 1
                };
                let (name, _) = rawko_git::unquote(&l[start..])?;
                name.strip_prefix(b"b/")?.to_vec()
            } else {
                let text = String::from_utf8_lossy(l);
                text.rsplit_once(" b/")?.1.as_bytes().to_vec()
            };
            Some(rawko_text::line(&String::from_utf8_lossy(&b), 200).into_owned())
        })
        .collect()
}

/// The first lines of a patch, its binary hunks named rather than shown.
fn patch_text(patch: &[u8]) -> Option<String> {
    if patch.is_empty() {
        return None;
    }
    let text = String::from_utf8_lossy(patch);
    let mut out: Vec<&str> = Vec::new();
    let mut binary = false;
    for line in text.lines() {
        if binary {
            binary = !line.starts_with("diff --git ");
            if binary {
                continue;
            }
        }
        if line == "GIT binary patch" {
            out.push("(binary)");
            binary = true;
            continue;
        }
        if out.len() == CLOSING_DIFF_LINES {
            out.push("...");
            break;
        }
        out.push(line);
    }
    Some(rawko_text::block(&out.join("\n"), 40_000).into_owned())
}

/// Lines of the closing diff; the rest is a `Git` call away.
const CLOSING_DIFF_LINES: usize = 200;

/// The files a task changed, diffed against `HEAD` by the Git tool's engine (which runs no
/// program the repository names), when the workspace is in a git repository with commits.
fn task_diff(workspace: &Path, changed: &[String]) -> Option<String> {
    let request = rawko_git::Request::Diff {
        rev: Some("HEAD".into()),
        paths: changed.to_vec(),
        staged: false,
        max_lines: Some(CLOSING_DIFF_LINES),
    };
    let opts = rawko_git::Options {
        write: false,
        identity: rawko_git::Identity::default(),
    };
    match rawko_git::run(workspace, request, &opts) {
        Ok(text) => Some(text.trim_end().to_string()),
        Err(e) => {
            tracing::debug!("no closing diff: {e}");
            None
        }
    }
}

/// 0 done, 130 cancelled, 75 interrupted (EX_TEMPFAIL: try again), 1 otherwise.
pub fn exit_code(end: &TaskEnd) -> ExitCode {
    match end.status {
        TaskStatus::Done => ExitCode::SUCCESS,
        TaskStatus::Cancelled => ExitCode::from(130),
        TaskStatus::Interrupted => ExitCode::from(75),
        _ => ExitCode::from(1),
    }
}

#[cfg(test)]
mod tests {
    use super::patch_files;

    /// Every file a patch names is listed, however git quoted its name: a file a report
    /// leaves out is one the user does not know to look at.
    #[test]
    fn a_patchs_files_are_all_named_quoted_or_not() {
        let patch = concat!(
            "diff --git a/b/x b/b/x\n",
            "diff --git a/with space b/with space\n",
            "diff --git \"a/\\056rawko/agents/evil.yaml\" \"b/\\056rawko/agents/evil.yaml\"\n",
            "diff --git a/plain \"b/tab\\there\"\n",
            "diff --git \"a/q\\\"uote\" \"b/q\\\"uote\"\n",
            "diff --git \"a/caf\\303\\251\" \"b/caf\\303\\251\"\n",
            "diff --git \"a/broken \"b/broken\n",
        );
        assert_eq!(
            patch_files(patch.as_bytes()),
            [
                "b/x",
                "with space",
                ".rawko/agents/evil.yaml",
                "tab\\there",
                "q\"uote",
                "café",
            ]
        );
    }
}
