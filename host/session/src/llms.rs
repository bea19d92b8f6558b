//! The models a session gives its agents: adapter instances, opened once and shared.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use rawko_plugin_sdk::llm as wire;

use crate::SharedSink;

use rawko_adapters::{Adapter, AdapterInstance, OpenError, OpenOptions, Recorder};
use rawko_agents::model::Agent;
use rawko_fsm::conversation::{Message, Role};
use rawko_fsm::events::RunEvent;
use rawko_fsm::llm::{Completion, CompletionRequest, Llm, LlmError, LlmFuture};
use rawko_fsm::{LlmFor, LlmProvider};
use rawko_runtime::progress::ProgressSink;
use rawko_runtime::{AdapterCallError, Runtime};
use rawko_store::Usage;

/// Streams an adapter's text into the run's events, for one agent.
struct TextToEvents {
    agent: String,
    sink: SharedSink,
}

impl ProgressSink for TextToEvents {
    fn text(&self, delta: &str) {
        if !delta.is_empty() {
            self.sink.emit(&RunEvent::Text {
                agent: self.agent.clone(),
                text: delta.to_string(),
            });
        }
    }

    fn thinking(&self, _delta: &str) {}
}

/// One agent's model: an opened adapter instance.
pub struct AdapterLlm {
    rt: Rc<Runtime>,
    adapter: Rc<Adapter>,
    progress: Arc<dyn ProgressSink>,
    stream: bool,
    /// The agent's own model settings, over the instance's.
    model: Option<String>,
    max_tokens: Option<u32>,
    reasoning_effort: Option<wire::ReasoningEffort>,
    thinking_budget: Option<u32>,
}

/// The instance an agent's model comes from, before any is looked up: `forced` (`--adapter`),
/// else the instance the agent names, else the built-in instance of the provider it names,
/// else `default` (`defaults.adapter`). `None` when nothing names one.
pub fn instance_name(agent: &Agent, forced: Option<&str>, default: Option<&str>) -> Option<String> {
    if let Some(f) = forced {
        return Some(f.to_string());
    }
    if let Some(a) = &agent.model.adapter {
        return Some(a.clone());
    }
    if let Some(p) = agent.model.provider {
        // Provider fields map onto the built-in instance of that provider.
        let name = match p {
            rawko_agents::model::Provider::OpenAi => "openai",
            rawko_agents::model::Provider::Anthropic => "anthropic",
        };
        return Some(name.to_string());
    }
    default.map(str::to_string)
}

/// The model `instance` is asked for on the agent's behalf: the agent's own `model` through
/// the instance's aliases (`config_aliases`, then its plugin's), unless `--adapter` chose the
/// instance (`forced`: then the instance's model is what the user asked for); else the
/// instance's model.
pub fn agent_model(
    agent: &Agent,
    instance: &AdapterInstance,
    forced: bool,
    config_aliases: &BTreeMap<String, String>,
) -> String {
    match (&agent.model.model, forced) {
        (Some(m), false) => instance.model_for(m, config_aliases),
        _ => instance.model.clone(),
    }
}

impl Llm for AdapterLlm {
    fn adapter(&self) -> &str {
        self.adapter.name()
    }

    fn model(&self) -> &str {
        self.model
            .as_deref()
            .unwrap_or(&self.adapter.instance().model)
    }

    fn context_window(&self) -> u32 {
        self.adapter.instance().context_window
    }

