//! A run session: everything a task needs from this workspace, assembled once and handed to the
//! [`Engine`](crate::Engine).
//!
//! The engine knows agents, models and tools only through traits; this module binds them to the
//! real things: the agent registry (a snapshot: a run keeps the agents it started with), the
//! adapter instances from `config.yaml` opened on first use, the wasm tool plugins and the
//! `Bash` host tool under each agent's own capabilities, and the workspace's trust decision.
//!
//! Capabilities are decided here, per call, from the agent definition and the trust decision,
//! never from anything a model or a tool wrote: an agent that cannot write gets read-only
//! grants; an agent from an untrusted workspace's `.rawko/agents` gets read-only tools only.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use rawko_plugin_sdk::llm as wire;

use crate::conversation::{Message, Role};
use crate::events::{EventSink, RunEvent};
use crate::llm::{Completion, CompletionRequest, Llm, LlmError, LlmFuture, ToolSpec};
use crate::tools::{JudgeFuture, Judgement, ToolFuture, ToolHost, ToolOutcome};
use crate::{AgentLookup, LlmFor, LlmProvider};
use rawko_adapters::{Adapter, AdapterInstance, OpenError, OpenOptions, Recorder};
use rawko_agents::model::{Agent, ParamType};
use rawko_agents::registry::Registry;
use rawko_capability::{Access, FsGrants, GrantError};
use rawko_mcp::client::Servers;
use rawko_runtime::progress::ProgressSink;
use rawko_runtime::tool::CallContext;
use rawko_runtime::{AdapterCallError, Budget, Runtime, ToolCallError};
use rawko_sandbox::{Mode as SandboxMode, Policy as SandboxPolicy};
use rawko_shell::exec::{Launch, TaskTmp};
use rawko_shell::verdict::{CheckReport, Decision};
use rawko_shell::{Policy, Resolver};
use rawko_store::{AuditEntry, Usage};
use rawko_toolset::bash::BashContext;
use rawko_toolset::chain::Chain;
use rawko_toolset::command_tool::{self, CommandToolContext};
use rawko_toolset::host::fs_capability;
use rawko_toolset::{Audit, HostCallContext, Provider, ToolSet};

/// Tools an agent from an untrusted workspace may still call: they only read.
pub const READ_ONLY_TOOLS: &[&str] = rawko_agents::model::READ_TOOLS;

/// Most characters of one tool result the model is shown; the rest is cut with a notice.
pub const MAX_RESULT_CHARS: usize = 60_000;

/// An event sink the adapter's progress callbacks can hold.
pub type SharedSink = Arc<dyn EventSink + Send + Sync>;

/// The agents a run works with: a registry snapshot.
pub struct Agents(pub Registry);

impl AgentLookup for Agents {
    fn agent(&self, name: &str) -> Option<Arc<Agent>> {
        self.0.get(name)
    }
}

/// Whether an agent is untrusted ([`Agent::is_untrusted`]: from a workspace the user has not
/// trusted, or working for such an agent), which limits it to [`READ_ONLY_TOOLS`].
pub fn untrusted_agent(agent: &Agent, workspace_trusted: bool) -> bool {
    agent.is_untrusted(workspace_trusted)
}

fn untrusted_reason(agent: &Agent) -> String {
    let why = match &agent.acting_for {
        Some(by) => format!(
            "agent {} works for agent {by}, which is not trusted",
            agent.name
        ),
        None => format!(
            "agent {} comes from this workspace's .rawko/agents and the workspace is not trusted",
            agent.name
        ),
    };
    format!(
        "{why}: it may only use read-only tools ({}) until the user trusts the workspace \
         (`rawko trust`)",
        READ_ONLY_TOOLS.join(", ")
    )
}

