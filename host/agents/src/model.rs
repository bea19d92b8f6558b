//! The one agent model every dialect loads into.
//!
//! Whatever file an agent came from, the rest of rawko sees an [`Agent`]: who it is, what it
//! is told, which model serves it, which tools and shell commands it may use, where the task
//! goes next, and its limits. Everything here has been validated; nothing downstream re-checks
//! the strings.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use rawko_capability::Mode;
use rawko_config::Trust;
use serde::{Serialize, Serializer};

use super::diag::Pos;
use crate::catalogue::{self, AcpKind, ToolAccess};

/// The tools rawko itself provides, as agents call them: the [catalogue](catalogue::catalogue),
/// then `finish`.
pub fn builtin_tools() -> Vec<&'static str> {
    let mut names = catalogue::names(None);
    names.push(FINISH);
    names
}

/// The built-in tools that only read the workspace.
/// (`Git` is among them: its write operations need the write grant, which a read-only agent
/// does not get.)
pub fn read_tools() -> Vec<&'static str> {
    catalogue::names(Some(ToolAccess::Read))
}

/// The tools that change the workspace; an agent allowed none of them is read-only.
pub fn write_tools() -> Vec<&'static str> {
    catalogue::names(Some(ToolAccess::Write))
}
/// The agent loop's own tool that ends a state; always available.
pub const FINISH: &str = "finish";

/// A loaded, validated agent definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Agent {
    /// Unique within the registry; names the FSM state and the agent as a tool.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the agent is (foreign dialects' `description`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// When the arbiter should pick it (rawko's `whenToUse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub when_to_use: Option<String>,
    pub system_prompt: String,
    pub model: ModelSettings,
    pub tools: ToolPolicy,
    pub bash: BashPolicy,
    /// Command tools (DocLoom `spec.tools`): programs run with substituted arguments.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub command_tools: Vec<CommandTool>,
    /// Inputs those command tools take (DocLoom `spec.parameters`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parameters: Vec<Parameter>,
    pub transitions: Transitions,
    pub limits: Limits,
    /// The kernel sandbox mode the definition asks for (rawko's `sandbox:`); `None` leaves it
    /// to what the agent's tools need. What it gets is [`Agent::sandbox_mode`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Mode>,
    /// Whether the definition asks for network access for the programs it runs (rawko's
    /// `network: on`). What it gets is [`Agent::network_allowed`].
    pub network: bool,
    /// A JSON Schema the finish payload's structured output must satisfy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<serde_json::Value>,
    pub source: AgentFile,
    /// Set when this agent runs on behalf of an untrusted one (called by it as a tool, or
    /// reached by a transition it chose): that agent's name. Such an agent is untrusted too.
    /// Never set by a file; see [`Agent::on_behalf_of`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acting_for: Option<String>,
    /// Set when the state is an external coding agent (rawko's `acp:` or `cli:`), which works
    /// with its own model and tools instead of rawko's agent loop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub external: Option<External>,
}

impl Agent {
    /// A subagent from a foreign Markdown dialect (kodelet, Claude Code): a prompt, a model,
    /// the tools and bash commands it may use (those dialects block nothing), and the default
    /// transitions.
    pub(crate) fn subagent(
        name: String,
        description: Option<String>,
        system_prompt: String,
        model: ModelSettings,
        allowed_tools: Option<Vec<String>>,
        allowed_commands: Option<Vec<String>>,
        source: AgentFile,
    ) -> Agent {
        Agent {
            name,
            display_name: None,
            description,
            when_to_use: None,
            system_prompt,
            model,
            tools: ToolPolicy {
                allowed: allowed_tools,
                blocked: Vec::new(),
            },
            bash: BashPolicy {
                allowed_commands,
                blocked_patterns: Vec::new(),
            },
            command_tools: Vec::new(),
            parameters: Vec::new(),
            transitions: Transitions::default(),
            limits: Limits::default(),
            sandbox: None,
            network: false,
            output_schema: None,
            source,
            acting_for: None,
            external: None,
        }
    }

