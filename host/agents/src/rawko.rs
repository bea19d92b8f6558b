//! rawko's own dialects: YAML, and Markdown with the same fields as frontmatter.
//!
//! The types below describe a rawko YAML agent file. The decoder fills them from the positioned
//! YAML tree, and the committed JSON Schema (`agents/schema/rawko-agent.schema.json`, which
//! editors use through the `yaml-language-server` comment in each built-in file) is generated
//! from them, so the schema and the loader describe the same thing. Both dialects are strict:
//! an unknown field is an error, since a misspelt key silently ignored is a setting the user
//! believes in and does not have.

use rawko_capability::Mode;
use rawko_config::Trust;
use schemars::JsonSchema;

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness};
use super::diag::{Pos, Problems, did_you_mean};
use super::markdown;
use super::model::{
    Agent, AgentOrigin, BashPolicy, Dialect, Limits, ModelSettings, Spans, ToolPolicy, Transitions,
};
use super::validate;
use super::yaml::Node;

/// Where the committed schema lives, relative to the `agents/` directory.
pub const SCHEMA_PATH: &str = "schema/rawko-agent.schema.json";

/// A rawko YAML agent definition.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(
    title = "rawko agent",
    description = "An agent definition for rawko: one state of the task state machine. See `rawko agents show NAME` for the built-in examples."
)]
pub struct AgentFile {
    /// The agent's unique name: letters, digits, '-' and '_'. It names the agent's state and
    /// the agent as a tool other agents can call.
    #[schemars(pattern(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"))]
    pub name: String,
    /// A friendlier name to show people.
    pub display_name: Option<String>,
    /// When the arbiter should hand the task to this agent.
    pub when_to_use: Option<String>,
    /// What the agent is told: its role, method and rules. For an external agent (`acp` or
    /// `cli`), optional: it is put before the task in the prompt the agent gets.
    pub system_prompt: Option<String>,
    /// The adapter instance from config.yaml that serves this agent (default: `defaults.adapter`).
    pub adapter: Option<String>,
    pub tools: Option<ToolsSection>,
    pub transitions: TransitionsSection,
    pub limits: Option<LimitsSection>,
    /// How far the kernel confines the programs this agent runs (Bash, command tools).
    /// Default: workspace-write when the agent may write, else read-only.
    #[schemars(with = "Option<SandboxSetting>")]
    pub sandbox: Option<Mode>,
    /// Whether the programs this agent runs may use the network (default: off). Ignored for
    /// the agents of a workspace you have not trusted.
    #[schemars(with = "Option<NetworkSetting>")]
    pub network: Option<bool>,
    /// A JSON Schema the structured output of the agent's finish call must satisfy.
    pub output_schema: Option<serde_json::Map<String, serde_json::Value>>,
    /// Run an external agent that speaks the Agent Client Protocol on stdio, in this state's
    /// sandbox, instead of rawko's own agent loop. rawko serves its file and terminal requests
    /// under this agent's tools. With `adapter` set, that model turns the agent's final message
    /// into the outcome; without it, a clean end of turn is success.
    pub acp: Option<ExternalSection>,
    /// Run a coding CLI's non-interactive mode (such as `claude -p {prompt}`) in this state's
    /// sandbox: `{prompt}` in an argument is replaced by the prompt, which otherwise goes on
    /// stdin. Its output is the state's result (through `adapter` when set).
    pub cli: Option<ExternalSection>,
}

/// An external agent's program.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalSection {
    /// A program name found in PATH, or a path (a relative one from the workspace root).
    pub command: String,
    pub args: Option<Vec<String>>,
    /// Names of environment variables passed to the program; nothing else of your environment
    /// is, beyond the sandbox's allow-list (PATH, HOME, LANG, ...).
    pub env: Option<Vec<String>>,
}

// The schema's view of `sandbox` and `network`: the loader reads `Mode` and a switch, and a
// test keeps the mode names here in step with `Mode::ALL`.

/// A kernel sandbox mode.
#[derive(JsonSchema)]
#[serde(rename_all = "kebab-case")]
#[allow(dead_code)] // only describes the schema
enum SandboxSetting {
    /// Reads limited to the workspace and the system and toolchain paths a build needs; no
    /// writes except a private temporary directory.
    ReadOnly,
    /// The same reads; writes inside the workspace too, never to `.git` internals or `.rawko`.
    WorkspaceWrite,
    /// No kernel confinement. Only for your own agents ($XDG_CONFIG_HOME/rawko/agents): from
    /// a workspace it runs as workspace-write (read-only if it may not write).
    Full,
}

