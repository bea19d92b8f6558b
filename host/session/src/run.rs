//! One run, assembled: the configuration a run takes, read from the config layers and the
//! command line's choices and checked once ([`RunConfig`]), and the task it drives
//! ([`Prepared`]). Every command that runs agents (`run`, `resume`, `demo`, `acp`, `mcp serve`)
//! comes through here, so a task behaves the same whichever started it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rawko_adapters::instance::{InstalledAdapters, InstanceError, resolve_all};
use rawko_adapters::{AdapterInstance, Recorder};
use rawko_agents::model::Target;
use rawko_agents::registry::{Registry, SearchPath};
use rawko_config::{ArbiterMode, ConfigError, Layers, Trust};
use rawko_distribution::PluginStore;
use rawko_fsm::arbiter::{Arbiter, DEFAULT_MAX_FAILURES};
use rawko_fsm::events::{EventSink, RunEvent};
use rawko_fsm::store::Store;
use rawko_fsm::telemetry::TraceLinks;
use rawko_fsm::tools::Checkpoint;
use rawko_fsm::{CancelFlag, Engine, EngineError, StateLimits, TaskEnd};
use rawko_mcp::client::Servers;
use rawko_runtime::{Runtime, RuntimeError};
use rawko_shell::exec::Launch;
use rawko_store::{AnyStore, LeaseError, LeaseSettings, StoreError, WorkspaceId};
use rawko_toolset::chain::{Chain, FilterFileError, read_filter_files};
use rawko_toolset::{ToolSet, ToolSetError};

use crate::{Agents, SessionLlms, SessionTools, SharedSink, tool_budget, untrusted_agent};

/// Transitions one task may take when the command line does not say.
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// Why a run could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// What the user wrote or typed: a config, a flag, an agent's name, a task's id.
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Tools(#[from] ToolSetError),
}

impl SetupError {
    fn input(e: impl std::fmt::Display) -> SetupError {
        SetupError::Input(e.to_string())
    }
}

impl From<ConfigError> for SetupError {
    fn from(e: ConfigError) -> Self {
        SetupError::input(e)
    }
}

impl From<InstanceError> for SetupError {
    fn from(e: InstanceError) -> Self {
        SetupError::input(e)
    }
}

/// What the command line decided for a run, before any config is read.
#[derive(Clone)]
pub struct RunOptions {
    pub workspace: PathBuf,
    pub data_dir: PathBuf,
    pub config_dir: PathBuf,
    pub cache_dir: PathBuf,
    /// Whether the user trusts the workspace's own config, agents and plugins.
    pub trust: Trust,
    /// `--adapter`: the instance every agent uses.
    pub adapter: Option<String>,
    /// `--record`: where each model reply is also written.
    pub recorder: Option<Arc<Recorder>>,
    /// Adapter instances to use instead of the config's (the demo brings its own); taken by
    /// [`RunConfig::load`].
    pub instances: Option<BTreeMap<String, AdapterInstance>>,
    /// Most transitions the task may take.
    pub max_steps: u32,
    /// Ask for each reply streamed (`--no-stream` turns it off).
    pub stream: bool,
    /// How native commands start (the kernel sandbox, unless `--no-sandbox`).
    pub launch: Launch,
    /// The MCP servers whose tools agents may call, connected and approved.
    pub mcp: Option<Rc<Servers>>,
    /// Where the run's traces go, when they are exported.
    pub traces: Option<Arc<dyn TraceLinks>>,
}

impl RunOptions {
    /// A run in `workspace` with these directories, the config's adapters, the default step
    /// limit and streamed replies.
    pub fn new(workspace: PathBuf, dirs: [PathBuf; 3], trust: Trust, launch: Launch) -> RunOptions {
        let [data_dir, config_dir, cache_dir] = dirs;
        RunOptions {
            workspace,
            data_dir,
            config_dir,
            cache_dir,
            trust,
            adapter: None,
            recorder: None,
            instances: None,
            max_steps: DEFAULT_MAX_STEPS,
            stream: true,
            launch,
            mcp: None,
            traces: None,
        }
    }
}