    /// The name to show people.
    pub fn display_name(&self) -> &str {
        self.display_name.as_deref().unwrap_or(&self.name)
    }

    /// What the arbiter reads when choosing the next agent: `whenToUse`, else the description.
    pub fn summary(&self) -> &str {
        self.when_to_use
            .as_deref()
            .or(self.description.as_deref())
            .unwrap_or("")
    }

    /// Whether the agent may call `tool`: blocked wins, then the allow list (none means every
    /// tool). `finish` is always allowed, since a state can only end through it.
    pub fn may_call(&self, tool: &str) -> bool {
        self.tools.may_call(tool)
    }

    /// Whether the agent may change the workspace: it is allowed `Write`, `Edit` or `Bash`, or
    /// has command tools (which run programs). An agent that cannot write gets read-only
    /// filesystem grants for every tool it calls.
    pub fn can_write(&self) -> bool {
        write_tools().into_iter().any(|t| self.may_call(t)) || !self.command_tools.is_empty()
    }

    /// The kernel sandbox mode the programs this agent runs (Bash, command tools) get: the
    /// mode the definition asks for, else `workspace-write` for an agent that can write and
    /// `read-only` for one that cannot. `full` is honoured only for the user's own and the
    /// built-in agents: from the workspace or a file named on the command line it falls back
    /// as if unset. An agent of a workspace the user has not trusted gets `read-only`
    /// whatever it asks for.
    pub fn sandbox_mode(&self, trust: Trust) -> Mode {
        let by_tools = if self.can_write() {
            Mode::WorkspaceWrite
        } else {
            Mode::ReadOnly
        };
        if self.is_untrusted(trust) {
            return Mode::ReadOnly;
        }
        match self.sandbox {
            Some(Mode::Full) if !self.source.origin.is_users_own() => by_tools,
            Some(mode) => mode,
            None => by_tools,
        }
    }

    /// Whether the programs this agent runs may use the network: only when the definition says
    /// `network: on`, and never for an agent of a workspace the user has not trusted.
    pub fn network_allowed(&self, trust: Trust) -> bool {
        self.network && !self.is_untrusted(trust)
    }

    /// Whether the agent is untrusted: its definition comes from a workspace the user has not
    /// trusted, or it runs on behalf of such an agent.
    pub fn is_untrusted(&self, trust: Trust) -> bool {
        self.acting_for.is_some()
            || (self.source.origin == AgentOrigin::Workspace && !trust.is_trusted())
    }

    /// `self` as it runs on behalf of `caller`: never with more than the caller has, so no
    /// agent file or model can widen a grant by naming another agent.
    ///
    /// An agent reached from an untrusted one (see [`Agent::is_untrusted`]) is untrusted too,
    /// whether called as a tool or chosen as the next state. Called as a tool (`call`), it also
    /// gets no more than the caller: the tools both may call (the caller counting as able to
    /// read, and to edit if it can write), the shell commands both allow
    /// (an exact intersection of two lists; one list when only one sets any), the blocked
    /// tools and patterns of both, no writes or command tools if the caller cannot write, the
    /// lower sandbox mode, and network only if both have it. `trust` is the workspace's
    /// trust decision.
    pub fn on_behalf_of(&self, caller: &Agent, trust: Trust, call: bool) -> Agent {
        let mut out = self.clone();
        if caller.is_untrusted(trust) {
            out.acting_for = Some(
                caller
                    .acting_for
                    .clone()
                    .unwrap_or_else(|| caller.name.clone()),
            );
        }
        if !call {
            return out;
        }
        // What the caller may call, with what its filesystem grant implies: every agent may
        // read the workspace, and one that can write may edit it.
        let ceiling = caller.tools.allowed.as_ref().map(|list| {
            let mut c = list.clone();
            let edits = catalogue::catalogue()
                .iter()
                .filter(|t| t.access == ToolAccess::Write && t.acp_kind == AcpKind::Edit)
                .map(|t| t.name);
            let implied = read_tools()
                .into_iter()
                .chain(edits.filter(|_| caller.can_write()));
            for t in implied {
                if !c.iter().any(|x| x == t) {
                    c.push(t.to_string());
                }
            }
            c
        });
        out.tools.allowed = both_allow(&self.tools.allowed, &ceiling);
        add_missing(&mut out.tools.blocked, &caller.tools.blocked);
        out.bash.allowed_commands =
            both_allow(&self.bash.allowed_commands, &caller.bash.allowed_commands);
        add_missing(
            &mut out.bash.blocked_patterns,
            &caller.bash.blocked_patterns,
        );
        if !caller.can_write() {
            let writes: Vec<String> = write_tools().into_iter().map(String::from).collect();
            add_missing(&mut out.tools.blocked, &writes);
            out.command_tools.clear();
        }
        out.sandbox = Some(self.sandbox_mode(trust).min(caller.sandbox_mode(trust)));
        out.network = self.network_allowed(trust) && caller.network_allowed(trust);
        out
    }