/// `on` or `off` (or true or false).
#[derive(JsonSchema)]
#[serde(untagged)]
#[allow(dead_code)] // only describes the schema
enum NetworkSetting {
    Bool(bool),
    Word(OnOff),
}

#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // only describes the schema
enum OnOff {
    On,
    Off,
}

/// Which tools the agent may call.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolsSection {
    /// Only these tools (`Read`, `Write`, `Edit`, `Glob`, `Grep`, `LS`, `Bash`, `Git`, a plugin's
    /// tool, or another agent's name). Leave out to allow every tool. `finish` is always allowed.
    pub allowed: Option<Vec<String>>,
    /// Never these tools; wins over `allowed`.
    pub blocked: Option<Vec<String>>,
    pub bash_filter: Option<BashFilterSection>,
}

/// What the `Bash` tool may run for this agent, on top of the configured filter chain.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BashFilterSection {
    /// Command patterns, such as `git status` or `cargo test *`. Leave out to let the filter
    /// chain's defaults decide; an empty list allows no command.
    pub allowed_commands: Option<Vec<String>>,
    /// Regular expressions; a command matching any of them is denied.
    pub blocked_patterns: Option<Vec<String>>,
}

/// Where the task goes when this agent's state ends: another agent's name, or `done`,
/// `failed` or `escalated`.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TransitionsSection {
    /// After the agent finishes with success.
    pub on_success: String,
    /// After the agent finishes with failure (default: the arbiter retries, then escalates).
    pub on_failure: Option<String>,
    /// After the agent used up `limits.maxIterations`.
    pub on_max_iterations: Option<String>,
}

/// Per-state limits; unset ones come from `defaults.limits` in config.yaml.
#[derive(Debug, Clone, Default, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LimitsSection {
    /// Model round trips before the state ends with `onMaxIterations`.
    #[schemars(range(min = 1, max = 10000))]
    pub max_iterations: Option<u32>,
    /// Wall-clock limit for the state, in milliseconds.
    #[schemars(range(min = 1, max = 86400000))]
    pub timeout: Option<u64>,
    /// Processes one of the agent's native commands may hold at once (default 512).
    #[schemars(range(min = 1, max = 65536))]
    pub processes: Option<u64>,
}

/// Longest per-state timeout: a day, in milliseconds.
const MAX_TIMEOUT_MS: u64 = 86_400_000;
const MAX_ITERATIONS: u64 = 10_000;
/// Most processes an agent may give its commands.
const MAX_PROCESSES: u64 = 65_536;

/// The JSON Schema of [`AgentFile`], as committed.
pub fn schema_json() -> String {
    let schema = schemars::generate::SchemaSettings::draft07()
        .into_generator()
        .into_root_schema_for::<AgentFile>();
    // Keys sorted whatever serde_json's `preserve_order` (which another crate in the build may
    // turn on): the committed file is the same from every build.
    let value = rawko_config::canonical::sorted(
        serde_json::to_value(&schema).expect("a schema serializes"),
    );
    let mut text = serde_json::to_string_pretty(&value).expect("a schema serializes");
    text.push('\n');
    text
}

/// Decode a rawko YAML file's tree.
pub fn decode_yaml(root: &Node, file: &FileInfo<'_>, p: &mut Problems) -> Option<Agent> {
    let (parsed, spans) = decode_fields(root, None, p)?;
    finish(parsed, spans, Dialect::RawkoYaml, file, p)
}

/// Decode a rawko Markdown file: frontmatter tree plus body.
pub fn decode_markdown(
    root: &Node,
    body: &str,
    body_line: usize,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    let from_body = markdown::section(body, "System Prompt")
        .map(|s| (s, "the '## System Prompt' section"))
        .unwrap_or((body, "the body"));
    let body_prompt = Some(from_body.0.trim()).filter(|s| !s.is_empty());
    let (parsed, spans) = decode_fields(root, Some((body_prompt, body_line)), p)?;
    finish(parsed, spans, Dialect::RawkoMarkdown, file, p)
}

