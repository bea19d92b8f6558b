//! `rawko mcp serve`: rawko's sandboxed tools served to MCP clients.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Instant;

use clap::{Args, Subcommand};

use crate::cli::commands::agents::usable_agent;
use crate::cli::commands::run::open_store;
use crate::cli::commands::tool::session_tools;
use crate::cli::{BadInput, Context, print_err};
use rawko_adapters::Trust;
use rawko_fsm::session::SessionTools;
use rawko_fsm::tools::ToolHost;
use rawko_mcp::client::{Connection, Launch as McpLaunch, ServerSpec, Servers, Source};
use rawko_mcp::consent::{Consents, PrivateEndpoint};
use rawko_mcp::serve::{CallReply, CallRequest, HttpListener, HttpOptions, ServedTool, Server};
use rawko_runtime::Budget;
use rawko_store::{TaskStatus, TaskStore, ToolCall, now_ms};

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
        let trusted = cx.workspace_trust() == Trust::Trusted;
        let quiet = crate::cli::commands::run::OutputFlags {
            quiet: true,
            no_stream: true,
            ..Default::default()
        };
        Some(crate::cli::commands::run::Setup {
            max_steps: 1,
            timeline_hint: false,
            ..crate::cli::commands::run::Setup::new(cx, trusted, &quiet)?
        })
    };
    let names: Vec<String> = served.iter().map(|t| t.name.clone()).collect();

    let store = open_store(&cx.store_path())?;
    let task = store.create_task(
        &format!("MCP clients calling the {} agent's tools", agent.name),
        &agent.name,
        &serde_json::json!({ "mcp_serve": true, "agent": agent.name }),
    )?;
    // Never resumable: what is recorded here are calls, not a task to continue.
    store.finish_task(&task, TaskStatus::Done, "serving over MCP")?;
    let turn = store.start_turn(&task, &agent.name, None)?;

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
    state.store.end_turn(turn, "done", &summary, None)?;
    state.store.finish_task(&task, TaskStatus::Done, &summary)?;
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
    ask_setup: Option<crate::cli::commands::run::Setup>,
    agent: std::sync::Arc<rawko_agents::model::Agent>,
    store: TaskStore,
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
        if let Err(e) = self.store.record_tool_call(&row) {
            tracing::warn!("cannot record the MCP call to {}: {e}", req.tool);
        }
        for d in &outcome.decisions {
            if let Err(e) = self
                .store
                .record_decision(&self.task, &d.clone().in_turn(self.turn))
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
        let start = crate::cli::commands::run::Start::New {
            prompt: &query,
            agent: name,
            options: serde_json::json!({ "max_steps": 1, "start": name, "mcp_serve": true }),
        };
        let prepared = match setup.prepare(start, &self.store).await {
            Ok(p) => p,
            Err(e) => return error(format!("{e:#}")),
        };
        let task = prepared.task().to_string();
        if let Err(e) = prepared.drive(&self.store).await {
            return error(format!("{e:#}"));
        }
        // The answer is the agent's own finish, whatever the task did after it.
        let turns = self.store.turns(&task).unwrap_or_default();
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

/// The MCP servers in effect: the user's config, then, once the workspace is trusted, its
/// config and Claude Code's `.mcp.json` (a name the user's config defines stays the user's; an
/// entry of the user's without `command` or `url` adjusts the `.mcp.json` server of its name).
/// A server whose config is wrong is bad input.
pub(crate) fn configured_servers(cx: &Context) -> anyhow::Result<Vec<ServerSpec>> {
    let layers = cx.config_layers()?;
    let user = layers.user_only().mcp;
    let mut specs = Vec::new();
    let mut adjustments = std::collections::BTreeMap::new();
    for (name, cfg) in &user {
        if rawko_mcp::client::is_adjustment(name, cfg).map_err(|e| BadInput::new(e.to_string()))? {
            adjustments.insert(name.clone(), cfg.clone());
            continue;
        }
        specs.push(
            ServerSpec::from_config(name, cfg, Source::User)
                .map_err(|e| BadInput::new(e.to_string()))?,
        );
    }
    if let Some((_, ws)) = &layers.workspace {
        // What `effective` kept of the workspace's servers: only there when trusted.
        for (name, cfg) in &ws.mcp {
            specs.push(
                ServerSpec::from_config(name, cfg, Source::Workspace)
                    .map_err(|e| BadInput::new(e.to_string()))?,
            );
        }
    }
    let dot_mcp = cx.workspace().join(".mcp.json");
    if cx.workspace_trust() == Trust::Trusted && dot_mcp.is_file() {
        let text = rawko_capability::fs::read_regular(&dot_mcp, 1 << 20)
            .map_err(|e| BadInput::new(format!("{}: {e}", dot_mcp.display())))?;
        let text = String::from_utf8_lossy(&text);
        for (name, cfg) in
            rawko_mcp::client::from_mcp_json(&text).map_err(|e| BadInput::new(e.to_string()))?
        {
            if specs.iter().any(|s| s.name == name) {
                continue;
            }
            let cfg = match adjustments.get(&name) {
                Some(by) => rawko_mcp::client::adjusted(cfg, by),
                None => cfg,
            };
            specs.push(
                ServerSpec::from_config(&name, &cfg, Source::McpJson)
                    .map_err(|e| BadInput::new(e.to_string()))?,
            );
        }
    } else if dot_mcp.is_file() {
        tracing::info!(".mcp.json is ignored until you trust the workspace (`rawko trust`)");
    }
    Ok(specs)
}

/// Start and connect the servers in `specs` and keep those the user approved: approved before
/// as they are now, approved here with `yes`, or on a terminal when asked. The others are left
/// out with a warning saying why.
pub(crate) async fn connect_servers(
    cx: &Context,
    specs: &[ServerSpec],
    yes: bool,
) -> anyhow::Result<Servers> {
    if specs.is_empty() {
        return Ok(Servers::default());
    }
    let launch = McpLaunch {
        launcher: std::env::current_exe()
            .map_err(|e| anyhow::anyhow!("cannot find the rawko binary to run the sandbox: {e}"))?,
        unconfined: cx.no_sandbox,
        workspace: cx.workspace().to_path_buf(),
        path_dirs: rawko_shell::Resolver::from_env(&[cx.workspace()])
            .path_dirs()
            .to_vec(),
    };
    if cx.no_sandbox {
        print_err(
            "warning: --no-sandbox: MCP servers run without the kernel sandbox; they can read \
             your home directory, use the network and write anywhere you can",
        )?;
    }
    let mut consents = Consents::load(&cx.dirs.data).map_err(|e| BadInput::new(e.to_string()))?;
    // Servers on loopback or private addresses are decided on before anything reaches them.
    let mut reachable = Vec::new();
    let mut left_out = Vec::new();
    for spec in specs {
        let mut spec = spec.clone();
        if let Some(endpoint) = spec.private_endpoint().await {
            match decide_private(cx, &spec, &endpoint, &consents, yes)? {
                Ok(admitted) => spec.admit(admitted),
                Err(why) => {
                    left_out.push((spec.name.clone(), why));
                    continue;
                }
            }
        }
        reachable.push(spec);
    }
    let note = crate::cli::output::SlowNote::after_a_second("starting the MCP servers…");
    let mut servers = Servers::connect(&reachable, &launch).await;
    drop(note);
    servers.failed.extend(left_out);
    let mut refused = Vec::new();
    for c in &servers.connected {
        let fp = c.fingerprint();
        let private = c.spec.admitted.as_ref();
        if consents.given(&c.spec.name, &fp) {
            // Approved before; an address decided on just now is kept with it.
            if private.is_some() && consents.private(&c.spec.name) != private {
                consents
                    .give(&c.spec.name, &fp, private)
                    .map_err(|e| anyhow::anyhow!(e.to_string()))?;
            }
            continue;
        }
        let changed = consents.changed(&c.spec.name, &fp);
        if yes || ask(c, changed)? {
            consents
                .give(&c.spec.name, &fp, private)
                .map_err(|e| anyhow::anyhow!(e.to_string()))?;
        } else {
            refused.push((
                c.spec.name.clone(),
                format!(
                    "{} and not approved: approve it on a terminal, or with --yes",
                    if changed {
                        "changed since you approved it"
                    } else {
                        "new"
                    }
                ),
            ));
        }
    }
    for (name, why) in refused {
        servers.drop_server(&name, why).await;
    }
    for (name, why) in &servers.failed {
        print_err(&format!(
            "warning: MCP server `{}` left out: {}",
            rawko_text::line(name, 64),
            rawko_text::block(why, 2_000)
        ))?;
    }
    Ok(servers)
}

/// Whether server `spec`, whose URL leads to the loopback or private `endpoint` alone, may be
/// reached there: `Ok(endpoint admitted)`, or `Err(why not, and what to do)`. The user's own
/// servers say so in the user's config; a server a trusted workspace brings is reached where
/// the user's consent admitted it before, or is asked about (on a terminal; `--yes` approves),
/// the answer kept with the consent to its tools.
fn decide_private(
    cx: &Context,
    spec: &ServerSpec,
    endpoint: &PrivateEndpoint,
    consents: &Consents,
    yes: bool,
) -> anyhow::Result<Result<PrivateEndpoint, String>> {
    let name = rawko_text::line(&spec.name, 64);
    let url = rawko_text::line(&endpoint.url, 200);
    let where_ = endpoint.describe();
    let user_config = cx.dirs.config.join(rawko_config::FILE_NAME);
    let snippet = format!("  mcp:\n    {name}:\n      allow_private_network: true");
    let reached_only = format!("{url} is {where_}, which rawko reaches only when you say so");
    if spec.source == Source::User {
        return Ok(Err(format!(
            "{reached_only}: add `allow_private_network: true` to it in your config, {}:\n{snippet}",
            user_config.display()
        )));
    }
    if let Some(before) = consents.private(&spec.name)
        && before.covers(endpoint)
    {
        return Ok(Ok(before.clone()));
    }
    let from = match spec.source {
        Source::McpJson => "the workspace's .mcp.json",
        _ => "the workspace's .rawko/config.yaml",
    };
    if yes {
        print_err(&format!(
            "MCP server `{name}`: {reached_only}; it comes from {from}, and --yes approves it \
             there (remembered with your consent, until its address changes)"
        ))?;
        return Ok(Ok(endpoint.clone()));
    }
    if ask_private(&format!("MCP server `{name}`: {reached_only}"), from)? {
        return Ok(Ok(endpoint.clone()));
    }
    let instead = match spec.source {
        Source::McpJson => format!(
            "or allow it for good in your config, {}:\n{snippet}",
            user_config.display()
        ),
        _ => format!(
            "or add `allow_private_network: true` to it in {}",
            cx.workspace()
                .join(".rawko")
                .join(rawko_config::FILE_NAME)
                .display()
        ),
    };
    Ok(Err(format!(
        "{reached_only}, and it comes from {from}: approve it on a terminal or with --yes \
         (remembered with your consent, until its address changes), {instead}"
    )))
}

/// Ask on the terminal whether to reach a server at a loopback or private address
/// (`question` says which); `false` without a terminal.
fn ask_private(question: &str, from: &str) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "{question}; it comes from {from}. Reach it there, to see its tools? [y/N] "
    )?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Ask on the terminal whether to use server `c`, showing what it is, where (when that is a
/// loopback or private address) and its tools; `false` without a terminal.
fn ask(c: &Connection, changed: bool) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    let mut err = std::io::stderr().lock();
    let at = c
        .spec
        .admitted
        .as_ref()
        .map(|p| format!(", {}", p.describe()))
        .unwrap_or_default();
    writeln!(
        err,
        "MCP server `{}` ({}{at}) {} {} tool(s):",
        rawko_text::line(&c.spec.name, 64),
        rawko_text::line(&c.spec.identity(), 200),
        if changed {
            "has changed since you approved it; it now offers"
        } else {
            "is new; it offers"
        },
        c.tools.len()
    )?;
    for t in &c.tools {
        writeln!(
            err,
            "  {}  {}",
            t.name,
            rawko_text::line(t.description.lines().next().unwrap_or(""), 100)
        )?;
    }
    write!(err, "Let agents use it? [y/N] ")?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}