    /// Every state this agent's transitions may lead to.
    pub fn targets(&self) -> impl Iterator<Item = &Target> {
        self.transitions.iter().map(|(_, t)| t)
    }
}

/// What two allow-lists both allow (`None`: the list sets no limit).
fn both_allow(a: &Option<Vec<String>>, b: &Option<Vec<String>>) -> Option<Vec<String>> {
    match (a, b) {
        (None, None) => None,
        (Some(a), None) | (None, Some(a)) => Some(a.clone()),
        (Some(a), Some(b)) => Some(a.iter().filter(|x| b.contains(x)).cloned().collect()),
    }
}

/// Append to `to` the entries of `from` it lacks.
fn add_missing(to: &mut Vec<String>, from: &[String]) {
    for x in from {
        if !to.contains(x) {
            to.push(x.clone());
        }
    }
}

/// Which model serves the agent: a named adapter instance from `config.yaml`, or provider and
/// model fields (kodelet, Claude Code) that the runtime maps onto an adapter. All empty means
/// the config's default adapter.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ModelSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<Provider>,
    /// A model name, or a family alias (`sonnet`, `opus`, `haiku`) for the adapter to resolve.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// OpenAI reasoning models only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Anthropic extended thinking, in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the API key; the host reads it, never the plugin.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env_var: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Provider {
    OpenAi,
    Anthropic,
}

impl Provider {
    pub const NAMES: &[&str] = &["openai", "anthropic"];

    /// The name files use; `NAMES` lists the variants in declaration order.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(s: &str) -> Option<Provider> {
        match s {
            "openai" => Some(Provider::OpenAi),
            "anthropic" => Some(Provider::Anthropic),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningEffort {
    Low,
    Medium,
    High,
}

impl ReasoningEffort {
    pub const NAMES: &[&str] = &["low", "medium", "high"];

    /// The name files use; `NAMES` lists the variants in declaration order.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(s: &str) -> Option<ReasoningEffort> {
        match s {
            "low" => Some(ReasoningEffort::Low),
            "medium" => Some(ReasoningEffort::Medium),
            "high" => Some(ReasoningEffort::High),
            _ => None,
        }
    }
}

/// Which tools the agent may call, by the names agents call them (`Read`, `Bash`, a plugin's
/// tool, another agent's name).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolPolicy {
    /// `None`: every tool. `Some`: only these (and `finish`).
    pub allowed: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked: Vec<String>,
}

impl ToolPolicy {
    pub fn may_call(&self, tool: &str) -> bool {
        if tool == FINISH {
            return true;
        }
        if self.blocked.iter().any(|b| names(b, tool)) {
            return false;
        }
        match &self.allowed {
            None => true,
            Some(list) => list.iter().any(|a| names(a, tool)),
        }
    }
}