/// Runs tools for agents: the wasm tool plugins, `Bash`, and the agents' command tools.
pub struct SessionTools {
    rt: Rc<Runtime>,
    workspace: PathBuf,
    set: ToolSet,
    chain: Chain,
    resolver: Resolver,
    workspace_trusted: bool,
    /// The budget of one wasm tool call.
    budget: Budget,
    /// The workspace, granted read-only and read-write: what every call gets, made once.
    read_only: FsGrants,
    read_write: FsGrants,
    /// Each agent's shell policy (its blocked patterns compiled), made on its first `Bash`.
    policies: RefCell<HashMap<String, Rc<Policy>>>,
    /// How native commands start: through the kernel sandbox unless the user said otherwise.
    launch: Launch,
    /// Who the Git tool commits as: the user's own git identity, read on the first Git call.
    git_identity: std::cell::OnceCell<rawko_git::Identity>,
    /// The task's private temporary directory, the `TMPDIR` of all its sandboxed commands: made
    /// for the first, removed with the session.
    task_tmp: std::cell::OnceCell<Option<TaskTmp>>,
    /// The MCP servers configured and approved, connected.
    mcp: Option<Rc<Servers>>,
}

impl SessionTools {
    /// Tools for agents working in `workspace` (absolute and canonical), each wasm call held to
    /// `budget`; `workspace_trusted` decides what the workspace's own agents may do.
    pub fn new(
        rt: Rc<Runtime>,
        workspace: PathBuf,
        set: ToolSet,
        chain: Chain,
        workspace_trusted: bool,
        budget: Budget,
        launch: Launch,
    ) -> Result<Self, GrantError> {
        let grant = |access| {
            let mut g = FsGrants::none();
            g.grant(&workspace, &workspace, access).map(|()| g)
        };
        Ok(SessionTools {
            resolver: Resolver::from_env(&[workspace.as_path()]),
            read_only: grant(Access::ReadOnly)?,
            read_write: grant(Access::ReadWrite)?,
            rt,
            workspace,
            set,
            chain,
            workspace_trusted,
            budget,
            policies: RefCell::new(HashMap::new()),
            launch,
            git_identity: std::cell::OnceCell::new(),
            task_tmp: std::cell::OnceCell::new(),
            mcp: None,
        })
    }

    /// Offer the tools of these MCP servers too (`mcp__<server>__<tool>`), to agents that may
    /// call them.
    pub fn with_mcp(mut self, servers: Rc<Servers>) -> Self {
        self.mcp = Some(servers);
        self
    }

    /// The filesystem an agent's tools get: the workspace, read-write only if the agent may
    /// change it and is trusted to.
    fn grants_for(&self, agent: &Agent) -> &FsGrants {
        if agent.can_write() && !untrusted_agent(agent, self.workspace_trusted) {
            &self.read_write
        } else {
            &self.read_only
        }
    }

    /// The agent's shell policy over its grants.
    fn policy_for(&self, agent: &Agent) -> Result<Rc<Policy>, String> {
        if let Some(p) = self.policies.borrow().get(&agent.name) {
            return Ok(p.clone());
        }
        let policy = Rc::new(
            Policy::new(
                &self.workspace,
                self.grants_for(agent),
                agent.bash.allowed_commands.clone().unwrap_or_default(),
                agent.bash.blocked_patterns.clone(),
            )
            .map_err(|e| format!("the agent's bash policy: {e}"))?,
        );
        self.policies
            .borrow_mut()
            .insert(agent.name.clone(), policy.clone());
        Ok(policy)
    }

    /// How the agent's native commands start: the session's way (the kernel sandbox unless
    /// `--no-sandbox`), in the agent's effective mode and with its network setting; `full` (only
    /// ever from the user's own agents) runs them unconfined.
    fn launch_for(&self, agent: &Agent) -> Launch {
        let trusted = self.workspace_trusted;
        match &self.launch {
            Launch::Sandboxed { launcher, .. } => match agent.sandbox_mode(trusted) {
                SandboxMode::Full => Launch::Unconfined {
                    reaper: Some(launcher.clone()),
                },
                mode => Launch::Sandboxed {
                    launcher: launcher.clone(),
                    mode: Some(mode),
                    network: agent.network_allowed(trusted),
                    // Without one (it could not be made), each command makes its own, and
                    // says why not if it cannot either.
                    tmp: self
                        .task_tmp
                        .get_or_init(|| {
                            TaskTmp::new()
                                .inspect_err(|e| {
                                    tracing::warn!(
                                        "cannot make the task's temporary directory: {e}"
                                    )
                                })
                                .ok()
                        })
                        .as_ref()
                        .map(|t| t.path().to_path_buf()),
                    processes: agent.limits.processes,
                },
            },
            Launch::Unconfined { reaper } => Launch::Unconfined {
                reaper: reaper.clone(),
            },
        }
    }

