//! An agent step driven by a scripted model that answers from memory, timed without the
//! model's own time: shared by the `run` and `table` benchmarks.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rawko_agents::model::Agent;
use rawko_agents::{AgentOrigin, FileInfo, load_text};
use rawko_config::ArbiterMode;
use rawko_fsm::arbiter::Arbiter;
use rawko_fsm::conversation::{Content, Message, Role, StopReason, ToolCall};
use rawko_fsm::events::{EventSink, RunEvent};
use rawko_fsm::llm::{Completion, CompletionRequest, Llm, LlmFuture};
use rawko_fsm::tools::{ToolFuture, ToolHost, ToolOutcome};
use rawko_fsm::{AgentLookup, CancelFlag, Engine, LlmFor, LlmProvider, StateLimits};
use rawko_store::{AnyStore, TaskStatus, TaskStore, Usage};

/// Steps per task in a full run.
pub const STEPS: usize = 1000;

fn agent(steps: usize) -> Arc<Agent> {
    let yaml = format!(
        "name: worker\nwhenToUse: Works.\nsystemPrompt: You work.\ntools:\n  allowed: [LS]\n\
         transitions:\n  onSuccess: done\n  onFailure: failed\nlimits:\n  maxIterations: {}\n",
        steps + 10
    );
    let loaded = load_text(
        &yaml,
        FileInfo {
            path: Path::new("worker.yaml"),
            display: "worker.yaml",
            origin: AgentOrigin::File,
        },
    );
    loaded.agent.expect("a valid agent")
}

struct Lookup(HashMap<String, Arc<Agent>>);

impl AgentLookup for Lookup {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.0.get(name).cloned()
    }
}

/// Calls `LS` `steps` times, then `finish`; counts its own time.
struct Model {
    steps: usize,
    calls: Cell<usize>,
    spent: RefCell<Vec<Duration>>,
}

impl Llm for Model {
    fn adapter(&self) -> &str {
        "scripted"
    }
    fn model(&self) -> &str {
        "scripted"
    }
    fn complete<'a>(&'a self, _request: CompletionRequest<'a>) -> LlmFuture<'a> {
        let started = Instant::now();
        let n = self.calls.get();
        self.calls.set(n + 1);
        let (name, arguments) = if n < self.steps {
            ("LS", "{}".to_string())
        } else {
            (
                "finish",
                r#"{"status":"success","summary":"done"}"#.to_string(),
            )
        };
        let message = Message {
            role: Role::Assistant,
            content: vec![Content::ToolCall(ToolCall {
                id: format!("c{n}"),
                name: name.into(),
                arguments,
            })],
        };
        self.spent.borrow_mut().push(started.elapsed());
        Box::pin(async move {
            Ok(Completion {
                message,
                stop_reason: StopReason::ToolUse,
                usage: Usage {
                    input_tokens: 100,
                    output_tokens: 10,
                    ..Usage::default()
                },
                model: "scripted".into(),
            })
        })
    }
}

struct Provider(Rc<Model>);

impl LlmProvider for Provider {
    fn llm_for<'a>(&'a self, _agent: &'a Agent) -> LlmFor<'a> {
        let llm: Rc<dyn Llm> = self.0.clone();
        Box::pin(async move { Ok(llm) })
    }
}

/// An `LS` that answers from memory: the engine and the store alone.
#[allow(dead_code)] // the table benchmark uses only the real tools
pub struct MemoryTools;

impl ToolHost for MemoryTools {
    fn specs(&self, _agent: &Agent) -> Vec<rawko_fsm::llm::ToolSpec> {
        vec![rawko_fsm::llm::ToolSpec {
            name: "LS".into(),
            description: "List a directory".into(),
            input_schema: serde_json::json!({"type": "object"}),
        }]
    }
    fn call<'a>(&'a self, _agent: &'a Agent, _name: &'a str, _input: &'a str) -> ToolFuture<'a> {
        Box::pin(async {
            ToolOutcome {
                output: "Cargo.toml\nsrc/\n".into(),
                is_error: false,
                verdict: "allowed".into(),
                decisions: Vec::new(),
            }
        })
    }
}

/// When each model call started.
#[derive(Default)]
struct Clock(Mutex<Vec<Instant>>);

impl EventSink for Clock {
    fn emit(&self, event: &RunEvent) {
        if let RunEvent::Thinking { .. } = event {
            self.0.lock().unwrap().push(Instant::now());
        }
    }
}

/// Run a task of `steps` tool calls and return each step's host time.
pub async fn steps(tools: &dyn ToolHost, dir: &Path, steps: usize) -> Vec<Duration> {
    let store = AnyStore::Sqlite(TaskStore::open(&dir.join("state.db")).unwrap());
    steps_in(tools, &store, steps).await
}

/// The same, in `store` (of either backend).
pub async fn steps_in(tools: &dyn ToolHost, store: &AnyStore, steps: usize) -> Vec<Duration> {
    let worker = agent(steps);
    let agents = Lookup(HashMap::from([(worker.name.clone(), worker)]));
    let model = Rc::new(Model {
        steps,
        calls: Cell::new(0),
        spent: RefCell::new(Vec::new()),
    });
    let provider = Provider(model.clone());
    let clock = Clock::default();
    let engine = Engine {
        store,
        agents: &agents,
        llms: &provider,
        tools,
        externals: &rawko_fsm::NoExternalAgents,
        arbiter: Arbiter {
            mode: ArbiterMode::Fixed,
            max_failures: 3,
            llm: None,
        },
        events: &clock,
        cancel: CancelFlag::default(),
        defaults: StateLimits {
            max_iterations: 20,
            timeout: Duration::from_secs(3600),
        },
        max_steps: 10,
        workspace_trust: rawko_config::Trust::Trusted,
        context_threshold: rawko_fsm::context::DEFAULT_THRESHOLD,
        max_task_tokens: None,
        traces: None,
        pause_after: None,
        checkpoint: None,
    };
    let id = store
        .create_task("benchmark", "worker", &serde_json::json!({}))
        .await
        .unwrap();
    // Held as `rawko run` holds it: every write checks the lease is still this runner's.
    store.acquire_lease(&id).await.unwrap().unwrap();
    let end = engine.run(&id).await.unwrap();
    assert_eq!(end.status, TaskStatus::Done, "{end:?}");
    let marks = clock.0.lock().unwrap().clone();
    let spent = model.spent.borrow();
    marks
        .windows(2)
        .zip(spent.iter())
        .map(|(w, model)| (w[1] - w[0]).saturating_sub(*model))
        .collect()
}
