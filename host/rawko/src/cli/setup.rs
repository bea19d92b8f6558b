//! What every command that runs agents assembles: the task store, the run's setup (workspace,
//! adapters, tools, filters, MCP servers, limits, where events go), how it starts, and the exit
//! status its end maps to. `run`, `resume`, `demo`, `acp` and `mcp serve` all run tasks through
//! this one path, so a task behaves the same whichever command started it.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::cli::live::Live;
use crate::cli::lookup::unknown_agent;
use crate::cli::policy::configured_filters;
use crate::cli::{BadInput, Context, print_out};
use rawko_adapters::instance::{InstalledAdapters, resolve_all};
use rawko_adapters::{AdapterInstance, Recorder, Trust};
use rawko_agents::registry::{Registry, SearchPath};
use rawko_config::{ArbiterMode, Layers};
use rawko_fsm::arbiter::{Arbiter, DEFAULT_MAX_FAILURES};
use rawko_fsm::events::{EventSink, JsonLines, Quiet, RunEvent};
use rawko_fsm::session::{
    Agents, SessionLlms, SessionTools, SharedSink, tool_budget, untrusted_agent,
};
use rawko_fsm::{
    CancelFlag, DEFAULT_MAX_ITERATIONS, DEFAULT_TIMEOUT, Engine, StateLimits, TaskEnd,
};
use rawko_mcp::client::Servers;
use rawko_shell::exec::Launch;
use rawko_store::{self as store, TaskStatus, TaskStore};
use rawko_toolset::ToolSet;
use rawko_toolset::chain::Chain;

/// The agent a task starts with when `--agent` is not given.
pub const DEFAULT_START: &str = "planner";
/// Default limit on transitions per task.
pub const DEFAULT_MAX_STEPS: u32 = 50;

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

/// Open (creating) the task store at `path`; a store that cannot be opened is bad input.
pub fn open_store(path: &Path) -> anyhow::Result<TaskStore> {
    TaskStore::open(path).map_err(|e| BadInput::new(e.to_string()).into())
}

/// How a run starts.
pub enum Start<'a> {
    New {
        prompt: &'a str,
        agent: &'a str,
        options: serde_json::Value,
    },
    Resume {
        id: &'a str,
    },
}

/// What a run is assembled from.
#[derive(Clone)]
pub struct Setup {
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub config_dir: PathBuf,
    pub cache_dir: PathBuf,
    pub trusted: bool,
    pub adapter: Option<String>,
    pub recorder: Option<Arc<Recorder>>,
    pub output: OutputFlags,
    /// Adapter instances to use instead of the config's (the demo brings its own).
    pub instances: Option<BTreeMap<String, AdapterInstance>>,
    pub max_steps: u32,
    /// How native commands start (the kernel sandbox, unless `--no-sandbox`).
    pub launch: Launch,
    /// End with where the timeline is (not for a demo whose workspace is about to go).
    pub timeline_hint: bool,
    /// The MCP servers whose tools agents may call, connected and approved.
    pub mcp: Option<Rc<Servers>>,
    /// Where the run's events go instead of the terminal or `--json` (an editor over ACP).
    pub sink: Option<SharedSink>,
}

/// A run, assembled and ready to drive.
pub struct Prepared {
    task: String,
    agents: Agents,
    llms: SessionLlms,
    tools: SessionTools,
    events: SharedSink,
    arbiter_mode: ArbiterMode,
    arbiter_adapter: Option<String>,
    limits: StateLimits,
    max_steps: u32,
    trusted: bool,
    context_threshold: f32,
    max_task_tokens: Option<u64>,
}

