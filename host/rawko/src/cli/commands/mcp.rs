//! `rawko mcp serve`: rawko's sandboxed tools served to MCP clients.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use clap::{Args, Subcommand};

use crate::cli::lookup::usable_agent;
use crate::cli::offered::session_tools;
use crate::cli::setup::{OutputFlags, Setup, Start, drive};
use crate::cli::{BadInput, Context};
use rawko_fsm::tools::ToolHost;
use rawko_mcp::serve::{CallReply, CallRequest, HttpListener, HttpOptions, ServedTool, Server};
use rawko_runtime::Budget;
use rawko_session::SessionTools;
use rawko_store::{AnyStore, TaskStatus, ToolCall, now_ms};

/// The variable `--http` reads its bearer token from.
const TOKEN_ENV: &str = "RAWKO_MCP_TOKEN";

/// Use rawko over the Model Context Protocol
#[derive(Debug, Args)]
pub struct McpCmd {
    #[command(subcommand)]
    action: McpAction,
}

#[derive(Debug, Subcommand)]
enum McpAction {
    /// Serve the tools an agent may call to an MCP client, each call sandboxed as in a task
    #[command(after_help = "Examples:\n  \
        rawko mcp serve                          # stdio, the planner's read-only tools\n  \
        rawko mcp serve --agent developer        # its tools, Bash in the kernel sandbox\n  \
        rawko mcp serve --http 127.0.0.1:8765    # streamable HTTP at http://127.0.0.1:8765/mcp\n  \
        rawko mcp serve --agents reviewer        # also ask the reviewer: a query in, its answer out\n\n\
        Each call runs exactly as the agent's would in a task: a fresh sandboxed instance with \
        the agent's grants, its bash filters, and the kernel sandbox for native commands. The \
        calls are recorded in the workspace's task store (`rawko tasks show ID`).\n\n\
        Over HTTP, set RAWKO_MCP_TOKEN to require `Authorization: Bearer <token>`; it is \
        required for any address that is not loopback.")]
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
struct ServeArgs {
    /// Serve the tools this agent may call, with its capabilities
    #[arg(long, value_name = "NAME", default_value = "planner")]
    agent: String,
    /// Serve streamable HTTP on this address instead of stdio (loopback unless a token is set
    /// in RAWKO_MCP_TOKEN)
    #[arg(long, value_name = "ADDR")]
    http: Option<SocketAddr>,
    /// Also serve these agents as tools: a query in, the agent's answer out (the agent works
    /// with its own adapter, tools and sandbox, as the first state of a task of its own)
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    agents: Vec<String>,
}

impl McpCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            McpAction::Serve(args) => serve(cx, args).await,
        }
    }
}