/// Whether the entry `entry` of an allow- or block-list names `tool`: the tool's own name, or,
/// for MCP tools as Claude Code writes them, `mcp__<server>` (every tool of that server) or a
/// name ending in `*` (every tool whose name starts with the rest).
fn names(entry: &str, tool: &str) -> bool {
    if entry == tool {
        return true;
    }
    if let Some(prefix) = entry.strip_suffix('*') {
        return prefix.starts_with("mcp__") && tool.starts_with(prefix);
    }
    entry.starts_with("mcp__")
        && !entry["mcp__".len()..].contains("__")
        && tool
            .strip_prefix(entry)
            .is_some_and(|rest| rest.starts_with("__"))
}

/// What the agent may run through the `Bash` tool, on top of the filter chain.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BashPolicy {
    /// Command patterns (`git status`, `cargo test *`). `None`: the agent sets no list and the
    /// filter chain's defaults decide; `Some(empty)`: no command at all.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_commands: Option<Vec<String>>,
    /// Regular expressions (already checked to compile) that deny a command.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocked_patterns: Vec<String>,
}

/// A tool that runs a program: argv is `command` then `args` with `${PARAM}` substituted, no
/// shell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandTool {
    pub name: String,
    pub description: String,
    pub command: String,
    pub args: Vec<String>,
}

impl CommandTool {
    /// The `${NAME}` placeholders used in the arguments, in order of first use.
    pub fn placeholders(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for arg in &self.args {
            for name in placeholders_in(arg) {
                if !out.iter().any(|o| o == name) {
                    out.push(name.to_string());
                }
            }
        }
        out
    }
}

/// The `${NAME}` placeholders in `text`.
pub fn placeholders_in(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            let start = rest.find("${")?;
            let after = &rest[start + 2..];
            let end = after.find('}')?;
            let name = &after[..end];
            rest = &after[end + 1..];
            if !name.is_empty() {
                return Some(name);
            }
        }
    })
}

/// An input of the agent's command tools, passed as `${NAME}` and `PARAM_NAME`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Parameter {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: ParamType,
    pub required: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default: Option<ParamValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamType {
    String,
    Int,
    Bool,
}

impl ParamType {
    pub const NAMES: &[&str] = &["string", "int", "bool"];

    /// The name files use; `NAMES` lists the variants in declaration order.
    pub fn as_str(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn parse(s: &str) -> Option<ParamType> {
        match s {
            "string" => Some(ParamType::String),
            "int" => Some(ParamType::Int),
            "bool" => Some(ParamType::Bool),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ParamValue {
    String(String),
    Int(i64),
    Bool(bool),
}

/// Where the task goes when this agent's state ends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Transitions {
    pub on_success: Target,
    /// `None`: the arbiter's failure handling (retries, then escalation) decides.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_failure: Option<Target>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_max_iterations: Option<Target>,
}

impl Transitions {
    /// Each set transition with its event name as written in rawko files.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &Target)> {
        [
            ("onSuccess", Some(&self.on_success)),
            ("onFailure", self.on_failure.as_ref()),
            ("onMaxIterations", self.on_max_iterations.as_ref()),
        ]
        .into_iter()
        .filter_map(|(k, t)| t.map(|t| (k, t)))
    }
}

impl Default for Transitions {
    fn default() -> Self {
        Transitions {
            on_success: Target::Done,
            on_failure: None,
            on_max_iterations: None,
        }
    }
}

/// A next state: another agent, or a terminal state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    Agent(String),
    Done,
    Failed,
    Escalated,
}

impl Target {
    pub const TERMINALS: &[&str] = &["done", "failed", "escalated"];

    pub fn is_terminal(&self) -> bool {
        !matches!(self, Target::Agent(_))
    }

    pub fn agent(&self) -> Option<&str> {
        match self {
            Target::Agent(a) => Some(a),
            _ => None,
        }
    }
}

impl FromStr for Target {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "done" => Target::Done,
            "failed" => Target::Failed,
            "escalated" => Target::Escalated,
            other => Target::Agent(other.to_string()),
        })
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Target::Agent(a) => a,
            Target::Done => "done",
            Target::Failed => "failed",
            Target::Escalated => "escalated",
        })
    }
}