    /// The audit entry for the kernel sandbox a native command ran under: its mode, network,
    /// limits and paths, or that it ran unconfined.
    fn sandbox_decision(agent: &Agent, policy: &Option<SandboxPolicy>) -> AuditEntry {
        let a = Audit::sandbox(policy);
        Self::decision(agent, &a.capability, &a.detail, a.allow, &a.reason)
    }

    fn decision(
        agent: &Agent,
        capability: &str,
        detail: &str,
        allow: bool,
        reason: &str,
    ) -> AuditEntry {
        let decision = if allow { "allow" } else { "deny" };
        AuditEntry::new(&agent.name, capability, detail, decision, reason)
    }

    /// Run tool `name` for `agent` with the agent's capabilities (the engine has checked that
    /// the agent may call it).
    pub async fn run(&self, agent: &Agent, name: &str, input: &str) -> ToolOutcome {
        let mut decisions = Vec::new();
        if untrusted_agent(agent, self.workspace_trusted) && !READ_ONLY_TOOLS.contains(&name) {
            let why = untrusted_reason(agent);
            decisions.push(Self::decision(agent, "tool", name, false, &why));
            return denied(why, decisions);
        }
        let grants = self.grants_for(agent);
        let access = fs_capability(grants);

        // A plugin's or the agent's own tool of the same name comes first, as in `specs`.
        let shadowed =
            self.set.find(name).is_some() || agent.command_tools.iter().any(|t| t.name == name);
        if let Some((conn, _)) = self
            .mcp
            .as_ref()
            .filter(|_| !shadowed)
            .and_then(|m| m.find(name))
        {
            decisions.push(Self::decision(
                agent,
                "mcp",
                name,
                true,
                &format!("MCP server {}", conn.spec.identity()),
            ));
            return match conn.call(name, input, None).await {
                Ok((text, false)) => ok(text, decisions),
                Ok((text, true)) => failed(text, decisions),
                Err(e) => failed(e.to_string(), decisions),
            };
        }
        if let Some(tool) = agent.command_tools.iter().find(|t| t.name == name) {
            decisions.push(Self::decision(
                agent,
                "exec",
                &format!("{} {}", tool.command, tool.args.join(" ")),
                true,
                "a command tool of the agent's definition",
            ));
            let params = match serde_json::from_str::<serde_json::Value>(input) {
                Ok(serde_json::Value::Object(m)) => m,
                Ok(_) => {
                    return failed(
                        format!("{name}: the input must be a JSON object"),
                        decisions,
                    );
                }
                Err(e) => {
                    return failed(
                        format!("{name}: the input is not valid JSON ({e})"),
                        decisions,
                    );
                }
            };
            let write_paths: Vec<PathBuf> = grants
                .iter()
                .filter(|g| g.access() == Access::ReadWrite)
                .map(|g| g.path().to_path_buf())
                .collect();
            let cx = CommandToolContext {
                resolver: &self.resolver,
                timeout: None,
                launch: &self.launch_for(agent),
                workspace: &self.workspace,
                write_paths: &write_paths,
            };
            return match command_tool::run(tool, &params, &cx).await {
                Ok(out) => {
                    decisions.push(Self::sandbox_decision(agent, &out.sandbox));
                    ok(out.text, decisions)
                }
                Err(e) => failed(e.to_string(), decisions),
            };
        }

        let Some((provider, _)) = self.set.find(name) else {
            return failed(
                format!(
                    "no tool named `{name}` (available: {})",
                    self.set.names().join(", ")
                ),
                decisions,
            );
        };
        let result =
            match provider {
                Provider::Plugin(plugin) => {
                    decisions.push(Self::decision(
                        agent,
                        access,
                        &self.workspace.display().to_string(),
                        true,
                        &format!("{name} ({}) on the workspace", plugin.name()),
                    ));
                    let cx = CallContext {
                        workspace: &self.workspace,
                        grants,
                        budget: self.budget,
                    };
                    plugin.call(&self.rt, name, input, &cx).await
                }
                Provider::Host(tool) => {
                    let policy = if tool.runs_commands() {
                        match self.policy_for(agent) {
                            Ok(p) => Some(p),
                            Err(e) => return failed(e, decisions),
                        }
                    } else {
                        None
                    };
                    let launch = policy.as_ref().map(|_| self.launch_for(agent));
                    let mut cx = HostCallContext::new(&self.workspace, grants, &self.git_identity);
                    if let (Some(policy), Some(launch)) = (&policy, &launch) {
                        cx = cx.with_shell(BashContext {
                            rt: &self.rt,
                            chain: &self.chain,
                            policy,
                            resolver: &self.resolver,
                            launch,
                        });
                    }
                    let result = tool.call(&cx, input).await;
                    decisions.extend(cx.take_audit().into_iter().map(|a| {
                        Self::decision(agent, &a.capability, &a.detail, a.allow, &a.reason)
                    }));
                    result
                }
            };
        match result {
            Ok(out) => ok(out.content, decisions),
            Err(
                e @ ToolCallError::Tool {
                    kind: rawko_runtime::tool::GuestErrorKind::Denied,
                    ..
                },
            ) => denied(e.to_string(), decisions),
            Err(e) => failed(e.to_string(), decisions),
        }
    }
}

