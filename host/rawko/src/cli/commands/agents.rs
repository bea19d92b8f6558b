//! `rawko agents`: the loaded agents, one agent in full, validation, a live view of reloads,
//! and the agents' transition graph.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use crate::cli::lookup::{search_path, unknown_agent};
use crate::cli::offered::offered_tools;
use crate::cli::{BadInput, Context, Table, print_json, print_out};
use rawko_adapters::Trust;
use rawko_agents::diag::printable;
use rawko_agents::graph::Graph;
use rawko_agents::registry::{Entry, Registry, SearchPath, discover};
use rawko_agents::watch::{ChangeKind, Report, Watcher};
use rawko_agents::{Agent, AgentOrigin, Diagnostic, Severity, load_file};
use rawko_config::ArbiterMode;
use rawko_sandbox::Mode;
use rawko_session::{agent_model, instance_name};

/// Inspect, validate and watch agent definitions
#[derive(Debug, Args)]
#[command(
    after_help = "Agents are loaded from, highest precedence first: the workspace's \
.rawko/agents/, $XDG_CONFIG_HOME/rawko/agents, and the built-in agents. Files may be rawko YAML \
or Markdown, kodelet or Claude Code subagent Markdown, or DocLoom agent.agent.yaml folders."
)]
pub struct AgentsCmd {
    #[command(subcommand)]
    action: AgentsAction,
}