/// Read the fields shared by both dialects. For Markdown, `body` is the prompt found in the
/// body (if any) and the line it starts on.
fn decode_fields(
    root: &Node,
    body: Option<(Option<&str>, usize)>,
    p: &mut Problems,
) -> Option<(AgentFile, Spans)> {
    let mut f = Fields::of(root, "the agent", p)?;
    let mut spans = Spans::default();
    let name = f.required_string("name", p);
    if let Some(n) = &name {
        spans.name = n.pos;
        validate::check_name(n, p);
    }
    let display_name = f.string("displayName", p).map(|s| s.value);
    let when_to_use = f.string("whenToUse", p).map(|s| s.value);
    let external = ["acp", "cli"].iter().any(|k| f.has(k));
    let system_prompt = match body {
        None if external => f.string("systemPrompt", p).map(|s| s.value),
        None => f.required_string("systemPrompt", p).map(|s| s.value),
        Some((body_prompt, body_line)) => match (f.string("systemPrompt", p), body_prompt) {
            (Some(s), None) => Some(s.value),
            (None, Some(b)) => Some(b.to_string()),
            (Some(s), Some(_)) => {
                p.error(
                    s.pos,
                    "the system prompt is given twice: in 'systemPrompt' and in the body",
                    Some(format!("keep one; the body starts on line {body_line}")),
                );
                None
            }
            (None, None) if external => None,
            (None, None) => {
                if f.has("systemPrompt") {
                    if !f.is_set("systemPrompt") {
                        f.missing("systemPrompt", p, None);
                    }
                } else {
                    p.error(
                        Pos::START,
                        "no system prompt: the body is empty and there is no 'systemPrompt' field",
                        Some("write the prompt below the frontmatter, or under a '## System Prompt' heading".into()),
                    );
                }
                None
            }
        },
    };
    if let Some(sp) = &system_prompt
        && sp.trim().is_empty()
    {
        p.error(f.pos(), "the system prompt is empty", None);
    }
    let adapter = f.string("adapter", p).map(|s| s.value);

    let tools = f.node("tools").and_then(|n| decode_tools(n, p));
    let transitions = match f.node("transitions") {
        Some(n) => decode_transitions(n, &mut spans, p),
        None => {
            f.missing(
                "transitions",
                p,
                Some("at least 'transitions: {onSuccess: done}'".into()),
            );
            None
        }
    };
    let limits = f.node("limits").and_then(|n| decode_limits(n, p));
    let sandbox = f.node("sandbox").and_then(|n| {
        spans.sandbox = n.pos;
        decode_sandbox(n, p)
    });
    let network = f.on_off("network", p).map(|s| s.value);
    let output_schema = f.node("outputSchema").and_then(|n| {
        let json = n.to_json();
        if !validate::check_output_schema(&json, n.pos, p) {
            return None;
        }
        match json {
            serde_json::Value::Object(m) => Some(m),
            _ => None,
        }
    });
    let acp = f.node("acp").and_then(|n| decode_external(n, "'acp'", p));
    let cli_node = f.node("cli");
    let cli = cli_node.and_then(|n| decode_external(n, "'cli'", p));
    if let (Some(_), Some(n)) = (&acp, cli_node) {
        p.error(
            n.pos,
            "an agent is either 'acp' or 'cli', not both",
            Some("keep the one its program speaks".into()),
        );
    }
    f.finish(Strictness::Strict, p);
    if !external && system_prompt.is_none() {
        return None;
    }

    Some((
        AgentFile {
            name: name?.value,
            display_name,
            when_to_use,
            system_prompt,
            adapter,
            tools,
            transitions: transitions?,
            limits,
            sandbox,
            network,
            output_schema,
            acp,
            cli,
        },
        spans,
    ))
}

/// `acp:` or `cli:`: `{command, args?, env?}`.
fn decode_external(node: &Node, what: &str, p: &mut Problems) -> Option<ExternalSection> {
    let mut f = Fields::of(node, what, p)?;
    let command = f.required_string("command", p);
    if let Some(c) = &command
        && (c.value.trim().is_empty() || c.value.contains('\0'))
    {
        p.error(c.pos, format!("{what}.command is empty"), None);
    }
    let args = f.string_list("args", false, p).map(unspan);
    let env = f.string_list("env", true, p);
    if let Some(env) = &env {
        for v in &env.value {
            let ok = !v.value.is_empty()
                && !v.value.starts_with(|c: char| c.is_ascii_digit())
                && v.value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                p.error(
                    v.pos,
                    format!("'{}' is not an environment variable name", v.value.escape_debug()),
                    Some("list the names of variables to pass through, such as ANTHROPIC_API_KEY; values come from your environment".into()),
                );
            }
        }
    }
    f.finish(Strictness::Strict, p);
    Some(ExternalSection {
        command: command?.value,
        args,
        env: env.map(unspan),
    })
}