/// The rule behind a check's decision, for the audit log: the filter and the rule of the first
/// simple command it gave that decision, then the reason (`rawko-policy [blockedPatterns: rm
/// -rf]: ...`).
fn deciding_rule(report: &CheckReport) -> String {
    let rule = report.filters.iter().find_map(|f| {
        f.verdict
            .commands
            .iter()
            .find(|c| c.decision == report.decision)
            .map(|c| (f.filter.as_str(), c.rule.as_str()))
    });
    match rule {
        Some((filter, rule)) => format!("{filter} [{rule}]: {}", report.reason),
        None => format!("{}: {}", report.decided_by, report.reason),
    }
}

/// Cut `text` to what the model is shown.
fn capped(text: String) -> String {
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        None => text,
        Some((at, _)) => {
            let total = text.chars().count();
            format!(
                "{}\n[output truncated: {MAX_RESULT_CHARS} of {total} characters shown]",
                &text[..at]
            )
        }
    }
}

fn ok(output: String, decisions: Vec<AuditEntry>) -> ToolOutcome {
    ToolOutcome {
        output: capped(output),
        is_error: false,
        verdict: "allowed".into(),
        decisions,
    }
}

fn failed(message: String, decisions: Vec<AuditEntry>) -> ToolOutcome {
    ToolOutcome {
        output: capped(message),
        is_error: true,
        verdict: "allowed".into(),
        decisions,
    }
}

fn denied(message: String, decisions: Vec<AuditEntry>) -> ToolOutcome {
    let verdict: String = format!("denied: {message}").chars().take(300).collect();
    ToolOutcome {
        output: capped(message),
        is_error: true,
        verdict,
        decisions,
    }
}

impl ToolHost for SessionTools {
    fn specs(&self, agent: &Agent) -> Vec<ToolSpec> {
        let restricted = untrusted_agent(agent, self.workspace_trusted);
        let mut out: Vec<ToolSpec> = self
            .set
            .tools()
            .into_iter()
            .filter(|(_, t)| !restricted || READ_ONLY_TOOLS.contains(&t.name.as_str()))
            .map(|(_, t)| ToolSpec {
                name: t.name.clone(),
                description: t.description.clone(),
                input_schema: t.input_schema.clone(),
            })
            .collect();
        if !restricted {
            for tool in &agent.command_tools {
                if out.iter().any(|s| s.name == tool.name) {
                    continue;
                }
                out.push(command_tool_spec(agent, tool));
            }
            // An MCP tool never shadows another: its name is always `mcp__...`, and one that
            // a plugin already has is left out.
            for (_, t) in self.mcp.iter().flat_map(|m| m.tools()) {
                if out.iter().any(|s| s.name == t.name) {
                    continue;
                }
                out.push(ToolSpec {
                    name: t.name.clone(),
                    description: t.description.clone(),
                    input_schema: t.input_schema.clone(),
                });
            }
        }
        out
    }

