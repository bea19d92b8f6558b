//! `rawko tool call`: call one tool exactly as an agent would, sandbox and all.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::cli::{BadInput, Context, Printer, print_err, print_json, print_out};
use rawko_runtime::Budget;
use rawko_runtime::tool::CallContext;
use rawko_toolset::bash::BashContext;
use rawko_toolset::{HostCallContext, Provider};

use crate::cli::lookup::usable_agent;
use crate::cli::offered::{session_tools, tool_set};
use crate::cli::policy::{PolicyFlags, ShellSetup, grants_from};
use crate::cli::servers::{configured_servers, connect_servers};
use rawko_fsm::tools::{ToolHost, ToolOutcome};
use std::rc::Rc;

/// Call a tool directly
#[derive(Debug, Args)]
pub struct ToolCmd {
    #[command(subcommand)]
    action: ToolAction,
}

#[derive(Debug, Subcommand)]
enum ToolAction {
    /// Call one tool in its sandbox with explicit grants, and print its result
    #[command(after_help = "Examples:\n  \
        rawko tool call Read --read . --input '{\"path\": \"README.md\", \"limit\": 5}'\n  \
        rawko tool call Write --write out --input '{\"path\": \"out/hello.txt\", \"content\": \"hi\"}'\n  \
        rawko tool call Bash --read . --allow 'git *' --input '{\"command\": \"git status\"}'\n\n\
        The tool sees only the directories granted with --read and --write; everything else \
        does not exist inside its sandbox. Bash commands must also be allowed by --allow \
        patterns and pass the bash filters configured in config.yaml.")]
    Call(CallArgs),
}

#[derive(Debug, Args)]
struct CallArgs {
    /// The tool to call (see `rawko tools list`)
    tool: String,
    /// The tool's input, a JSON object
    #[arg(long, value_name = "JSON")]
    input: String,
    /// Grant read-only access to a directory (relative to the workspace); repeatable
    #[arg(long = "read", value_name = "DIR")]
    read: Vec<PathBuf>,
    /// Grant read-write access to a directory (relative to the workspace); repeatable
    #[arg(long = "write", value_name = "DIR")]
    write: Vec<PathBuf>,
    /// Wall-clock limit for the call, in seconds
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    timeout: f64,
    /// Memory limit for the call, in MiB
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    memory: u64,
    /// Largest result accepted from the call, in bytes
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    max_output: u64,
    /// Also load this tool plugin (.wasm), e.g. one you are developing; its tools come after the
    /// built-in ones
    #[arg(long, value_name = "FILE")]
    plugin: Vec<PathBuf>,
    /// Print the result as JSON: {"ok", "tool", "plugin", "output" | "error", "duration_ms"}
    #[arg(long)]
    json: bool,
    /// Approve the MCP server of an `mcp__<server>__<tool>` call if it is new or changed (on a
    /// terminal you are asked instead)
    #[arg(long)]
    yes: bool,
    #[command(flatten)]
    policy: PolicyFlags,
    /// Call the tool exactly as this agent would in a run: its tools, its bash policy, the
    /// workspace read-write only if the agent may write (replaces --read, --write, --allow,
    /// --block)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["read", "write", "allow", "block"])]
    agent: Option<String>,
}

impl CallArgs {
    /// The call's budgets from `--timeout`, `--memory` and `--max-output`.
    fn budget(&self) -> Budget {
        Budget {
            timeout: Duration::from_secs_f64(self.timeout),
            memory: self.memory.saturating_mul(1 << 20),
            output: self.max_output,
        }
    }
}

impl ToolCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            ToolAction::Call(args) => call(cx, args).await,
        }
    }
}