/// `sandbox: read-only | workspace-write | full`.
fn decode_sandbox(node: &Node, p: &mut Problems) -> Option<Mode> {
    let names = Mode::ALL.map(Mode::as_str);
    let Some(text) = node.as_str() else {
        p.error(
            node.pos,
            format!(
                "'sandbox' must be {}, found {}",
                names.join(", "),
                node.kind()
            ),
            None,
        );
        return None;
    };
    match text.parse::<Mode>() {
        Ok(mode) => Some(mode),
        Err(_) => {
            let hint = match did_you_mean(text, &names) {
                Some(s) => format!("did you mean '{s}'?"),
                None => format!("one of: {}", names.join(", ")),
            };
            p.error(
                node.pos,
                format!("unknown sandbox mode '{}'", text.escape_debug()),
                Some(hint),
            );
            None
        }
    }
}

fn decode_tools(node: &Node, p: &mut Problems) -> Option<ToolsSection> {
    let mut f = Fields::of(node, "'tools'", p)?;
    let allowed = f.string_list("allowed", false, p);
    let blocked = f.string_list("blocked", false, p);
    for list in [&allowed, &blocked].into_iter().flatten() {
        validate::check_tool_names(&list.value, true, p);
    }
    if let (Some(a), Some(b)) = (&allowed, &blocked) {
        for t in &b.value {
            if a.value.iter().any(|x| x.value == t.value) {
                p.warn(
                    t.pos,
                    format!("'{}' is both allowed and blocked", t.value),
                    Some("blocked wins; remove it from one list".into()),
                );
            }
        }
    }
    let bash_filter = f.node("bashFilter").and_then(|n| {
        let mut b = Fields::of(n, "'bashFilter'", p)?;
        let allowed_commands = b.string_list("allowedCommands", false, p);
        let blocked_patterns = b.string_list("blockedPatterns", false, p);
        if let Some(c) = &allowed_commands {
            validate::check_command_patterns(&c.value, p);
        }
        if let Some(pats) = &blocked_patterns {
            validate::check_blocked_patterns(&pats.value, p);
        }
        b.finish(Strictness::Strict, p);
        Some((
            n.pos,
            BashFilterSection {
                allowed_commands: allowed_commands.map(unspan),
                blocked_patterns: blocked_patterns.map(unspan),
            },
        ))
    });
    f.finish(Strictness::Strict, p);
    let tools = ToolsSection {
        allowed: allowed.map(unspan),
        blocked: blocked.map(unspan),
        bash_filter: bash_filter.as_ref().map(|(_, b)| b.clone()),
    };
    if let Some((pos, _)) = bash_filter {
        let policy = ToolPolicy {
            allowed: tools.allowed.clone(),
            blocked: tools.blocked.clone().unwrap_or_default(),
        };
        if !policy.may_call("Bash") {
            p.warn(
                pos,
                "'bashFilter' has no effect: this agent may not call Bash",
                Some("add Bash to 'tools.allowed', or remove 'bashFilter'".into()),
            );
        }
    }
    Some(tools)
}

fn unspan(list: Spanned<Vec<Spanned<String>>>) -> Vec<String> {
    list.value.into_iter().map(|s| s.value).collect()
}

fn decode_transitions(
    node: &Node,
    spans: &mut Spans,
    p: &mut Problems,
) -> Option<TransitionsSection> {
    let mut f = Fields::of(node, "'transitions'", p)?;
    let read = |f: &mut Fields<'_>, key: &'static str, slot: &mut Pos, p: &mut Problems| {
        let s = f.string(key, p)?;
        *slot = s.pos;
        validate::check_target(&s, key, p).map(|_| s.value)
    };
    let on_success = read(&mut f, "onSuccess", &mut spans.on_success, p);
    if on_success.is_none() && !f.is_set("onSuccess") {
        f.missing(
            "onSuccess",
            p,
            Some("name the next agent, or 'done' to end the task".into()),
        );
    }
    let on_failure = read(&mut f, "onFailure", &mut spans.on_failure, p);
    let on_max_iterations = read(&mut f, "onMaxIterations", &mut spans.on_max_iterations, p);
    f.finish(Strictness::Strict, p);
    Some(TransitionsSection {
        on_success: on_success?,
        on_failure,
        on_max_iterations,
    })
}

