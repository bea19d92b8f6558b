//! The tools a session runs for agents: the wasm tool plugins, the host tools and the agents' command tools, each under the calling agent's own capabilities.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use rawko_agents::model::{Agent, ParamType};
use rawko_capability::{Access, FsGrants, GrantError};
use rawko_config::Trust;
use rawko_fsm::llm::ToolSpec;
use rawko_fsm::tools::{JudgeFuture, Judgement, ToolFuture, ToolHost, ToolOutcome};
use rawko_mcp::client::Servers;
use rawko_runtime::tool::CallContext;
use rawko_runtime::{Budget, Runtime, ToolCallError};
use rawko_sandbox::{Mode as SandboxMode, Policy as SandboxPolicy};
use rawko_shell::exec::{Launch, TaskTmp};
use rawko_shell::verdict::{CheckReport, Decision};
use rawko_shell::{Policy, Resolver};
use rawko_store::AuditEntry;
use rawko_toolset::bash::BashContext;
use rawko_toolset::chain::Chain;
use rawko_toolset::command_tool::{self, CommandToolContext};
use rawko_toolset::host::fs_capability;
use rawko_toolset::{Audit, HostCallContext, Provider, ToolSet};

/// Tools an agent from an untrusted workspace may still call: they only read.
pub fn read_only_tools() -> Vec<&'static str> {
    rawko_agents::model::read_tools()
}

/// Most characters of one tool result the model is shown; the rest is cut with a notice.
pub const MAX_RESULT_CHARS: usize = 60_000;

/// Whether an agent is untrusted ([`Agent::is_untrusted`]: from a workspace the user has not
/// trusted, or working for such an agent), which limits it to the [`read_only_tools`].
pub fn untrusted_agent(agent: &Agent, trust: Trust) -> bool {
    agent.is_untrusted(trust)
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
        read_only_tools().join(", ")
    )
}

/// Why an external agent's program could not start.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("no reaper to start the program under")]
    NoReaper,
    #[error("cannot make the task's temporary directory")]
    NoTmp,
    #[error(transparent)]
    NotFound(#[from] rawko_sandbox::program::NotFound),
    #[error("{program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
}

/// Runs tools for agents: the wasm tool plugins, `Bash`, and the agents' command tools.
pub struct SessionTools {
    rt: Rc<Runtime>,
    workspace: PathBuf,
    set: ToolSet,
    chain: Chain,
    resolver: Resolver,
    workspace_trust: Trust,
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
    /// `budget`; `workspace_trust` decides what the workspace's own agents may do.
    pub fn new(
        rt: Rc<Runtime>,
        workspace: PathBuf,
        set: ToolSet,
        chain: Chain,
        workspace_trust: Trust,
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
            workspace_trust,
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
        if agent.can_write() && !untrusted_agent(agent, self.workspace_trust) {
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
        match &self.launch {
            Launch::Sandboxed { launcher, .. } => match agent.sandbox_mode(self.workspace_trust) {
                SandboxMode::Full => Launch::Unconfined {
                    reaper: Some(launcher.clone()),
                },
                mode => Launch::Sandboxed {
                    launcher: launcher.clone(),
                    mode: Some(mode),
                    network: agent.network_allowed(self.workspace_trust),
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
        if untrusted_agent(agent, self.workspace_trust) && !read_only_tools().contains(&name) {
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
        let restricted = untrusted_agent(agent, self.workspace_trust);
        let mut out: Vec<ToolSpec> = self
            .set
            .tools()
            .into_iter()
            .filter(|(_, t)| !restricted || read_only_tools().contains(&t.name.as_str()))
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
            if untrusted_agent(agent, self.workspace_trust) {
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

    fn withheld(&self, agent: &Agent, name: &str) -> Option<String> {
        let has =
            self.set.find(name).is_some() || agent.command_tools.iter().any(|t| t.name == name);
        (has && untrusted_agent(agent, self.workspace_trust) && !read_only_tools().contains(&name))
            .then(|| untrusted_reason(agent))
    }
}

impl SessionTools {
    /// Start `agent`'s external program in its kernel sandbox with stdio piped, and the
    /// decisions that made it.
    pub fn spawn_external(
        &self,
        agent: &Agent,
        external: &rawko_agents::model::External,
    ) -> Result<(tokio::process::Child, Vec<AuditEntry>), SpawnError> {
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
                mode.unwrap_or_else(|| agent.sandbox_mode(self.workspace_trust)),
                network,
                tmp,
            ),
            Launch::Unconfined { reaper } => (
                reaper.ok_or(SpawnError::NoReaper)?,
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
                .ok_or(SpawnError::NoTmp)?,
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
        let child = command.spawn().map_err(|source| SpawnError::Start {
            program: cmd.command.clone(),
            source,
        })?;
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

/// The wasm budget of one tool call in a run.
pub fn tool_budget() -> Budget {
    Budget {
        timeout: Duration::from_secs(60),
        memory: 512 << 20,
        output: 4 << 20,
    }
}