/// Everything a run takes, read from the config layers and the command line and checked once:
/// nothing after this reads a config file or decides a default.
pub struct RunConfig {
    pub options: RunOptions,
    /// The layers in effect (a workspace's settings its trust does not allow are dropped).
    pub layers: Layers,
    pub instances: BTreeMap<String, AdapterInstance>,
    /// `defaults.adapter`: the instance of agents that name none.
    pub default_adapter: Option<String>,
    /// Limits of states whose agent sets none (`defaults.limits`).
    pub limits: StateLimits,
    /// Tokens the task may use in all (`defaults.limits.maxTokens`).
    pub max_task_tokens: Option<u64>,
    /// The share of a model's window a request may fill before it is compacted.
    pub context_threshold: f32,
    /// `context.summariser`: the instance that summarises conversations.
    pub summariser: Option<String>,
    pub arbiter_mode: ArbiterMode,
    /// The instance the llm arbiter asks.
    pub arbiter_adapter: Option<String>,
    pub model_aliases: BTreeMap<String, String>,
    /// The bash filters the config names, as (name, component bytes).
    pub filters: Vec<(String, Vec<u8>)>,
    /// How the task's lease is renewed and when it goes stale (the user's config only).
    pub lease: LeaseSettings,
}

impl RunConfig {
    /// Read the config layers `options` point at and check them: a setting dropped for trust
    /// is a warning on `events`; a value out of range, a name nothing defines, a filter that
    /// cannot be read is an error.
    pub fn load(mut options: RunOptions, events: &dyn EventSink) -> Result<RunConfig, SetupError> {
        let (layers, ignored) =
            Layers::load(&options.config_dir, &options.workspace)?.effective(options.trust);
        if let Some(message) = rawko_config::Ignored::summary(&ignored) {
            events.emit(&RunEvent::Warning { message });
        }
        let instances = match options.instances.take() {
            Some(i) => i,
            None => {
                let installed = InstalledAdapters::load(&options.data_dir, &options.workspace);
                resolve_all(&layers, options.trust, &installed)?
            }
        };
        let merged = layers.merged();
        let defaults = merged.defaults.as_ref();
        let limits = defaults.and_then(|d| d.limits.as_ref());
        let default_adapter = defaults.and_then(|d| d.adapter.clone());
        let state_limits = StateLimits {
            max_iterations: limits
                .and_then(|l| l.max_iterations)
                .unwrap_or(rawko_config::DEFAULT_MAX_ITERATIONS),
            timeout: Duration::from_millis(
                limits
                    .and_then(|l| l.timeout)
                    .unwrap_or(rawko_config::DEFAULT_TIMEOUT_MS),
            ),
        };
        let max_task_tokens = limits.and_then(|l| l.max_tokens);
        let context_threshold = merged
            .context
            .as_ref()
            .and_then(|c| c.threshold)
            .unwrap_or(rawko_fsm::context::DEFAULT_THRESHOLD);
        if !(0.1..=0.95).contains(&context_threshold) {
            return Err(SetupError::Input(format!(
                "context.threshold is {context_threshold}; give a share of the window between \
                 0.1 and 0.95"
            )));
        }
        let summariser = merged.context.as_ref().and_then(|c| c.summariser.clone());
        if let Some(name) = &summariser
            && !instances.contains_key(name)
        {
            return Err(SetupError::Input(format!(
                "context.summariser names the adapter `{name}`, which the config does not define \
                 (defined: {})",
                instances.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        }
        let (arbiter_mode, arbiter_adapter) = match &merged.arbiter {
            Some(a) => (a.mode, a.adapter.clone().or(default_adapter.clone())),
            None => (ArbiterMode::Fixed, None),
        };
        let model_aliases = merged.model_aliases.clone();
        let filters = configured_filters(&layers, &options.data_dir).map_err(SetupError::input)?;
        let lease = lease_settings(layers.user.as_ref()).map_err(SetupError::input)?;
        Ok(RunConfig {
            options,
            layers,
            instances,
            default_adapter,
            limits: state_limits,
            max_task_tokens,
            context_threshold,
            summariser,
            arbiter_mode,
            arbiter_adapter,
            model_aliases,
            filters,
            lease,
        })
    }

    /// Load the agents, plugins and adapters; create (or find) the task.
    pub async fn prepare(
        self,
        start: Start<'_>,
        store: &AnyStore,
        events: SharedSink,
    ) -> Result<Prepared, SetupError> {
        let options = &self.options;
        store.set_lease_settings(self.lease);
        rawko_toolset::host::install_catalogue();
        let registry = Registry::load(&SearchPath::standard(
            &options.workspace,
            &options.config_dir,
        ));
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
                        return Err(SetupError::Input(format!(
                            "agent `{agent}` has errors; `rawko agents validate` shows them"
                        )));
                    }
                    return Err(SetupError::Input(agents.0.unknown(agent)));
                };
                (Task::New(prompt.to_string(), options), Some(a))
            }
            Start::Resume { id } => {
                let t = store.task(id).await.map_err(SetupError::input)?;
                let first = agents.0.get(&t.state);
                let terminal = t
                    .state
                    .parse::<Target>()
                    .is_ok_and(|x| !matches!(x, Target::Agent(_)));
                if first.is_none() && !terminal {
                    return Err(SetupError::Input(format!(
                        "task {} is at agent `{}`, which is not loaded (see `rawko agents list`)",
                        t.id, t.state
                    )));
                }
                (Task::Existing(t.id, t.state), first)
            }
        };