impl Setup {
    /// A run in `cx`'s workspace with its directories, the config's adapters and the default
    /// step limit.
    pub fn new(cx: &Context, trusted: bool, output: &OutputFlags) -> anyhow::Result<Setup> {
        Ok(Setup {
            workspace: cx.workspace().to_path_buf(),
            data_dir: cx.dirs.data.clone(),
            config_dir: cx.dirs.config.clone(),
            cache_dir: cx.dirs.cache.clone(),
            trusted,
            adapter: None,
            recorder: None,
            output: output.clone(),
            instances: None,
            max_steps: DEFAULT_MAX_STEPS,
            launch: cx.launch()?,
            timeline_hint: true,
            mcp: None,
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
        store: &TaskStore,
    ) -> anyhow::Result<(String, TaskEnd)> {
        let output = self.output.clone();
        let timeline_hint = self.timeline_hint;
        let workspace = self.workspace.clone();
        let run = self.prepare(start, store).await?;
        let id = run.task().to_string();
        // One runner per task: a second `rawko resume` of a task being run stops here.
        if let Err(holder) = store.acquire_lease(&id)? {
            return Err(BadInput::new(format!(
                "task {id} is being run by rawko (pid {} on {}); wait for it to end, or stop it \
                 (Ctrl-C) and `rawko resume {id}`",
                holder.pid,
                rawko_text::line(&holder.host, 80)
            ))
            .into());
        }
        let _heartbeat = Heartbeat::start(store.path(), &id);
        let end = run.drive(store).await;
        let _ = store.release_lease(&id);
        let end = end?;
        report(store, &workspace, &id, &end, &output, timeline_hint)?;
        Ok((id, end))
    }

    /// Load the agents, config, plugins and adapters; create (or find) the task.
    pub async fn prepare(self, start: Start<'_>, store: &TaskStore) -> anyhow::Result<Prepared> {
        let events = self.events();
        let (layers, ignored) = Layers::load(&self.config_dir, &self.workspace)
            .map_err(|e| BadInput::new(e.to_string()))?
            .effective(self.trusted);
        if let Some(message) = rawko_config::Ignored::summary(&ignored) {
            events.emit(&RunEvent::Warning { message });
        }
        let merged = layers.merged();
        let trust = if self.trusted {
            Trust::Trusted
        } else {
            Trust::Untrusted
        };
        let instances = match self.instances {
            Some(i) => i,
            None => {
                let installed = InstalledAdapters::load(&self.data_dir, &self.workspace);
                resolve_all(&layers, trust, &installed).map_err(|e| BadInput::new(e.to_string()))?
            }
        };

        let registry = Registry::load(&SearchPath::standard(&self.workspace, &self.config_dir));
        for d in registry.diagnostics() {
            if d.severity == rawko_agents::Severity::Error {
                events.emit(&RunEvent::Warning {
                    message: format!("{d} (the agent is skipped)"),
                });
            }
        }
        let agents = Agents(registry);

        // The agent the run starts with; none when a resumed task already stands at a
        // terminal state (the engine then only closes it).
        let (task, first_agent) = match start {
            Start::New {
                prompt,
                agent,
                options,
            } => {
                let Some(a) = agents.0.get(agent) else {
                    if agents.0.entry(agent).is_some() {
                        return Err(BadInput::new(format!(
                            "agent `{agent}` has errors; `rawko agents validate` shows them"
                        ))
                        .into());
                    }
                    return Err(unknown_agent(&agents.0, agent).into());
                };
                (Task::New(prompt.to_string(), options), Some(a))
            }
            Start::Resume { id } => {
                let t = store.task(id).map_err(|e| BadInput::new(e.to_string()))?;
                let first = agents.0.get(&t.state);
                let terminal = t
                    .state
                    .parse::<rawko_agents::model::Target>()
                    .is_ok_and(|x| !matches!(x, rawko_agents::model::Target::Agent(_)));
                if first.is_none() && !terminal {
                    return Err(BadInput::new(format!(
                        "task {} is at agent `{}`, which is not loaded (see `rawko agents list`)",
                        t.id, t.state
                    ))
                    .into());
                }
                (Task::Existing(t.id, t.state), first)
            }
        };

        let rt = Rc::new(
            rawko_runtime::Runtime::new(Some(self.cache_dir.clone()))
                .map_err(|e| anyhow::anyhow!(e))?,
        );
        let set = ToolSet::with_installed(&rt, &self.data_dir, &self.workspace).await?;
        let filters = configured_filters(&layers, &self.data_dir)?;
        let chain = Chain::load(&rt, &filters).await?;
        let tools = SessionTools::new(
            rt.clone(),
            self.workspace.clone(),
            set,
            chain,
            self.trusted,
            tool_budget(),
            self.launch.clone(),
        )
        .map_err(|e| BadInput::new(e.to_string()))?;
        let tools = match &self.mcp {
            Some(servers) => tools.with_mcp(servers.clone()),
            None => tools,
        };

        let default_adapter = merged.defaults.as_ref().and_then(|d| d.adapter.clone());
        let limits = StateLimits {
            max_iterations: merged
                .defaults
                .as_ref()
                .and_then(|d| d.limits.as_ref())
                .and_then(|l| l.max_iterations)
                .unwrap_or(DEFAULT_MAX_ITERATIONS),
            timeout: merged
                .defaults
                .as_ref()
                .and_then(|d| d.limits.as_ref())
                .and_then(|l| l.timeout)
                .map(Duration::from_millis)
                .unwrap_or(DEFAULT_TIMEOUT),
        };
        let max_task_tokens = merged
            .defaults
            .as_ref()
            .and_then(|d| d.limits.as_ref())
            .and_then(|l| l.max_tokens);
        let context_threshold = merged
            .context
            .as_ref()
            .and_then(|c| c.threshold)
            .unwrap_or(rawko_fsm::context::DEFAULT_THRESHOLD);
        if !(0.1..=0.95).contains(&context_threshold) {
            return Err(BadInput::new(format!(
                "context.threshold is {context_threshold}; give a share of the window between \
                 0.1 and 0.95"
            ))
            .into());
        }
        let summariser = merged.context.as_ref().and_then(|c| c.summariser.clone());
        if let Some(name) = &summariser
            && !instances.contains_key(name)
        {
            return Err(BadInput::new(format!(
                "context.summariser names the adapter `{name}`, which the config does not define \
                 (defined: {})",
                instances.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
            .into());
        }
        let (arbiter_mode, arbiter_adapter) = match &merged.arbiter {
            Some(a) => (a.mode, a.adapter.clone().or(default_adapter.clone())),
            None => (ArbiterMode::Fixed, None),
        };

        let mut llms = SessionLlms::new(
            rt.clone(),
            instances,
            self.adapter.clone(),
            default_adapter,
            events.clone(),
            !self.output.no_stream,
            self.recorder.clone(),
        );
        llms.summariser = summariser;
        llms.model_aliases = merged.model_aliases.clone();
        llms.config_files = vec![
            self.config_dir.join(rawko_config::FILE_NAME),
            self.workspace.join(".rawko").join(rawko_config::FILE_NAME),
        ];
        if let Task::Existing(id, _) = &task {
            // A resumed task continues each instance's numbering (a replay picks up there).
            for name in llms.instances.keys() {
                let n = store.completions(id, name)?;
                if n > 0 {
                    llms.completed.borrow_mut().insert(name.clone(), n);
                }
            }
        }
        // A missing key or recording is reported before any work (and before a task is made),
        // not in the middle of it.
        llms.open_all(first_agent.iter().map(|a| &**a))
            .await
            .map_err(BadInput::new)?;
        let task_id = match &task {
            Task::New(prompt, options) => {
                // `Start::New` always names a loaded agent.
                let first = first_agent.as_ref().map_or("", |a| a.name.as_str());
                store.create_task(prompt, first, options)?
            }
            Task::Existing(id, _) => id.clone(),
        };
        match &task {
            Task::New(prompt, _) => events.emit(&RunEvent::TaskStarted {
                task: task_id.clone(),
                prompt: prompt.clone(),
            }),
            Task::Existing(id, state) => events.emit(&RunEvent::TaskResumed {
                task: id.clone(),
                state: state.clone(),
            }),
        }
        if let Some(first) = first_agent.filter(|a| untrusted_agent(a, self.trusted)) {
            events.emit(&RunEvent::Warning {
                message: format!(
                    "agent {} comes from this untrusted workspace: it gets read-only tools \
                     (`rawko trust` to change that)",
                    first.name
                ),
            });
        }
        Ok(Prepared {
            task: task_id,
            agents,
            llms,
            tools,
            events,
            arbiter_mode,
            arbiter_adapter,
            limits,
            max_steps: self.max_steps,
            trusted: self.trusted,
            context_threshold,
            max_task_tokens,
        })
    }
}

enum Task {
    New(String, serde_json::Value),
    Existing(String, String),
}

impl Prepared {
    pub fn task(&self) -> &str {
        &self.task
    }

    /// Drive the task to its end (or until Ctrl-C).
    pub async fn drive(self, store: &TaskStore) -> anyhow::Result<TaskEnd> {
        self.drive_with(store, CancelFlag::default(), true).await
    }

    /// Drive the task to its end or until `cancel` is set; with `signals`, Ctrl-C and SIGTERM
    /// set it.
    pub async fn drive_with(
        self,
        store: &TaskStore,
        cancel: CancelFlag,
        signals: bool,
    ) -> anyhow::Result<TaskEnd> {
        let arbiter_llm = match (self.arbiter_mode, &self.arbiter_adapter) {
            (ArbiterMode::Llm, Some(name)) => match self.llms.arbiter(name).await {
                Ok(l) => Some(l),
                Err(e) => {
                    self.events.emit(&RunEvent::Warning {
                        message: format!(
                            "the llm arbiter cannot use adapter {name} ({e}); the transition \
                             tables decide"
                        ),
                    });
                    None
                }
            },
            (ArbiterMode::Llm, None) => {
                self.events.emit(&RunEvent::Warning {
                    message: "arbiter mode is llm but no adapter is set for it; the transition \
                              tables decide"
                        .into(),
                });
                None
            }
            _ => None,
        };
        let watcher = signals.then(|| {
            let cancel = cancel.clone();
            let events = self.events.clone();
            let (store_path, task) = (store.path().to_path_buf(), self.task.clone());
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
                        if let Ok(s) = TaskStore::open(&store_path) {
                            let _ = s.finish_task(
                                &task,
                                TaskStatus::Cancelled,
                                "stopped at once (a second Ctrl-C)",
                            );
                            let _ = s.release_lease(&task);
                        }
                        eprintln!("stopped at once; `rawko resume {task}` continues the task");
                        std::process::exit(130);
                    }
                }
            })
        });
        let events: &dyn EventSink = &*self.events;
        let engine = Engine {
            store,
            agents: &self.agents,
            llms: &self.llms,
            tools: &self.tools,
            arbiter: Arbiter {
                mode: if arbiter_llm.is_some() {
                    ArbiterMode::Llm
                } else {
                    ArbiterMode::Fixed
                },
                max_failures: DEFAULT_MAX_FAILURES,
                llm: arbiter_llm.as_deref(),
            },
            events,
            cancel,
            defaults: self.limits,
            max_steps: self.max_steps,
            workspace_trusted: self.trusted,
            context_threshold: self.context_threshold,
            max_task_tokens: self.max_task_tokens,
        };
        let end = engine.run(&self.task).await;
        if let Some(w) = watcher {
            w.abort();
        }
        Ok(end?)
    }
}

/// Renews this runner's lease on a task from its own thread (and its own connection) until
/// dropped, so a long model call or tool never lets the lease go stale.
struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(path: &Path, task: &str) -> Heartbeat {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (path, task) = (path.to_path_buf(), task.to_string());
        let thread = std::thread::spawn(move || {
            let Ok(store) = TaskStore::open(&path) else {
                return;
            };
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(store::LEASE_HEARTBEAT)
            {
                if !store.renew_lease(&task).unwrap_or(false) {
                    return;
                }
            }
        });
        Heartbeat {
            stop: Some(stop),
            thread: Some(thread),
        }
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
pub fn report(
    store: &TaskStore,
    workspace: &Path,
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
    let usage = store.task_usage(id).unwrap_or_default();
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
    for c in store.tool_calls(id).unwrap_or_default() {
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
    let files = if changed.is_empty() {
        String::new()
    } else {
        let diff = task_diff(workspace, &changed)
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