fn decode_limits(node: &Node, p: &mut Problems) -> Option<LimitsSection> {
    let mut f = Fields::of(node, "'limits'", p)?;
    let max_iterations = f
        .uint("maxIterations", 1, MAX_ITERATIONS, p)
        .map(|s| s.value as u32);
    let timeout = f.uint("timeout", 1, MAX_TIMEOUT_MS, p);
    let processes = f.uint("processes", 1, MAX_PROCESSES, p).map(|s| s.value);
    if let Some(t) = &timeout
        && t.value < 1000
    {
        p.warn(
            t.pos,
            format!("timeout {} is in milliseconds: under a second", t.value),
            Some(format!("for {} seconds write {}", t.value, t.value * 1000)),
        );
    }
    f.finish(Strictness::Strict, p);
    Some(LimitsSection {
        max_iterations,
        timeout: timeout.map(|t| t.value),
        processes,
    })
}

/// Turn the decoded file into the model. Returns `None` if anything was wrong.
fn finish(
    file_fields: AgentFile,
    spans: Spans,
    dialect: Dialect,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    if p.has_errors() {
        return None;
    }
    let AgentFile {
        name,
        display_name,
        when_to_use,
        system_prompt,
        adapter,
        tools,
        transitions,
        limits,
        sandbox,
        network,
        output_schema,
        acp,
        cli,
    } = file_fields;
    let command = |e: ExternalSection| super::model::ExternalCommand {
        command: e.command,
        args: e.args.unwrap_or_default(),
        env: e.env.unwrap_or_default(),
    };
    let external = match (acp, cli) {
        (Some(a), _) => Some(super::model::External::Acp(command(a))),
        (None, Some(c)) => Some(super::model::External::Cli(command(c))),
        (None, None) => None,
    };
    let tools = tools.unwrap_or_default();
    let bash = tools.bash_filter.unwrap_or_default();
    let target = |s: String| s.parse().expect("infallible");
    let limits = limits.unwrap_or_default();
    let sandbox_pos = spans.sandbox;
    let agent = Agent {
        name,
        display_name,
        description: None,
        when_to_use,
        system_prompt: system_prompt.unwrap_or_default().trim().to_string(),
        model: ModelSettings {
            adapter,
            ..ModelSettings::default()
        },
        tools: ToolPolicy {
            allowed: tools.allowed,
            blocked: tools.blocked.unwrap_or_default(),
        },
        bash: BashPolicy {
            allowed_commands: bash.allowed_commands,
            blocked_patterns: bash.blocked_patterns.unwrap_or_default(),
        },
        command_tools: Vec::new(),
        parameters: Vec::new(),
        transitions: Transitions {
            on_success: target(transitions.on_success),
            on_failure: transitions.on_failure.map(target),
            on_max_iterations: transitions.on_max_iterations.map(target),
        },
        limits: Limits {
            max_iterations: limits.max_iterations,
            timeout_ms: limits.timeout,
            processes: limits.processes,
        },
        sandbox,
        network: network.unwrap_or(false),
        output_schema: output_schema.map(serde_json::Value::Object),
        source: file.source(dialect, spans),
        acting_for: None,
        external,
    };
    if agent.sandbox == Some(Mode::Full) && agent.source.origin == AgentOrigin::Workspace {
        let runs = agent.sandbox_mode(Trust::Trusted);
        let untrusted = if runs == Mode::ReadOnly {
            ""
        } else {
            ", and read-only while the workspace is not trusted"
        };
        p.warn(
            sandbox_pos,
            format!("a workspace agent cannot have 'sandbox: full': it will run in {runs}{untrusted}"),
            Some(
                "full (no kernel sandbox) is only for your own agents, in $XDG_CONFIG_HOME/rawko/agents".into(),
            ),
        );
    }
    Some(agent)
}

/// The keys each mapping of the rawko dialect accepts, for the test that keeps the schema and
/// the decoder in step.
#[cfg(test)]
pub(crate) const KEYS: &[(&str, &[&str])] = &[
    (
        "",
        &[
            "name",
            "displayName",
            "whenToUse",
            "systemPrompt",
            "adapter",
            "tools",
            "transitions",
            "limits",
            "sandbox",
            "network",
            "outputSchema",
            "acp",
            "cli",
        ],
    ),
    ("acp", &["command", "args", "env"]),
    ("cli", &["command", "args", "env"]),
    ("tools", &["allowed", "blocked", "bashFilter"]),
    ("bashFilter", &["allowedCommands", "blockedPatterns"]),
    (
        "transitions",
        &["onSuccess", "onFailure", "onMaxIterations"],
    ),
    ("limits", &["maxIterations", "timeout", "processes"]),
];