impl Serialize for Target {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// An external coding agent that a state runs instead of rawko's own agent loop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum External {
    /// A program that speaks the Agent Client Protocol on stdio; rawko is its client.
    Acp(ExternalCommand),
    /// A coding CLI's non-interactive mode: the prompt as `{prompt}` in an argument, or on
    /// stdin when no argument has it; its output is the state's raw result.
    Cli(ExternalCommand),
}

impl External {
    pub fn command(&self) -> &ExternalCommand {
        match self {
            External::Acp(c) | External::Cli(c) => c,
        }
    }

    /// `acp` or `cli`.
    pub fn kind(&self) -> &'static str {
        match self {
            External::Acp(_) => "acp",
            External::Cli(_) => "cli",
        }
    }
}

/// The program of an external agent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExternalCommand {
    /// A program name looked up in `PATH`, or a path (relative ones from the workspace).
    pub command: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of environment variables passed through from rawko's environment; nothing else
    /// of it reaches the program beyond the sandbox's allow-list.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// Per-state limits; `None` falls back to `config.yaml`'s `defaults.limits`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Limits {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Processes one native command of the agent may hold at once (the sandbox's default when
    /// unset).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub processes: Option<u64>,
}

impl Limits {
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout_ms.map(Duration::from_millis)
    }
}

/// The file formats agents are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Dialect {
    /// rawko YAML (`.yaml`, `.yml`).
    RawkoYaml,
    /// rawko Markdown: frontmatter plus a `## System Prompt` section or body.
    RawkoMarkdown,
    /// kodelet-style Markdown subagents.
    Kodelet,
    /// DocLoom `apiVersion: docloom.io/v1alpha1`, `kind: Agent`.
    Docloom,
    /// Claude Code subagent files.
    ClaudeCode,
    /// GitHub Copilot custom agents (`.github/agents/NAME.agent.md`).
    Copilot,
    /// opencode agents (`.opencode/agent/NAME.md`).
    Opencode,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::RawkoYaml => "rawko-yaml",
            Dialect::RawkoMarkdown => "rawko-markdown",
            Dialect::Kodelet => "kodelet",
            Dialect::Docloom => "docloom",
            Dialect::ClaudeCode => "claude-code",
            Dialect::Copilot => "copilot",
            Dialect::Opencode => "opencode",
        }
    }

    /// rawko's own dialects are strict: an unknown field is an error, not a warning.
    pub fn is_rawko(self) -> bool {
        matches!(self, Dialect::RawkoYaml | Dialect::RawkoMarkdown)
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a definition comes from, highest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentOrigin {
    /// Named on the command line (`rawko agents validate PATH`).
    File,
    /// The workspace's `.rawko/agents/`: may come from a stranger with the repository.
    Workspace,
    /// `$XDG_CONFIG_HOME/rawko/agents`.
    User,
    /// Shipped inside rawko.
    Builtin,
}

impl AgentOrigin {
    /// Whether the definition is the user's own or shipped with rawko, rather than brought by a
    /// workspace or named on the command line: only these may ask for `sandbox: full`.
    pub fn is_users_own(self) -> bool {
        matches!(self, AgentOrigin::User | AgentOrigin::Builtin)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AgentOrigin::File => "file",
            AgentOrigin::Workspace => "workspace",
            AgentOrigin::User => "user",
            AgentOrigin::Builtin => "builtin",
        }
    }
}

/// The file an agent was loaded from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentFile {
    /// The real path (built-ins: their path in rawko's source tree, not on disk).
    pub path: PathBuf,
    /// The path as shown in messages.
    pub display: String,
    pub origin: AgentOrigin,
    pub dialect: Dialect,
    /// Where the fields that cross-agent checks point at were written.
    #[serde(skip)]
    pub spans: Spans,
}