async fn call(cx: &Context, args: CallArgs) -> anyhow::Result<ExitCode> {
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 86_400.0) {
        return Err(BadInput::new("--timeout must be between 0 and 86400 seconds").into());
    }
    if let Some(name) = &args.agent {
        return call_as_agent(cx, &args, name).await;
    }
    if args.tool.starts_with(rawko_mcp::client::PREFIX) {
        return call_mcp(cx, &args).await;
    }
    let grants = grants_from(cx, &args.read, &args.write)?;
    let budget = args.budget();

    let rt = cx.runtime()?;
    let set = tool_set(cx, &rt, &args.plugin).await?;
    let Some((provider, _)) = set.find(&args.tool) else {
        return Err(BadInput::new(format!(
            "no tool named `{}` (available: {})",
            args.tool,
            set.names().join(", ")
        ))
        .into());
    };

    let started = std::time::Instant::now();
    // A plugin's result is printed as the plugin hands it over, unless it is to be JSON.
    let mut printer = None;
    let result = match provider {
        Provider::Plugin(plugin) => {
            let call_cx = CallContext {
                workspace: cx.workspace(),
                grants: &grants,
                budget,
            };
            if args.json {
                plugin.call(&rt, &args.tool, &args.input, &call_cx).await
            } else {
                let p = printer.insert(Printer::start()?);
                let sink = p.sink();
                plugin
                    .call_streaming(&rt, &args.tool, &args.input, &call_cx, sink)
                    .await
            }
        }
        Provider::Host(tool) => {
            let shell = match tool.runs_commands() {
                true => Some((
                    ShellSetup::new(cx, &rt, &grants, &args.policy).await?,
                    cx.launch()?,
                )),
                false => None,
            };
            let identity = std::cell::OnceCell::new();
            let mut call_cx = HostCallContext::new(cx.workspace(), &grants, &identity);
            if let Some((shell, launch)) = &shell {
                call_cx = call_cx.with_shell(BashContext {
                    rt: &rt,
                    chain: &shell.chain,
                    policy: &shell.policy,
                    resolver: &shell.resolver,
                    launch,
                });
            }
            tool.call(&call_cx, &args.input).await
        }
    };
    match result {
        Ok(out) => {
            if args.json {
                print_json(&serde_json::json!({
                    "ok": true,
                    "tool": args.tool,
                    "plugin": provider.name(),
                    "output": out.content,
                    "duration_ms": out.duration.as_secs_f64() * 1000.0,
                }))?;
            } else if let Some(printer) = printer {
                printer.finish(out.content)?;
            } else {
                print_out(&out.content)?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let printed = match printer {
                Some(printer) => printer.finish(String::new())?,
                None => 0,
            };
            if args.json {
                print_json(&serde_json::json!({
                    "ok": false,
                    "tool": args.tool,
                    "plugin": provider.name(),
                    "error": { "code": e.code(), "message": e.to_string() },
                    "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
                }))?;
            } else {
                let mut message = format!("error: {e}");
                if args.read.is_empty()
                    && args.write.is_empty()
                    && message.contains("no filesystem access")
                {
                    message.push_str(
                        "\n  hint: a call gets only the directories you grant: --read DIR, \
                         --write DIR, or --agent NAME to call it as that agent would",
                    );
                }
                if printed > 0 {
                    message.push_str(&format!(
                        "\n  note: the {printed} bytes printed above are only the start of the \
                         tool's output: the call failed after handing them over"
                    ));
                }
                print_err(&message)?;
            }
            Ok(ExitCode::from(if e.is_bad_input() { 2 } else { 1 }))
        }
    }
}

/// The configured MCP server `tool` (`mcp__<server>__<tool>`) belongs to; none is bad input.
fn servers_named_in(
    cx: &Context,
    tool: &str,
) -> anyhow::Result<Vec<rawko_mcp::client::ServerSpec>> {
    let rest = &tool[rawko_mcp::client::PREFIX.len()..];
    let server = rest.split("__").next().unwrap_or("");
    let specs = configured_servers(cx)?;
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let found: Vec<_> = specs.iter().filter(|s| s.name == server).cloned().collect();
    if found.is_empty() {
        return Err(BadInput::new(format!(
            "no MCP server named `{}` is configured ({}); see `mcp:` in config.yaml, or a trusted workspace's .mcp.json",
            rawko_text::line(server, 64),
            if names.is_empty() {
                "none are".to_string()
            } else {
                format!("configured: {}", names.join(", "))
            }
        ))
        .into());
    }
    Ok(found)
}