        let rt = Rc::new(Runtime::new(Some(options.cache_dir.clone()))?);
        let set = ToolSet::with_installed(&rt, &options.data_dir, &options.workspace).await?;
        let chain = Chain::load(&rt, &self.filters).await?;
        let trust = options.trust;
        let tools = SessionTools::new(
            rt.clone(),
            options.workspace.clone(),
            set,
            chain,
            trust,
            tool_budget(),
            options.launch.clone(),
        )
        .map_err(SetupError::input)?;
        let tools = match &options.mcp {
            Some(servers) => tools.with_mcp(servers.clone()),
            None => tools,
        };

        let mut llms = SessionLlms::new(
            rt.clone(),
            self.instances,
            options.adapter.clone(),
            self.default_adapter,
            events.clone(),
            options.stream,
            options.recorder.clone(),
        );
        llms.summariser = self.summariser;
        llms.model_aliases = self.model_aliases;
        llms.config_files = vec![
            options.config_dir.join(rawko_config::FILE_NAME),
            options
                .workspace
                .join(".rawko")
                .join(rawko_config::FILE_NAME),
        ];
        if let Task::Existing(id, _) = &task {
            // A resumed task continues each instance's numbering (a replay picks up there).
            for name in llms.instances.keys() {
                let n = store.completions(id, name).await?;
                if n > 0 {
                    llms.completed.borrow_mut().insert(name.clone(), n);
                }
            }
        }
        // A missing key or recording is reported before any work (and before a task is made),
        // not in the middle of it.
        llms.open_all(first_agent.iter().map(|a| &**a))
            .await
            .map_err(SetupError::input)?;
        if matches!(task, Task::New(..)) && !store.has_workspace() {
            // Which repository a new task belongs to, read once per store.
            store.set_workspace(workspace_id(&options.workspace));
        }
        let task_id = match &task {
            Task::New(prompt, options) => {
                // `Start::New` always names a loaded agent.
                let first = first_agent.as_ref().map_or("", |a| a.name.as_str());
                store.create_task(prompt, first, options).await?
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
        if let Some(first) = first_agent.filter(|a| untrusted_agent(a, trust)) {
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
            arbiter_mode: self.arbiter_mode,
            arbiter_adapter: self.arbiter_adapter,
            limits: self.limits,
            max_steps: options.max_steps,
            trust,
            context_threshold: self.context_threshold,
            max_task_tokens: self.max_task_tokens,
            traces: options.traces.clone(),
            pause_after: None,
            checkpoint: None,
        })
    }
}