/// Positions kept for checks made after loading (transitions name agents in other files).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spans {
    pub name: Pos,
    pub on_success: Pos,
    pub on_failure: Pos,
    pub on_max_iterations: Pos,
    /// Where `sandbox:` was written, for the warning about `full` from a workspace.
    pub sandbox: Pos,
}

impl Spans {
    /// Where the transition for `event` (`onSuccess`, ...) was written.
    pub fn transition(&self, event: &str) -> Pos {
        match event {
            "onFailure" => self.on_failure,
            "onMaxIterations" => self.on_max_iterations,
            _ => self.on_success,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_tools_are_named_one_by_one_by_server_or_by_prefix() {
        let a = agent(
            Some(&["Read", "mcp__docs", "mcp__gh__get_*"]),
            &["mcp__docs__delete"],
        );
        assert!(a.may_call("mcp__docs__search"));
        assert!(!a.may_call("mcp__docs__delete"));
        assert!(!a.may_call("mcp__docsx__search"));
        assert!(a.may_call("mcp__gh__get_issue"));
        assert!(!a.may_call("mcp__gh__create_issue"));
        // `*` is for MCP names only; other tools are named exactly.
        let b = agent(Some(&["Re*"]), &[]);
        assert!(!b.may_call("Read"));
    }

    fn agent(allowed: Option<&[&str]>, blocked: &[&str]) -> Agent {
        Agent {
            name: "a".into(),
            display_name: None,
            description: None,
            when_to_use: None,
            system_prompt: "p".into(),
            model: ModelSettings::default(),
            tools: ToolPolicy {
                allowed: allowed.map(|l| l.iter().map(|s| s.to_string()).collect()),
                blocked: blocked.iter().map(|s| s.to_string()).collect(),
            },
            bash: BashPolicy::default(),
            command_tools: Vec::new(),
            parameters: Vec::new(),
            transitions: Transitions::default(),
            limits: Limits::default(),
            sandbox: None,
            network: false,
            output_schema: None,
            source: AgentFile {
                path: "a.yaml".into(),
                display: "a.yaml".into(),
                origin: AgentOrigin::File,
                dialect: Dialect::RawkoYaml,
                spans: Spans::default(),
            },
            acting_for: None,
            external: None,
        }
    }

    fn from(origin: AgentOrigin, name: &str, allowed: Option<&[&str]>) -> Agent {
        let mut a = agent(allowed, &[]);
        a.name = name.into();
        a.source.origin = origin;
        a
    }

    #[test]
    fn an_agent_called_by_another_gets_at_most_the_callers_grants() {
        let mut reader = from(AgentOrigin::User, "reader", Some(&["Read", "Grep", "dev"]));
        reader.bash.blocked_patterns = vec!["secret".into()];
        let mut dev = from(
            AgentOrigin::Builtin,
            "dev",
            Some(&["Read", "Write", "Bash"]),
        );
        dev.bash.allowed_commands = Some(vec!["cargo test".into(), "rm *".into()]);
        dev.network = true;
        let called = dev.on_behalf_of(&reader, Trust::Trusted, true);
        assert!(!called.can_write(), "{:?}", called.tools);
        assert!(called.may_call("Read") && !called.may_call("Grep"));
        assert_eq!(called.sandbox_mode(Trust::Trusted), Mode::ReadOnly);
        assert!(!called.network_allowed(Trust::Trusted));
        assert_eq!(called.bash.blocked_patterns, ["secret"]);
        assert_eq!(called.acting_for, None, "the caller is trusted");

        // A writing caller: the commands both allow, the lower mode.
        let mut lead = from(AgentOrigin::User, "lead", Some(&["Bash", "Write", "dev"]));
        lead.bash.allowed_commands = Some(vec!["cargo test".into()]);
        let called = dev.on_behalf_of(&lead, Trust::Trusted, true);
        assert!(called.can_write() && called.may_call("Write") && called.may_call("Read"));
        assert_eq!(
            called.bash.allowed_commands.as_deref(),
            Some(&["cargo test".to_string()][..])
        );
        assert_eq!(called.sandbox_mode(Trust::Trusted), Mode::WorkspaceWrite);
    }

    #[test]
    fn whatever_an_untrusted_agent_reaches_is_untrusted() {
        let helper = from(AgentOrigin::Workspace, "helper", Some(&["Read", "dev"]));
        let dev = from(
            AgentOrigin::Builtin,
            "dev",
            Some(&["Read", "Write", "Bash"]),
        );
        for call in [true, false] {
            let next = dev.on_behalf_of(&helper, Trust::Untrusted, call);
            assert_eq!(next.acting_for.as_deref(), Some("helper"));
            assert!(
                next.is_untrusted(Trust::Trusted),
                "even once the workspace is trusted"
            );
            assert_eq!(next.sandbox_mode(Trust::Untrusted), Mode::ReadOnly);
            // And it passes on: the first untrusted agent is named.
            let after = helper.on_behalf_of(&next, Trust::Untrusted, call);
            assert_eq!(after.acting_for.as_deref(), Some("helper"));
        }
        // A transition keeps the target's own grants when the source is trusted.
        let planner = from(AgentOrigin::Builtin, "planner", Some(&["Read"]));
        assert_eq!(dev.on_behalf_of(&planner, Trust::Untrusted, false), dev);
        // Trusted, the workspace's agent hands on nothing.
        assert_eq!(dev.on_behalf_of(&helper, Trust::Trusted, false), dev);
    }

    #[test]
    fn blocked_wins_and_finish_is_always_allowed() {
        let a = agent(Some(&["Read", "Write"]), &["Write", "finish"]);
        assert!(a.may_call("Read"));
        assert!(!a.may_call("Write"));
        assert!(!a.may_call("Grep"));
        assert!(a.may_call("finish"));
        assert!(agent(None, &[]).may_call("AnyPluginTool"));
    }

    #[test]
    fn read_only_means_no_write_edit_or_bash() {
        assert!(!agent(Some(&["Read", "Glob", "Grep", "LS"]), &[]).can_write());
        assert!(agent(Some(&["Read", "Bash"]), &[]).can_write());
        assert!(agent(None, &[]).can_write());
        assert!(!agent(None, &["Write", "Edit", "Bash"]).can_write());
    }

    /// An agent from `origin` asking for `sandbox` and `network`; `writes` picks its tools.
    fn asking(origin: AgentOrigin, writes: bool, sandbox: Option<Mode>, network: bool) -> Agent {
        let tools: &[&str] = if writes {
            &["Read", "Edit", "Bash"]
        } else {
            &["Read", "Grep"]
        };
        let mut a = agent(Some(tools), &[]);
        a.source.origin = origin;
        a.sandbox = sandbox;
        a.network = network;
        a
    }

    const ORIGINS: [AgentOrigin; 4] = [
        AgentOrigin::File,
        AgentOrigin::Workspace,
        AgentOrigin::User,
        AgentOrigin::Builtin,
    ];

    #[test]
    fn an_unset_sandbox_follows_the_tools() {
        for origin in ORIGINS {
            for trusted in [true, false] {
                let untrusted = origin == AgentOrigin::Workspace && !trusted;
                let w = asking(origin, true, None, false).sandbox_mode(trusted.into());
                let r = asking(origin, false, None, false).sandbox_mode(trusted.into());
                let want_w = if untrusted {
                    Mode::ReadOnly
                } else {
                    Mode::WorkspaceWrite
                };
                assert_eq!(w, want_w, "{origin:?} trusted={trusted}");
                assert_eq!(r, Mode::ReadOnly, "{origin:?} trusted={trusted}");
            }
        }
    }

    #[test]
    fn an_agent_may_narrow_its_sandbox_below_what_its_tools_need() {
        for origin in ORIGINS {
            let a = asking(origin, true, Some(Mode::ReadOnly), false);
            assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::ReadOnly, "{origin:?}");
            assert_eq!(
                a.sandbox_mode(Trust::Untrusted),
                Mode::ReadOnly,
                "{origin:?}"
            );
        }
        // Asking for workspace-write is honoured even without write tools (command tools
        // aside, it changes nothing the agent could not already do).
        let a = asking(AgentOrigin::User, false, Some(Mode::WorkspaceWrite), false);
        assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::WorkspaceWrite);
    }