    fn call<'a>(&'a self, agent: &'a Agent, name: &'a str, input: &'a str) -> ToolFuture<'a> {
        Box::pin(self.run(agent, name, input))
    }

    fn workspace(&self) -> PathBuf {
        self.workspace.clone()
    }

    fn read_text(&self, agent: &Agent, path: &std::path::Path, max: u64) -> ToolOutcome {
        let shown = path.display().to_string();
        let bytes = match self.grants_for(agent).read_file(&self.workspace, path, max) {
            Ok(b) => b,
            Err(e) => {
                let why = e.to_string();
                let denial = Self::decision(agent, "fs.read", &shown, false, &why);
                return denied(why, vec![denial]);
            }
        };
        let allowed = vec![Self::decision(
            agent,
            "fs.read",
            &shown,
            true,
            "inside the agent's read grant",
        )];
        match String::from_utf8(bytes) {
            Ok(text) => ok(text, allowed),
            Err(_) => failed(format!("{shown} is not UTF-8 text"), allowed),
        }
    }

    fn judge_command<'a>(&'a self, agent: &'a Agent, command: &'a str) -> JudgeFuture<'a> {
        Box::pin(async move {
            if untrusted_agent(agent, self.workspace_trusted) {
                return Judgement::deny(format!("tools: {}", untrusted_reason(agent)));
            }
            let policy = match self.policy_for(agent) {
                Ok(p) => p,
                Err(e) => return Judgement::deny(e),
            };
            let mut report = self
                .chain
                .check(&self.rt, command, &policy, &self.resolver)
                .await;
            // As `rawko bash check` has it: what the executor would not run is not allowed.
            if report.decision == Decision::Allow
                && let Some(parsed) = &report.command
                && let Err(why) = rawko_shell::exec::runnable(parsed)
            {
                report.decision = Decision::Deny;
                report.decided_by = "executor".into();
                report.reason = format!("rawko's executor does not run this command: {why}");
            }
            Judgement {
                decision: report.decision,
                rule: deciding_rule(&report),
            }
        })
    }

    fn judge_path(&self, agent: &Agent, path: &std::path::Path, write: bool) -> Judgement {
        let shown = path.display();
        let Some(text) = path.to_str() else {
            return Judgement::deny(format!("grants: {shown} is not UTF-8"));
        };
        let grants = self.grants_for(agent);
        // Where the operation lands, as the shell's own redirections are judged: `..` and the
        // symlinks of the part that exists resolved.
        let real = rawko_shell::resolve::resolve_path(text, &self.workspace);
        match grants.access(&real) {
            None => {
                return Judgement::deny(format!(
                    "grants: {shown} is {}, outside the workspace and every granted directory",
                    real.display()
                ));
            }
            Some(Access::ReadOnly) if write => {
                return Judgement::deny(format!(
                    "grants: {shown} may only be read: this agent's grant is read-only"
                ));
            }
            Some(_) => {}
        }
        if write && let Some(place) = grants.protected().hit(&real, true) {
            let refusal = rawko_capability::protect::Refusal::Protected { path: real, place };
            return Judgement::deny(format!("protected paths: {refusal}"));
        }
        Judgement {
            decision: Decision::Allow,
            rule: format!(
                "grants: {shown} is inside the agent's {} grant",
                if write { "write" } else { "read" }
            ),
        }
    }

    fn spawn_external(
        &self,
        agent: &Agent,
        external: &rawko_agents::model::External,
    ) -> Result<(tokio::process::Child, Vec<AuditEntry>), String> {
        let cmd = external.command();
        let (launcher, unconfined, mode, network, tmp) = match self.launch_for(agent) {
            Launch::Sandboxed {
                launcher,
                mode,
                network,
                tmp,
                ..
            } => (
                launcher,
                false,
                mode.unwrap_or_else(|| agent.sandbox_mode(self.workspace_trusted)),
                network,
                tmp,
            ),
            Launch::Unconfined { reaper } => (
                reaper.ok_or("no reaper to start the program under")?,
                true,
                SandboxMode::Full,
                true,
                None,
            ),
        };
        let tmp = match tmp {
            Some(t) => t,
            None => self
                .task_tmp
                .get_or_init(|| TaskTmp::new().ok())
                .as_ref()
                .map(|t| t.path().to_path_buf())
                .ok_or("cannot make the task's temporary directory")?,
        };
        let program = rawko_sandbox::program::Program {
            launcher: &launcher,
            command: &cmd.command,
            args: &cmd.args,
            pass_env: &cmd.env,
            mode,
            network,
            unconfined,
            workspace: &self.workspace,
            tmp: &tmp,
            path_dirs: self.resolver.path_dirs(),
            processes: agent.limits.processes,
        };
        let mut command = tokio::process::Command::from(program.command()?);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|e| format!("{}: {e}", cmd.command))?;
        let line = std::iter::once(cmd.command.as_str())
            .chain(cmd.args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        let sandbox = if unconfined {
            "no kernel sandbox (--no-sandbox, or the agent's mode is full)".to_string()
        } else {
            format!("{mode}, network {}", if network { "on" } else { "off" })
        };
        let decisions = vec![
            Self::decision(
                agent,
                "exec",
                &line,
                true,
                &format!("the agent's external program ({})", external.kind()),
            ),
            Self::decision(agent, "sandbox", &line, true, &sandbox),
        ];
        Ok((child, decisions))
    }

    fn withheld(&self, agent: &Agent, name: &str) -> Option<String> {
        let has =
            self.set.find(name).is_some() || agent.command_tools.iter().any(|t| t.name == name);
        (has && untrusted_agent(agent, self.workspace_trusted) && !READ_ONLY_TOOLS.contains(&name))
            .then(|| untrusted_reason(agent))
    }
}