    fn complete<'a>(&'a self, request: CompletionRequest<'a>) -> LlmFuture<'a> {
        Box::pin(async move {
            let messages = request.messages.to_vec();
            let tools = request
                .tools
                .iter()
                .map(|t| wire::ToolSpec {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                })
                .collect();
            let mut req = self.adapter.request(request.system, messages, tools);
            req.stream = self.stream;
            if let Some(m) = &self.model {
                req.model = m.clone();
            }
            if let Some(m) = self.max_tokens {
                req.options.max_tokens = Some(m);
            }
            if let Some(e) = self.reasoning_effort {
                req.options.reasoning_effort = Some(e);
            }
            if let Some(t) = self.thinking_budget {
                req.options.thinking_budget = Some(t);
            }
            match self
                .adapter
                .complete(&self.rt, req, self.progress.clone())
                .await
            {
                Ok(r) => Ok(Completion {
                    message: Message {
                        role: Role::Assistant,
                        content: r.content,
                    },
                    stop_reason: r.stop_reason,
                    usage: Usage {
                        input_tokens: clamp(r.usage.input_tokens),
                        output_tokens: clamp(r.usage.output_tokens),
                        cache_read: clamp(r.usage.cache_read_tokens),
                        cache_write: clamp(r.usage.cache_write_tokens),
                    },
                    model: r.model,
                }),
                Err(AdapterCallError::InvalidToolCall { response, .. }) => {
                    // The reply was real; the agent loop answers the malformed call.
                    let r = *response;
                    Ok(Completion {
                        message: Message {
                            role: Role::Assistant,
                            content: r.content,
                        },
                        stop_reason: r.stop_reason,
                        usage: Usage::default(),
                        model: r.model,
                    })
                }
                Err(e) => Err(llm_error(e)),
            }
        })
    }
}

fn clamp(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn llm_error(e: AdapterCallError) -> LlmError {
    match e {
        AdapterCallError::Adapter(a) => match a {
            wire::AdapterError::Transport { message } => LlmError::Transport(message),
            wire::AdapterError::Status { status, message } => LlmError::Status { status, message },
            wire::AdapterError::Malformed { message } => LlmError::Malformed(message),
            wire::AdapterError::Unsupported { message } => LlmError::Other(message),
        },
        other => LlmError::Other(other.to_string()),
    }
}

/// Why an agent's model cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(
        "agent {agent} names no adapter and no config sets `defaults.adapter` (looked in \
         {looked}); set it there, or pass --adapter NAME (available: {available})"
    )]
    NoAdapter {
        agent: String,
        looked: String,
        available: String,
    },
    #[error("no adapter named `{name}` (available: {available})")]
    NoInstance { name: String, available: String },
    #[error("adapter {name}: {source}")]
    Load {
        name: String,
        source: rawko_runtime::RuntimeError,
    },
    #[error(transparent)]
    Open(OpenError),
}

/// Gives each agent its model: the instance the agent names, else the run's `--adapter`, else
/// the config's default. Instances are opened once and shared, so a replay instance plays one
/// recording in order across agents.
pub struct SessionLlms {
    pub rt: Rc<Runtime>,
    pub instances: BTreeMap<String, AdapterInstance>,
    /// `--adapter`: used for every agent (it overrides the agents' own choice).
    pub forced: Option<String>,
    /// `defaults.adapter` from the config: for agents that name none.
    pub default: Option<String>,
    pub events: SharedSink,
    pub stream: bool,
    pub recorder: Option<Arc<Recorder>>,
    /// Resolve names of hosts in tests (loopback model servers).
    pub options: OpenOptions,
    opened: RefCell<BTreeMap<String, Rc<Adapter>>>,
    /// Completions each instance has already had in this task.
    pub completed: RefCell<BTreeMap<String, u32>>,
    /// The config files `default` was looked for in, for the error when it is missing.
    pub config_files: Vec<PathBuf>,
    /// `context.summariser`: the instance that summarises conversations grown past their
    /// window (default: the agent's own).
    pub summariser: Option<String>,
    /// `model_aliases` from the config.
    pub model_aliases: BTreeMap<String, String>,
}