#[derive(Debug, Subcommand)]
enum AgentsAction {
    /// List the agents in effect (-v: also the definitions each one shadows)
    List(ListArgs),
    /// Show one agent in full: where it comes from, its model, tools, transitions and prompt
    Show(ShowArgs),
    /// Check agent files and report every problem with file:line:column; exit 1 on any error
    #[command(
        after_help = "With no PATH, checks every file on the search path. A PATH may be \
a file or a directory of agent files; transitions are checked against the agents in effect."
    )]
    Validate(ValidateArgs),
    /// Watch the agent directories and print each reload as it happens (stops at Ctrl-C, or
    /// when standard input is a pipe or terminal that closes)
    Watch(WatchArgs),
    /// Draw the agents' transition graph as Mermaid (for Markdown) or DOT (for Graphviz)
    #[command(
        after_help = "Solid edges are the transition table (onSuccess, onFailure, \
onMaxIterations, and the retry when onFailure is unset); dotted edges lead where only the arbiter \
goes (escalation after repeated failures; with an llm arbiter, any target a model may pick \
whatever the event); thick edges lead \
to the agents an agent may call as tools. Agents of a workspace you have not trusted are marked. \
Paste Mermaid into a ```mermaid block; render DOT with `dot -Tsvg`."
    )]
    Graph(GraphArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The agent's name
    name: String,
    /// Print JSON: the agent model, with its status, shadows and problems, and the tools and
    /// model a run gives it
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ValidateArgs {
    /// Agent files or directories to check [default: the whole search path]
    paths: Vec<PathBuf>,
    /// Print JSON: {"ok", "files", "errors", "warnings", "diagnostics"}
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct GraphArgs {
    /// The text to print: a Mermaid flowchart or a Graphviz DOT digraph
    #[arg(long, value_enum, default_value_t = GraphFormat::Mermaid)]
    format: GraphFormat,
    /// Draw only what can be reached from this agent (by transitions, the arbiter or calls)
    #[arg(long, value_name = "START")]
    agent: Option<String>,
    /// The arbiter whose choices to draw: fixed (escalation after repeated failures) or llm
    /// (every target a model may pick, whatever the event) [default: the config's
    /// arbiter.mode]
    #[arg(long, value_enum, value_name = "MODE")]
    arbiter: Option<ArbiterArg>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ArbiterArg {
    Fixed,
    Llm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum GraphFormat {
    Mermaid,
    Dot,
}

#[derive(Debug, Args)]
struct WatchArgs {
    /// Print one JSON object per line
    #[arg(long)]
    json: bool,
}

impl AgentsCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            AgentsAction::List(a) => list(cx, a),
            AgentsAction::Show(a) => show(cx, a).await,
            AgentsAction::Validate(a) => validate(cx, a),
            AgentsAction::Watch(a) => watch(cx, a),
            AgentsAction::Graph(a) => graph(cx, a),
        }
    }
}

/// One line on stderr when there are problems, so `list` and `show` stay usable.
fn note_problems(registry: &Registry) {
    let errors = registry
        .diagnostics()
        .iter()
        .filter(|d| d.is_error())
        .count();
    if errors > 0 {
        eprintln!(
            "warning: {errors} error(s) in agent files; run `rawko agents validate` to see them"
        );
    }
}

fn list(cx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(&search_path(cx));
    let verbose = cx.verbose > 0;
    if args.json {
        let items: Vec<_> = registry.entries().map(entry_json).collect();
        print_json(&serde_json::Value::Array(items))?;
        note_problems(&registry);
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&["NAME", "STATUS", "ORIGIN", "DIALECT", "FILE"]);
    for e in registry.entries() {
        table.row([
            e.name.as_str(),
            e.status.as_str(),
            e.file.origin.as_str(),
            e.file.dialect.map_or("-", |d| d.as_str()),
            e.file.display.as_str(),
        ]);
        if verbose {
            for s in &e.shadows {
                table.note(1, &format!("shadows {} ({})", s.display, s.origin.as_str()));
            }
        }
    }
    let out = table.render();
    print_out(&out)?;
    note_problems(&registry);
    Ok(ExitCode::SUCCESS)
}

fn graph(cx: &Context, args: GraphArgs) -> anyhow::Result<ExitCode> {
    let arbiter = match args.arbiter {
        Some(ArbiterArg::Fixed) => ArbiterMode::Fixed,
        Some(ArbiterArg::Llm) => ArbiterMode::Llm,
        None => arbiter_mode(cx)?,
    };
    let registry = Registry::load(&search_path(cx));
    let whole = Graph::of(
        registry.agents().map(|a| a.as_ref()),
        cx.workspace_trust(),
        arbiter,
    );
    let graph = match &args.agent {
        None => whole,
        Some(start) => match (registry.entry(start), whole.reachable_from(start)) {
            (None, _) => return Err(unknown_agent(&registry, start).into()),
            (Some(_), Some(g)) => g,
            (Some(entry), None) => {
                return Err(BadInput::new(printable(
                    &format!(
                        "agent '{start}' ({}) has errors; `rawko agents validate` shows them",
                        entry.file.display
                    ),
                    false,
                ))
                .into());
            }
        },
    };
    print_out(&match args.format {
        GraphFormat::Mermaid => graph.to_mermaid(None),
        GraphFormat::Dot => graph.to_dot(None),
    })?;
    note_problems(&registry);
    Ok(ExitCode::SUCCESS)
}

/// How the workspace's runs choose the next state (`arbiter.mode` in the config).
fn arbiter_mode(cx: &Context) -> anyhow::Result<ArbiterMode> {
    let merged = cx.config_layers()?.merged();
    Ok(merged.arbiter.map(|a| a.mode).unwrap_or_default())
}

fn entry_json(e: &Entry) -> serde_json::Value {
    json!({
        "name": e.name,
        "display_name": e.agent.as_ref().and_then(|a| a.display_name.clone()),
        "status": e.status,
        "origin": e.file.origin,
        "dialect": e.file.dialect,
        "file": e.file.display,
        "path": e.file.path,
        "summary": e.agent.as_ref().map(|a| a.summary()),
        "can_write": e.agent.as_ref().map(|a| a.can_write()),
        "shadows": e.shadows,
    })
}

/// What a run gives an agent, worked out as the run does.
struct Gets {
    /// The tools it is offered.
    tools: Vec<String>,
    /// The adapter instance and the model it is asked for, or why there is none; `None` for an
    /// external agent that needs no model.
    model: Option<Result<(String, String), String>>,
}

impl Gets {
    async fn of(cx: &Context, a: &Agent) -> anyhow::Result<Gets> {
        let tools = offered_tools(cx, Some(a), false)
            .await?
            .into_iter()
            .map(|o| o.name)
            .collect();
        // An external agent needs a model only to read its report, when it names one.
        let model = (a.external.is_none() || a.model.adapter.is_some()).then(|| model_used(cx, a));
        Ok(Gets { tools, model })
    }
}

/// The instance a run (without `--adapter`) takes the agent's model from, and the model it
/// asks that instance for, its aliases applied.
fn model_used(cx: &Context, a: &Agent) -> Result<(String, String), String> {
    let merged = cx.config_layers().map_err(|e| e.to_string())?.merged();
    let instances = cx.adapter_instances().map_err(|e| e.to_string())?;
    let default = merged.defaults.as_ref().and_then(|d| d.adapter.as_deref());
    let name = instance_name(a, None, default).ok_or_else(|| {
        "it names no adapter and no config sets `defaults.adapter` (or pass --adapter to run)"
            .to_string()
    })?;
    let instance = instances.get(&name).ok_or_else(|| {
        format!(
            "no adapter named `{name}` (available: {})",
            instances.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let model = agent_model(a, instance, false, &merged.model_aliases);
    Ok((name, model))
}

async fn show(cx: &Context, args: ShowArgs) -> anyhow::Result<ExitCode> {
    let registry = Registry::load(&search_path(cx));
    let Some(entry) = registry.entry(&args.name) else {
        return Err(unknown_agent(&registry, &args.name).into());
    };
    let problems: Vec<&Diagnostic> = registry
        .diagnostics()
        .iter()
        .filter(|d| d.file == entry.file.display)
        .collect();
    // What the agent gets (sandbox, network) depends on whether its workspace is trusted.
    let trusted = cx.workspace_trust();
    let gets = match &entry.agent {
        Some(a) => Some(Gets::of(cx, a).await?),
        None => None,
    };
    if args.json {
        let mut v = json!({
            "name": entry.name,
            "status": entry.status,
            "file": entry.file,
            "shadows": entry.shadows,
            "diagnostics": problems,
        });
        if let (Some(a), Some(gets)) = (&entry.agent, &gets) {
            v["agent"] = serde_json::to_value(a.as_ref())?;
            v["can_write"] = json!(a.can_write() && !a.is_untrusted(trusted));
            v["tools_effective"] = json!(gets.tools);
            v["model_effective"] = match &gets.model {
                Some(Ok((adapter, model))) => json!({"adapter": adapter, "model": model}),
                Some(Err(why)) => json!({"problem": why}),
                None => serde_json::Value::Null,
            };
            v["sandbox"] = json!(a.sandbox_mode(trusted));
            v["network"] = json!(a.network_allowed(trusted));
        }
        print_json(&v)?;
    } else {
        let mut out = String::new();
        let mut line =
            |k: &str, v: &str| out.push_str(&format!("{k:14} {}\n", printable(v, false)));
        line("name:", &entry.name);
        line("status:", entry.status.as_str());
        line(
            "dialect:",
            entry
                .file
                .dialect
                .map_or("unknown (the file does not parse)", |d| d.as_str()),
        );
        line(
            "file:",
            &format!("{} ({})", entry.file.display, entry.file.origin.as_str()),
        );
        for s in &entry.shadows {
            line(
                "shadows:",
                &format!("{} ({})", s.display, s.origin.as_str()),
            );
        }
        if let (Some(a), Some(gets)) = (&entry.agent, &gets) {
            describe(a, gets, trusted, &mut line);
        }
        for d in &problems {
            out.push_str(&format!("problem:       {d}\n"));
        }
        if let Some(a) = &entry.agent {
            out.push_str("\nsystem prompt:\n");
            for l in a.system_prompt.lines() {
                out.push_str("  ");
                out.push_str(&printable(l, true));
                out.push('\n');
            }
            if let Some(schema) = &a.output_schema {
                out.push_str("\noutput schema:\n");
                let text = serde_json::to_string_pretty(schema).unwrap_or_default();
                for l in text.lines() {
                    out.push_str("  ");
                    out.push_str(&printable(l, true));
                    out.push('\n');
                }
            }
        }
        print_out(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn describe(a: &Agent, gets: &Gets, trusted: Trust, line: &mut impl FnMut(&str, &str)) {
    if let Some(d) = &a.display_name {
        line("display name:", d);
    }
    if let Some(d) = &a.description {
        line("description:", &one_line(d));
    }
    if let Some(w) = &a.when_to_use {
        line("when to use:", &one_line(w));
    }
    let m = &a.model;
    let mut model = Vec::new();
    if let Some(x) = &m.adapter {
        model.push(format!("adapter {x}"));
    }
    if let Some(x) = m.provider {
        model.push(format!("provider {}", x.as_str()));
    }
    if let Some(x) = &m.model {
        model.push(format!("model {x}"));
    }
    if let Some(x) = m.max_tokens {
        model.push(format!("max_tokens {x}"));
    }
    if let Some(x) = m.reasoning_effort {
        model.push(format!("reasoning_effort {}", x.as_str()));
    }
    if let Some(x) = m.thinking_budget {
        model.push(format!("thinking_budget {x}"));
    }
    if let Some(x) = &m.base_url {
        model.push(format!("base_url {x}"));
    }
    if let Some(x) = &m.api_key_env_var {
        model.push(format!("key from ${x}"));
    }
    if let Some(e) = &a.external {
        let c = e.command();
        let mut runs = format!(
            "{} over {}",
            std::iter::once(c.command.as_str())
                .chain(c.args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            match e {
                rawko_agents::model::External::Acp(_) => "ACP (rawko is its client)",
                rawko_agents::model::External::Cli(_) => "its command line (a coding CLI)",
            }
        );
        if !c.env.is_empty() {
            runs.push_str(&format!("; passes {}", c.env.join(", ")));
        }
        line("runs:", &runs);
        line(
            "outcome:",
            &match &m.adapter {
                Some(x) => format!("its final report, read by adapter {x}"),
                None => "success when it ends cleanly".to_string(),
            },
        );
    } else {
        line(
            "model:",
            &if model.is_empty() {
                "the default adapter".to_string()
            } else {
                model.join(", ")
            },
        );
    }
    match &gets.model {
        Some(Ok((adapter, model))) => line("model used:", &format!("{model} (adapter {adapter})")),
        Some(Err(why)) => line("model used:", &format!("none: {why}")),
        None => {}
    }
    let tools = match &a.tools.allowed {
        None => "every tool".to_string(),
        Some(l) => l.join(", "),
    };
    // What it will get, and what the file asks for when that is not the same list.
    let offered = gets.tools.join(", ");
    if a.is_untrusted(trusted) {
        line(
            "tools:",
            &format!("{offered} (the workspace is not trusted; the file asks for: {tools})"),
        );
    } else if a.tools.allowed.as_ref().is_some_and(|l| {
        let mut asked: Vec<&String> = l.iter().collect();
        let mut got: Vec<&String> = gets.tools.iter().collect();
        asked.sort();
        got.sort();
        asked == got
    }) {
        line("tools:", &tools);
    } else {
        line("tools:", &format!("{offered} (the file asks for: {tools})"));
    }
    if !a.tools.blocked.is_empty() {
        line("blocked:", &a.tools.blocked.join(", "));
    }
    line(
        "writes:",
        if a.is_untrusted(trusted) {
            "no (the workspace is not trusted)"
        } else if a.can_write() {
            "yes"
        } else {
            "no (read-only: Write, Edit and Bash are not allowed)"
        },
    );
    line("sandbox:", &sandbox_line(a, trusted));
    line("network:", &network_line(a, trusted));
    if let Some(c) = &a.bash.allowed_commands {
        line(
            "bash allows:",
            &if c.is_empty() {
                "no command".to_string()
            } else {
                c.join(" | ")
            },
        );
    }
    if !a.bash.blocked_patterns.is_empty() {
        line("bash blocks:", &a.bash.blocked_patterns.join(" | "));
    }
    for t in &a.command_tools {
        line(
            "command tool:",
            &format!("{}: {} {}", t.name, t.command, t.args.join(" ")),
        );
    }
    for p in &a.parameters {
        line(
            "parameter:",
            &format!(
                "{} ({}{})",
                p.name,
                p.kind.as_str(),
                if p.required { ", required" } else { "" }
            ),
        );
    }
    let transitions: Vec<String> = a
        .transitions
        .iter()
        .map(|(event, t)| format!("{event} -> {t}"))
        .collect();
    line("transitions:", &transitions.join(", "));
    let mut limits = Vec::new();
    if let Some(n) = a.limits.max_iterations {
        limits.push(format!("maxIterations {n}"));
    }
    if let Some(t) = a.limits.timeout_ms {
        limits.push(format!("timeout {t} ms"));
    }
    line(
        "limits:",
        &if limits.is_empty() {
            "the configured defaults".to_string()
        } else {
            limits.join(", ")
        },
    );
    if a.output_schema.is_some() {
        line("output:", "checked against its output schema (below)");
    }
}

/// The sandbox mode the agent's programs run in, and why, when it is not what it asks for.
fn sandbox_line(a: &Agent, trusted: Trust) -> String {
    let mode = a.sandbox_mode(trusted);
    let mut text = match mode {
        Mode::Full => "full (no kernel sandbox)".to_string(),
        m => m.to_string(),
    };
    if let Some(asked) = a.sandbox.filter(|&m| m != mode) {
        let why = if a.is_untrusted(trusted) {
            "the workspace is not trusted"
        } else {
            "full is only for your own agents"
        };
        text.push_str(&format!(" (asks for {asked}; {why})"));
    }
    text
}

/// Whether the agent's programs may use the network, and why not when it asks.
fn network_line(a: &Agent, trusted: Trust) -> String {
    if a.network_allowed(trusted) {
        "on".to_string()
    } else if a.network {
        "off (asks for on; the workspace is not trusted)".to_string()
    } else {
        "off".to_string()
    }
}

fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn validate(cx: &Context, args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let search = search_path(cx);
    let (files, mut diagnostics) = if args.paths.is_empty() {
        let registry = Registry::load(&search);
        let files: Vec<String> = registry.files().iter().map(|f| f.display.clone()).collect();
        let mut diagnostics = registry.diagnostics().to_vec();
        diagnostics.extend(missing_programs(cx, &registry, &files));
        (files, diagnostics)
    } else {
        validate_paths(cx, &search, &args.paths)?
    };
    // In the order an editor shows them: by file, then line and column.
    diagnostics.sort_by(|a, b| (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column)));
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    let warnings = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    if args.json {
        print_json(&json!({
            "ok": errors == 0,
            "files": files,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": diagnostics,
        }))?;
    } else {
        let mut out = String::new();
        for d in &diagnostics {
            out.push_str(&format!("{d}\n"));
        }
        let n = files.len();
        let summary = if errors == 0 && warnings == 0 {
            format!("{n} agent file(s) checked: all valid")
        } else {
            format!("{n} agent file(s) checked: {errors} error(s), {warnings} warning(s)")
        };
        out.push_str(&summary);
        print_out(&out)?;
    }
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Check the named files and directories, with transitions checked against the agents in
/// effect. Only problems in the named files are reported.
fn validate_paths(
    cx: &Context,
    search: &SearchPath,
    paths: &[PathBuf],
) -> anyhow::Result<(Vec<String>, Vec<Diagnostic>)> {
    let mut named: Vec<(PathBuf, String)> = Vec::new();
    for p in paths {
        let meta =
            std::fs::metadata(p).map_err(|e| BadInput::new(format!("{}: {e}", p.display())))?;
        if meta.is_dir() {
            let found = discover(p);
            if found.is_empty() {
                return Err(BadInput::new(format!(
                    "{}: no agent files (.yaml, .yml, .md, or <folder>/agent.agent.yaml)",
                    p.display()
                ))
                .into());
            }
            for f in found {
                let rel = f.strip_prefix(p).unwrap_or(&f);
                let shown = p.join(rel).display().to_string();
                named.push((f.clone(), printable(&shown, false).into_owned()));
            }
        } else {
            let shown = p.display().to_string();
            named.push((p.clone(), printable(&shown, false).into_owned()));
        }
    }
    let mut loaded: Vec<_> = named
        .iter()
        .map(|(path, display)| load_file(path, display, AgentOrigin::File))
        .collect();
    let real = |p: &std::path::Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let named_real: Vec<PathBuf> = named.iter().map(|(p, _)| real(p)).collect();
    let displays: Vec<String> = named.into_iter().map(|(_, d)| d).collect();
    // The agents in effect, below the named files, so transitions can name them (a named file
    // that is also on the search path is read once, as named).
    let context = Registry::load(search);
    loaded.extend(
        context
            .files()
            .iter()
            .filter(|f| f.origin == AgentOrigin::Builtin || !named_real.contains(&real(&f.path)))
            .cloned(),
    );
    let registry = Registry::build(loaded, None);
    let mut diagnostics: Vec<Diagnostic> = registry
        .diagnostics()
        .iter()
        .filter(|d| displays.contains(&d.file))
        .cloned()
        .collect();
    diagnostics.extend(missing_programs(cx, &registry, &displays));
    Ok((displays, diagnostics))
}

/// An error for each external agent (`acp:`, `cli:`) in `files` whose program is not there: a
/// state that cannot start is found now, not when the task reaches it.
fn missing_programs(cx: &Context, registry: &Registry, files: &[String]) -> Vec<Diagnostic> {
    let path_dirs = rawko_shell::Resolver::from_env(&[cx.workspace()])
        .path_dirs()
        .to_vec();
    registry
        .agents()
        .filter(|a| files.contains(&a.source.display))
        .filter_map(|a| {
            let external = a.external.as_ref()?;
            let command = &external.command().command;
            let missing =
                rawko_sandbox::program::resolve(command, cx.workspace(), &path_dirs).err()?;
            Some(Diagnostic {
                file: a.source.display.clone(),
                line: a.source.spans.name.line.max(1),
                column: a.source.spans.name.column.max(1),
                severity: Severity::Error,
                message: format!(
                    "agent {} runs an external agent over {}: {missing}",
                    a.name,
                    external.kind()
                ),
                hint: Some(
                    "install it, or give its full path in 'command'; rawko does not fall back \
                     to another agent"
                        .into(),
                ),
            })
        })
        .collect()
}

enum WatchEvent {
    Report(Report),
    InputClosed,
}

fn watch(cx: &Context, args: WatchArgs) -> anyhow::Result<ExitCode> {
    let search = search_path(cx);
    let (tx, rx) = mpsc::channel();
    let report_tx = tx.clone();
    let watcher = Watcher::start(search.clone(), move |r| {
        let _ = report_tx.send(WatchEvent::Report(r));
    })?;
    if stdin_can_close() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = tx.send(WatchEvent::InputClosed);
        });
    }
    let registry = watcher.registry().snapshot();
    let dirs: Vec<String> = search.dirs.iter().map(|(_, d)| search.display(d)).collect();
    let agents = registry.agents().count();
    if args.json {
        let ready = json!({
            "event": "ready",
            "agents": agents,
            "dirs": dirs,
            "generation": registry.generation(),
            "diagnostics": registry.diagnostics(),
        });
        print_out(&ready.to_string())?;
    } else {
        print_out(&format!(
            "watching {} and the built-ins: {agents} agents",
            dirs.join(", ")
        ))?;
        for d in registry.diagnostics() {
            print_out(&d.to_string())?;
        }
    }
    while let Ok(event) = rx.recv() {
        let report = match event {
            WatchEvent::Report(r) => r,
            WatchEvent::InputClosed => break,
        };
        if args.json {
            print_out(&serde_json::to_string(&report)?)?;
            continue;
        }
        match report {
            Report::Warning { message } => print_out(&format!("warning: {message}"))?,
            Report::Reload(ev) => {
                let n = ev.generation;
                let mut out = String::new();
                for c in &ev.changes {
                    let name = printable(&c.name, false);
                    let text = match c.kind {
                        ChangeKind::Added | ChangeKind::Updated | ChangeKind::Restored => {
                            format!("{} {name} from {}", c.kind.as_str(), c.file)
                        }
                        ChangeKind::Removed => format!("removed {name} ({})", c.file),
                        ChangeKind::Kept => format!(
                            "kept {name}: {} has errors, the last good version stays in use",
                            c.file
                        ),
                        ChangeKind::Invalid => {
                            format!("invalid {name}: {} has errors", c.file)
                        }
                    };
                    out.push_str(&format!("reload {n}: {text}\n"));
                }
                for d in &ev.diagnostics {
                    out.push_str(&format!("reload {n}: {d}\n"));
                }
                print_out(&out)?;
            }
        }
    }
    drop(watcher);
    Ok(ExitCode::SUCCESS)
}

/// Whether standard input can signal "stop" by closing: a terminal (Ctrl-D) or a pipe. Not
/// /dev/null or a file, which are at end of input from the start.
fn stdin_can_close() -> bool {
    use std::io::IsTerminal;
    if std::io::stdin().is_terminal() {
        return true;
    }
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::FileTypeExt;
        let Ok(fd) = std::io::stdin().as_fd().try_clone_to_owned() else {
            return false;
        };
        let Ok(meta) = std::fs::File::from(fd).metadata() else {
            return false;
        };
        let t = meta.file_type();
        t.is_fifo() || t.is_socket()
    }
    #[cfg(not(unix))]
    {
        false
    }
}