/// A command tool as the model sees it: its placeholders are its inputs.
pub fn command_tool_spec(agent: &Agent, tool: &rawko_agents::model::CommandTool) -> ToolSpec {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for name in tool.placeholders() {
        let param = agent.parameters.iter().find(|p| p.name == name);
        let kind = match param.map(|p| p.kind) {
            Some(ParamType::Int) => "integer",
            Some(ParamType::Bool) => "boolean",
            _ => "string",
        };
        let mut schema = serde_json::json!({ "type": kind });
        if let Some(d) = param.and_then(|p| p.description.as_ref()) {
            schema["description"] = d.clone().into();
        }
        if param.is_none_or(|p| p.required && p.default.is_none()) {
            required.push(name.clone());
        }
        properties.insert(name, schema);
    }
    ToolSpec {
        name: tool.name.clone(),
        description: tool.description.clone(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
        }),
    }
}

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
    pub fn instance_for(&self, agent: &Agent) -> Result<String, String> {
        instance_name(agent, self.forced.as_deref(), self.default.as_deref()).ok_or_else(|| {
            let looked: Vec<String> = self
                .config_files
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            format!(
                "agent {} names no adapter and no config sets `defaults.adapter` (looked in {}); \
                 set it there, or pass --adapter NAME (available: {})",
                agent.name,
                if looked.is_empty() {
                    "no config file".to_string()
                } else {
                    looked.join(" and ")
                },
                self.instances
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
    }

    /// Open (once) the instance called `name`.
    pub async fn open(&self, name: &str) -> Result<Rc<Adapter>, String> {
        if let Some(a) = self.opened.borrow().get(name) {
            return Ok(a.clone());
        }
        let Some(instance) = self.instances.get(name).cloned() else {
            return Err(format!(
                "no adapter named `{name}` (available: {})",
                self.instances
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        let env = |k: &str| std::env::var(k).ok();
        let mut adapter = Adapter::open(&self.rt, instance, &env, self.options.clone())
            .await
            .map_err(|e| match e {
                OpenError::Load(l) => format!("adapter {name}: {l}"),
                other => other.to_string(),
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
    ) -> Result<(), String> {
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
    pub async fn arbiter(&self, name: &str) -> Result<Rc<dyn Llm>, String> {
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
        Some(Box::pin(async move { self.arbiter(&name).await }))
    }
}

/// The wasm budget of one tool call in a run.
pub fn tool_budget() -> Budget {
    Budget {
        timeout: Duration::from_secs(60),
        memory: 512 << 20,
        output: 4 << 20,
    }
}