    #[test]
    fn full_is_only_for_the_users_own_and_built_in_agents() {
        for origin in [AgentOrigin::User, AgentOrigin::Builtin] {
            for trusted in [true, false] {
                let a = asking(origin, false, Some(Mode::Full), false);
                assert_eq!(a.sandbox_mode(trusted.into()), Mode::Full, "{origin:?}");
            }
        }
        // A file named on the command line falls back as if it had asked for nothing.
        let a = asking(AgentOrigin::File, true, Some(Mode::Full), false);
        assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::WorkspaceWrite);
        assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::WorkspaceWrite);
        let a = asking(AgentOrigin::File, false, Some(Mode::Full), false);
        assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::ReadOnly);
    }

    /// The attacker's cases: a repository that brings an agent asking for everything.
    #[test]
    fn a_workspace_agent_never_gets_full_and_untrusted_gets_read_only() {
        let a = asking(AgentOrigin::Workspace, true, Some(Mode::Full), true);
        assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::WorkspaceWrite);
        assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::ReadOnly);
        let a = asking(AgentOrigin::Workspace, false, Some(Mode::Full), true);
        assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::ReadOnly);
        assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::ReadOnly);
        let a = asking(
            AgentOrigin::Workspace,
            true,
            Some(Mode::WorkspaceWrite),
            false,
        );
        assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::WorkspaceWrite);
        assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::ReadOnly);
    }

    #[test]
    fn network_needs_the_agent_to_ask_and_an_untrusted_workspace_never_gets_it() {
        for origin in ORIGINS {
            for trusted in [true, false] {
                let off = asking(origin, true, None, false);
                assert!(
                    !off.network_allowed(trusted.into()),
                    "{origin:?} trusted={trusted}"
                );
                let on = asking(origin, true, None, true);
                let untrusted = origin == AgentOrigin::Workspace && !trusted;
                assert_eq!(
                    on.network_allowed(trusted.into()),
                    !untrusted,
                    "{origin:?} trusted={trusted}"
                );
            }
        }
        // The attacker's case, spelt out: `network: on` from an untrusted workspace is ignored.
        let a = asking(AgentOrigin::Workspace, true, Some(Mode::Full), true);
        assert!(!a.network_allowed(Trust::Untrusted));
        assert!(a.network_allowed(Trust::Trusted));
    }

    #[test]
    fn placeholders_are_found_once_each() {
        let t = CommandTool {
            name: "t".into(),
            description: "d".into(),
            command: "c".into(),
            args: vec![
                "x".into(),
                "${SOURCE_PATH}".into(),
                "--out=${OUT}/${SOURCE_PATH}".into(),
                "${unclosed".into(),
            ],
        };
        assert_eq!(t.placeholders(), ["SOURCE_PATH", "OUT"]);
    }

    #[test]
    fn names_are_the_serialized_names() {
        use ParamType as T;
        use Provider as P;
        use ReasoningEffort as R;
        let names = |v: serde_json::Value| v.as_str().unwrap().to_string();
        for p in [P::OpenAi, P::Anthropic] {
            assert_eq!(p.as_str(), names(serde_json::json!(p)));
            assert_eq!(Provider::parse(p.as_str()), Some(p));
        }
        for r in [R::Low, R::Medium, R::High] {
            assert_eq!(r.as_str(), names(serde_json::json!(r)));
            assert_eq!(ReasoningEffort::parse(r.as_str()), Some(r));
        }
        for t in [T::String, T::Int, T::Bool] {
            assert_eq!(t.as_str(), names(serde_json::json!(t)));
            assert_eq!(ParamType::parse(t.as_str()), Some(t));
        }
    }
}