async fn serve(cx: &Context, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let token = std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty());
    if let Some(addr) = args.http
        && !addr.ip().is_loopback()
        && token.is_none()
    {
        return Err(BadInput::new(format!(
            "--http {addr} is not a loopback address: set {TOKEN_ENV} to the bearer token \
             clients must send"
        ))
        .into());
    }
    let agent = usable_agent(cx, &args.agent)?;
    let tools = session_tools(cx, &[], Budget::default()).await?;
    let served: Vec<ServedTool> = tools
        .specs(&agent)
        .into_iter()
        .filter(|s| agent.may_call(&s.name))
        .map(|s| ServedTool {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
        })
        .collect();
    let mut served = served;
    let mut agent_tools = Vec::new();
    for name in &args.agents {
        let a = usable_agent(cx, name)?;
        if served.iter().any(|t| t.name == a.name) {
            return Err(BadInput::new(format!(
                "agent `{}` has the name of a tool served already",
                a.name
            ))
            .into());
        }
        served.push(ServedTool {
            name: a.name.clone(),
            description: format!(
                "Ask rawko's {} agent: {}",
                a.name,
                a.when_to_use
                    .clone()
                    .or_else(|| a.description.clone())
                    .unwrap_or_else(|| "it works on the query and answers".into())
            ),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {"query": {"type": "string", "description": "What to ask the agent", "minLength": 1}},
                "required": ["query"],
                "additionalProperties": false
            }),
        });
        agent_tools.push(a.name.clone());
    }
    let ask_setup = if agent_tools.is_empty() {
        None
    } else {
        let trust = cx.workspace_trust();
        let quiet = OutputFlags {
            quiet: true,
            no_stream: true,
            ..Default::default()
        };
        let mut setup = Setup::new(cx, trust, &quiet)?;
        setup.run.max_steps = 1;
        setup.timeline_hint = false;
        Some(setup)
    };
    let names: Vec<String> = served.iter().map(|t| t.name.clone()).collect();

    let store = cx.open_store().await?;
    // The calls' task belongs to this workspace, as a run's does (a server store holds many).
    store.set_workspace(rawko_session::run::workspace_id(cx.workspace()));
    let task = store
        .create_task(
            &format!("MCP clients calling the {} agent's tools", agent.name),
            &agent.name,
            &serde_json::json!({ "mcp_serve": true, "agent": agent.name }),
        )
        .await?;
    // Never resumable: what is recorded here are calls, not a task to continue.
    store
        .finish_task(&task, TaskStatus::Done, "serving over MCP")
        .await?;
    let turn = store.start_turn(&task, &agent.name, None).await?;

    let (calls_tx, mut calls) = tokio::sync::mpsc::channel::<CallRequest>(64);
    let server = Server::new(
        served,
        calls_tx,
        &format!(
            "rawko's sandboxed tools, as its {} agent may call them, in the workspace {}.",
            agent.name,
            cx.workspace().display()
        ),
    );
    let serving = match args.http {
        Some(addr) => {
            let listener = HttpListener::bind(HttpOptions {
                addr,
                token: token.clone(),
            })
            .await
            .map_err(|e| BadInput::new(e.to_string()))?;
            eprintln!(
                "rawko: serving {} tool(s) of the {} agent ({}) at http://{}/mcp{}; audit: rawko tasks show {task}",
                names.len(),
                agent.name,
                names.join(", "),
                listener.local_addr(),
                if token.is_some() {
                    ", bearer token required"
                } else {
                    ""
                }
            );
            tokio::spawn(listener.serve(server))
        }
        None => {
            tracing::info!(
                "serving {} tool(s) of the {} agent on stdio",
                names.len(),
                agent.name
            );
            tokio::spawn(rawko_mcp::serve::serve_stdio(server))
        }
    };

    let state = Rc::new(Served {
        tools,
        agent_tools,
        ask_setup,
        agent,
        store,
        task: task.clone(),
        turn,
        next: std::cell::Cell::new(0),
    });
    let local = tokio::task::LocalSet::new();
    let served = local
        .run_until(async {
            loop {
                tokio::select! {
                    req = calls.recv() => match req {
                        Some(req) => {
                            tokio::task::spawn_local(state.clone().call(req));
                        }
                        None => break,
                    },
                    _ = tokio::signal::ctrl_c() => break,
                }
            }
        })
        .await;
    let () = served;
    let calls_made = state.next.get();
    let summary = format!("served {calls_made} call(s) over MCP");
    state.store.end_turn(turn, "done", &summary, None).await?;
    state
        .store
        .finish_task(&task, TaskStatus::Done, &summary)
        .await?;
    serving.abort();
    match serving.await {
        Ok(Err(e)) => Err(anyhow::anyhow!(e)),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// What the served calls share: the agent's tools and the store that records them.
struct Served {
    tools: SessionTools,
    /// Agents served as tools, and how their tasks are set up.
    agent_tools: Vec<String>,
    ask_setup: Option<Setup>,
    agent: std::sync::Arc<rawko_agents::model::Agent>,
    store: AnyStore,
    task: String,
    turn: i64,
    next: std::cell::Cell<u64>,
}

impl Served {
    /// Run one call as the agent would, record it, and answer it.
    async fn call(self: Rc<Self>, req: CallRequest) {
        let n = self.next.get() + 1;
        self.next.set(n);
        let started = Instant::now();
        if self.agent_tools.contains(&req.tool) {
            let reply = self.ask(&req.tool, &req.input).await;
            let _ = req.reply.send(reply);
            return;
        }
        let outcome = self.tools.run(&self.agent, &req.tool, &req.input).await;
        let row = ToolCall {
            turn_id: self.turn,
            call_id: format!("mcp-{n}"),
            tool: req.tool.clone(),
            input: req.input.clone(),
            output: outcome.output.clone(),
            is_error: outcome.is_error,
            verdict: outcome.verdict.clone(),
            duration_us: started.elapsed().as_micros() as i64,
            at: now_ms(),
        };
        if let Err(e) = self.store.record_tool_call(&row).await {
            tracing::warn!("cannot record the MCP call to {}: {e}", req.tool);
        }
        for d in &outcome.decisions {
            if let Err(e) = self
                .store
                .record_decision(&self.task, &d.clone().in_turn(self.turn))
                .await
            {
                tracing::warn!("cannot record a decision of the MCP call: {e}");
            }
        }
        let _ = req.reply.send(CallReply {
            output: outcome.output,
            is_error: outcome.is_error,
        });
    }

    /// Ask agent `name` the query in `input`: a task of its own, in the store like any other,
    /// that ends with the agent's own answer (its first state only).
    async fn ask(&self, name: &str, input: &str) -> CallReply {
        let error = |output: String| CallReply {
            output,
            is_error: true,
        };
        let query = match serde_json::from_str::<serde_json::Value>(input) {
            Ok(v) => match v.get("query").and_then(|q| q.as_str()) {
                Some(q) if !q.trim().is_empty() => q.to_string(),
                _ => return error("invalid input: `query` must be a non-empty string".into()),
            },
            Err(e) => return error(format!("invalid input: not JSON: {e}")),
        };
        let Some(setup) = self.ask_setup.clone() else {
            return error(format!("agent `{name}` is not served"));
        };
        let start = Start::New {
            prompt: &query,
            agent: name,
            options: serde_json::json!({ "max_steps": 1, "start": name, "mcp_serve": true }),
        };
        let prepared = match setup.prepare(start, &self.store).await {
            Ok(p) => p,
            Err(e) => return error(format!("{e:#}")),
        };
        let task = prepared.task().to_string();
        if let Err(e) = drive(prepared, &self.store).await {
            return error(format!("{e:#}"));
        }
        // The answer is the agent's own finish, whatever the task did after it.
        let turns = self.store.turns(&task).await.unwrap_or_default();
        match turns
            .iter()
            .find(|t| t.agent == name && t.parent_id.is_none())
        {
            Some(t) => CallReply {
                output: format!(
                    "{}\n[rawko task {task}]",
                    t.summary.clone().unwrap_or_default()
                ),
                is_error: t.outcome.as_deref() != Some("succeeded"),
            },
            None => error(format!("agent `{name}` did not answer (rawko task {task})")),
        }
    }
}