/// A bash filter a config file names could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", config.display())]
pub struct FilterConfigError {
    /// The config file that names the filter.
    pub config: PathBuf,
    pub source: FilterFileError,
}

/// The bash filters the config layers name, each once, as (name, component bytes).
pub fn configured_filters(
    layers: &Layers,
    data_dir: &Path,
) -> Result<Vec<(String, Vec<u8>)>, FilterConfigError> {
    let store = PluginStore::new(data_dir);
    let mut out: Vec<(String, Vec<u8>)> = Vec::new();
    for (path, config) in [&layers.user, &layers.workspace].into_iter().flatten() {
        let Some(bash) = &config.bash else { continue };
        let base = path.parent().unwrap_or(Path::new("."));
        for (name, wasm) in
            read_filter_files(base, &bash.filters, &store).map_err(|source| FilterConfigError {
                config: path.clone(),
                source,
            })?
        {
            if !out.iter().any(|(_, w)| *w == wasm) {
                out.push((name, wasm));
            }
        }
    }
    Ok(out)
}

/// Which workspace the tasks made in `workspace` belong to: its repository's first commit and
/// remote (credentials stripped), and its path.
pub fn workspace_id(workspace: &Path) -> WorkspaceId {
    let repository = rawko_git::repository_id(workspace);
    WorkspaceId {
        root: repository.root,
        remote: repository.remote,
        path: workspace.display().to_string(),
    }
}

/// A bad `store.lease` in the user's config.
#[derive(Debug, thiserror::Error)]
#[error("{}: store.lease: {source}", config.display())]
pub struct LeaseConfigError {
    /// The user's config file.
    pub config: PathBuf,
    pub source: LeaseError,
}

/// The lease settings of the user's config layer (`store: {lease: {heartbeatMs, staleMs}}`;
/// a workspace's config never sets them), today's values where it does not say.
pub fn lease_settings(
    user: Option<&(PathBuf, rawko_config::Config)>,
) -> Result<LeaseSettings, LeaseConfigError> {
    let Some((path, config)) = user else {
        return Ok(LeaseSettings::default());
    };
    let lease = config
        .store
        .as_ref()
        .and_then(|s| s.lease.clone())
        .unwrap_or_default();
    LeaseSettings::from_millis(lease.heartbeat_ms, lease.stale_ms).map_err(|source| {
        LeaseConfigError {
            config: path.clone(),
            source,
        }
    })
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

enum Task {
    New(String, serde_json::Value),
    Existing(String, String),
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
    trust: Trust,
    context_threshold: f32,
    max_task_tokens: Option<u64>,
    traces: Option<Arc<dyn TraceLinks>>,
    pause_after: Option<u32>,
    checkpoint: Option<Rc<dyn Checkpoint>>,
}

impl Prepared {
    /// Keep each tool call's effects before the call is recorded (see
    /// [`Engine::checkpoint`]).
    pub fn checkpoint(mut self, checkpoint: Rc<dyn Checkpoint>) -> Prepared {
        self.checkpoint = Some(checkpoint);
        self
    }

    /// Stop after `n` transitions, the task left running where it stands (see
    /// [`Engine::pause_after`]).
    pub fn pause_after(mut self, n: u32) -> Prepared {
        self.pause_after = Some(n);
        self
    }

    pub fn task(&self) -> &str {
        &self.task
    }

    /// Where the run's events go.
    pub fn events(&self) -> &SharedSink {
        &self.events
    }

    /// Drive the task to its end, or until `cancel` is set.
    pub async fn drive(
        self,
        store: &dyn Store,
        cancel: CancelFlag,
    ) -> Result<TaskEnd, EngineError> {
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
        let events: &dyn EventSink = &*self.events;
        let engine = Engine {
            store,
            agents: &self.agents,
            llms: &self.llms,
            tools: &self.tools,
            externals: &self.tools,
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
            workspace_trust: self.trust,
            context_threshold: self.context_threshold,
            max_task_tokens: self.max_task_tokens,
            traces: self.traces.as_deref(),
            pause_after: self.pause_after,
            checkpoint: self.checkpoint.as_deref(),
        };
        engine.run(&self.task).await
    }
}