impl SessionLlms {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        rt: Rc<Runtime>,
        instances: BTreeMap<String, AdapterInstance>,
        forced: Option<String>,
        default: Option<String>,
        events: SharedSink,
        stream: bool,
        recorder: Option<Arc<Recorder>>,
    ) -> Self {
        SessionLlms {
            rt,
            instances,
            forced,
            default,
            events,
            stream,
            recorder,
            options: OpenOptions::default(),
            opened: RefCell::new(BTreeMap::new()),
            completed: RefCell::new(BTreeMap::new()),
            config_files: Vec::new(),
            summariser: None,
            model_aliases: BTreeMap::new(),
        }
    }

    /// The instance name an agent's model comes from.
    pub fn instance_for(&self, agent: &Agent) -> Result<String, ModelError> {
        instance_name(agent, self.forced.as_deref(), self.default.as_deref()).ok_or_else(|| {
            let looked: Vec<String> = self
                .config_files
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            ModelError::NoAdapter {
                agent: agent.name.clone(),
                looked: if looked.is_empty() {
                    "no config file".to_string()
                } else {
                    looked.join(" and ")
                },
                available: self.available(),
            }
        })
    }

    /// The instance names, for an error.
    fn available(&self) -> String {
        self.instances
            .keys()
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Open (once) the instance called `name`.
    pub async fn open(&self, name: &str) -> Result<Rc<Adapter>, ModelError> {
        if let Some(a) = self.opened.borrow().get(name) {
            return Ok(a.clone());
        }
        let Some(instance) = self.instances.get(name).cloned() else {
            return Err(ModelError::NoInstance {
                name: name.to_string(),
                available: self.available(),
            });
        };
        let env = |k: &str| std::env::var(k).ok();
        let mut adapter = Adapter::open(&self.rt, instance, &env, self.options.clone())
            .await
            .map_err(|e| match e {
                OpenError::Load(source) => ModelError::Load {
                    name: name.to_string(),
                    source,
                },
                other => ModelError::Open(other),
            })?;
        if let Some(r) = &self.recorder {
            adapter.record_to(r.clone());
        }
        if let Some(n) = self.completed.borrow().get(name) {
            adapter.continue_from(*n);
        }
        let adapter = Rc::new(adapter);
        self.opened
            .borrow_mut()
            .insert(name.to_string(), adapter.clone());
        Ok(adapter)
    }

    /// Open every instance the given agents will use, so a missing key or a bad recording is
    /// reported before the task starts rather than in the middle of it.
    pub async fn open_all<'a>(
        &self,
        agents: impl Iterator<Item = &'a Agent>,
    ) -> Result<(), ModelError> {
        let mut names: Vec<String> = Vec::new();
        // An external agent needs a model only to read its report, when it names one.
        for a in agents.filter(|a| a.external.is_none() || a.model.adapter.is_some()) {
            let n = self.instance_for(a)?;
            if !names.contains(&n) {
                names.push(n);
            }
        }
        for n in names {
            self.open(&n).await?;
        }
        Ok(())
    }

    fn llm(&self, agent: &Agent, adapter: Rc<Adapter>) -> Rc<dyn Llm> {
        let model = agent.model.model.is_some().then(|| {
            agent_model(
                agent,
                adapter.instance(),
                self.forced.is_some(),
                &self.model_aliases,
            )
        });
        Rc::new(AdapterLlm {
            rt: self.rt.clone(),
            adapter,
            progress: Arc::new(TextToEvents {
                agent: agent.name.clone(),
                sink: self.events.clone(),
            }),
            stream: self.stream,
            model,
            max_tokens: agent.model.max_tokens,
            reasoning_effort: agent.model.reasoning_effort.map(|e| match e {
                rawko_agents::model::ReasoningEffort::Low => wire::ReasoningEffort::Low,
                rawko_agents::model::ReasoningEffort::Medium => wire::ReasoningEffort::Medium,
                rawko_agents::model::ReasoningEffort::High => wire::ReasoningEffort::High,
            }),
            thinking_budget: agent.model.thinking_budget,
        })
    }

    /// The model for the arbiter in `llm` mode.
    pub async fn arbiter(&self, name: &str) -> Result<Rc<dyn Llm>, ModelError> {
        let adapter = self.open(name).await?;
        Ok(Rc::new(AdapterLlm {
            rt: self.rt.clone(),
            adapter,
            progress: Arc::new(rawko_runtime::progress::NoProgress),
            stream: false,
            model: None,
            max_tokens: None,
            reasoning_effort: None,
            thinking_budget: None,
        }))
    }
}

impl LlmProvider for SessionLlms {
    fn llm_for<'a>(&'a self, agent: &'a Agent) -> LlmFor<'a> {
        Box::pin(async move {
            let name = self.instance_for(agent)?;
            let adapter = self.open(&name).await?;
            Ok(self.llm(agent, adapter))
        })
    }

    fn summariser(&self) -> Option<LlmFor<'_>> {
        let name = self.summariser.clone()?;
        Some(Box::pin(async move { Ok(self.arbiter(&name).await?) }))
    }
}