/// `tool call mcp__<server>__<tool>` with no agent: the server started (in its sandbox) and
/// approved, the call made, within `--timeout` and the server's own timeout.
async fn call_mcp(cx: &Context, args: &CallArgs) -> anyhow::Result<ExitCode> {
    let specs = servers_named_in(cx, &args.tool)?;
    let servers = connect_servers(cx, &specs, args.yes).await?;
    let Some((conn, _)) = servers.find(&args.tool) else {
        let offered: Vec<&str> = servers.tools().map(|(_, t)| t.name.as_str()).collect();
        let why = if servers.connected.is_empty() {
            "the server is not available (see the warning above)".to_string()
        } else {
            format!("it offers: {}", offered.join(", "))
        };
        servers.close().await;
        return Err(BadInput::new(format!(
            "no MCP tool named `{}`: {why}",
            rawko_text::line(&args.tool, 128)
        ))
        .into());
    };
    let started = std::time::Instant::now();
    let timeout = Duration::from_secs_f64(args.timeout).min(conn.spec.timeout);
    let result = conn.call(&args.tool, &args.input, Some(timeout)).await;
    let plugin = format!("mcp:{}", conn.spec.name);
    let code = match result {
        Ok((text, is_error)) => {
            if args.json {
                let mut v = serde_json::json!({
                    "ok": !is_error,
                    "tool": args.tool,
                    "plugin": plugin,
                    "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
                });
                v[if is_error { "error" } else { "output" }] = text.into();
                print_json(&v)?;
            } else if is_error {
                print_err(&format!("error: {text}"))?;
            } else {
                print_out(&text)?;
            }
            if is_error { 1 } else { 0 }
        }
        Err(e) => {
            let bad = matches!(e, rawko_mcp::client::McpError::BadInput(_));
            if args.json {
                print_json(&serde_json::json!({
                    "ok": false,
                    "tool": args.tool,
                    "plugin": plugin,
                    "error": { "message": e.to_string() },
                    "duration_ms": started.elapsed().as_secs_f64() * 1000.0,
                }))?;
            } else {
                print_err(&format!("error: {e}"))?;
            }
            if bad { 2 } else { 1 }
        }
    };
    servers.close().await;
    Ok(ExitCode::from(code))
}

/// `tool call --agent`: the tool as a run would call it for that agent.
async fn call_as_agent(cx: &Context, args: &CallArgs, name: &str) -> anyhow::Result<ExitCode> {
    let agent = usable_agent(cx, name)?;
    let mut tools = session_tools(cx, &args.plugin, args.budget()).await?;
    if args.tool.starts_with(rawko_mcp::client::PREFIX) {
        let specs = servers_named_in(cx, &args.tool)?;
        let servers = connect_servers(cx, &specs, args.yes).await?;
        tools = tools.with_mcp(Rc::new(servers));
    }
    let offered = tools.specs(&agent).iter().any(|s| s.name == args.tool);
    let outcome = if !offered || !agent.may_call(&args.tool) {
        let mut why = format!(
            "tool `{}` is not available to the {} agent",
            args.tool, agent.name
        );
        if let Some(more) = tools.withheld(&agent, &args.tool) {
            why.push_str(": ");
            why.push_str(&more);
        }
        ToolOutcome {
            output: why,
            is_error: true,
            verdict: "denied: not allowed".into(),
            decisions: Vec::new(),
        }
    } else {
        tools.run(&agent, &args.tool, &args.input).await
    };
    if args.json {
        print_json(&serde_json::json!({
            "ok": !outcome.is_error,
            "tool": args.tool,
            "agent": agent.name,
            "verdict": outcome.verdict,
            "output": outcome.output,
            "decisions": outcome.decisions,
        }))?;
    } else if outcome.is_error {
        print_err(&format!("error: {}", outcome.output))?;
    } else {
        print_out(&outcome.output)?;
    }
    Ok(if outcome.is_error {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
