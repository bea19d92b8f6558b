//! Claude Code subagent files: `name`, `description`, `tools` as a comma-separated string and a
//! `model` alias in the frontmatter; the body is the system prompt.
//!
//! These are the most widely shared agent files, so they load unchanged: unknown fields are
//! warnings, a missing name falls back to the file name (dots in a name become `-`),
//! `MultiEdit` maps to `Edit`, a `Bash(git diff:*)` entry becomes the `Bash` tool with a
//! `git diff *` command pattern, `disallowedTools` blocks tools (and `Bash(rm:*)` there blocks
//! those commands), and Claude Code tools rawko does not have are named in a warning.

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness};
use super::diag::{Problems, did_you_mean};
use super::markdown;
use super::model::builtin_tools;
use super::model::{Agent, Dialect, ModelSettings, Provider, Spans};
use super::validate;
use super::yaml::Node;

/// Claude Code's model aliases.
const ALIASES: &[&str] = &["sonnet", "opus", "haiku", "inherit"];

pub fn decode(
    root: &Node,
    body: &str,
    body_line: usize,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    let mut f = Fields::of(root, "the frontmatter", p)?;
    let mut spans = Spans::default();
    if !f.has("name") {
        p.warn(
            f.pos(),
            "no 'name'; the agent is named after its file",
            Some(format!("add 'name: {}'", file.stem())),
        );
    }
    let name = dotted_name(&mut f, file, &mut spans, p);
    let description = f.string("description", p).map(|s| s.value);
    if description.is_none() && !f.is_set("description") {
        p.warn(
            f.pos(),
            "no 'description': other agents and the arbiter will not know when to use it",
            None,
        );
    }
    let mut commands: Vec<String> = Vec::new();
    let tools = f.string_list("tools", true, p).map(|l| {
        let mut names: Vec<Spanned<String>> = Vec::new();
        for t in l.value {
            let (tool, command) = split_tool(&t.value);
            match command {
                Some(c) => commands.push(c),
                // In Claude Code a bare `Bash` runs any command; rawko gives it its default
                // command policy instead, and says so.
                None if tool == "Bash" => {
                    let defaults = super::builtin::default_commands();
                    p.warn(
                        t.pos,
                        format!(
                            "bare 'Bash' runs any command in Claude Code; here it gets rawko's \
                             default command policy ({})",
                            defaults.join(", ")
                        ),
                        Some("list the commands it needs, as 'Bash(npm test:*)'".into()),
                    );
                    for c in defaults {
                        if !commands.contains(c) {
                            commands.push(c.clone());
                        }
                    }
                }
                None => {}
            }
            let Some(tool) = map_tool(&tool, t.pos, p) else {
                continue;
            };
            if !names.iter().any(|n| n.value == tool) {
                names.push(Spanned::new(tool, t.pos));
            }
        }
        validate::check_tool_names(&names, false, p);
        names.into_iter().map(|n| n.value).collect::<Vec<_>>()
    });
    let mut blocked: Vec<String> = Vec::new();
    let mut blocked_patterns: Vec<String> = Vec::new();
    if let Some(l) = f.string_list("disallowedTools", true, p) {
        for t in l.value {
            match split_tool(&t.value) {
                (tool, Some(command)) => {
                    let prefix = command.trim_end_matches(" *").trim();
                    blocked_patterns.push(format!(r"^\s*{}(\s|$)", regex_syntax::escape(prefix)));
                    if tool != "Bash" {
                        blocked.push(tool);
                    }
                }
                (tool, None) => {
                    if let Some(tool) = map_tool(&tool, t.pos, p)
                        && !blocked.contains(&tool)
                    {
                        blocked.push(tool);
                    }
                }
            }
        }
    }
    let model = f.string("model", p).and_then(|m| model_of(&m, p));
    // Claude Code's UI colour: known, not used.
    let _ = f.node("color");
    f.finish(Strictness::Lenient, p);

    let system_prompt = markdown::body_prompt(body, body_line, p);
    if p.has_errors() {
        return None;
    }
    let mut agent = Agent::subagent(
        name?,
        description,
        system_prompt,
        model.unwrap_or_default(),
        tools,
        (!commands.is_empty()).then_some(commands),
        file.source(Dialect::ClaudeCode, spans),
    );
    agent.tools.blocked = blocked;
    agent.bash.blocked_patterns = blocked_patterns;
    Some(agent)
}

/// The agent's name: `name`, else the file name; dots (which Claude Code allows and rawko's
/// state and tool names cannot have) become `-`, with a warning that says so.
fn dotted_name(
    f: &mut Fields<'_>,
    file: &FileInfo<'_>,
    spans: &mut Spans,
    p: &mut Problems,
) -> Option<String> {
    super::foreign::fixed_name(
        f,
        file.stem(),
        spans,
        p,
        "has dots, which rawko's agent names cannot have",
        |name| name.replace('.', "-"),
    )
}

/// Claude Code's own tools that rawko has under another name (`Some`) or not at all (`None`).
const CLAUDE_TOOLS: &[(&str, Option<&str>)] = &[
    ("MultiEdit", Some("Edit")),
    ("NotebookEdit", Some("Edit")),
    ("NotebookRead", Some("Read")),
    ("WebFetch", None),
    ("WebSearch", None),
    ("Task", None),
    ("TodoWrite", None),
    ("TodoRead", None),
    ("BashOutput", None),
    ("KillBash", None),
    ("KillShell", None),
    ("ExitPlanMode", None),
    ("SlashCommand", None),
    ("Skill", None),
    ("AskUserQuestion", None),
];

/// A tool name as rawko knows it. Claude Code tools rawko has under another name are mapped
/// (with a warning where the mapping is not exact); those it lacks are dropped with a warning;
/// MCP tools and other names are kept (a plugin, an MCP server or an agent may provide them),
/// with a warning when rawko does not provide them itself.
fn map_tool(name: &str, pos: super::diag::Pos, p: &mut Problems) -> Option<String> {
    let builtin = builtin_tools();
    if builtin.contains(&name) {
        return Some(name.to_string());
    }
    if let Some((_, mapped)) = CLAUDE_TOOLS.iter().find(|(n, _)| *n == name) {
        return match mapped {
            Some(to) => {
                if name != "MultiEdit" {
                    p.warn(
                        pos,
                        format!("Claude Code's '{name}' is '{to}' in rawko"),
                        None,
                    );
                }
                Some(to.to_string())
            }
            None => {
                p.warn(
                    pos,
                    format!("rawko has no '{name}' tool; the agent does without it"),
                    Some("remove it, or install a plugin that provides it".into()),
                );
                None
            }
        };
    }
    if let Some(rest) = name.strip_prefix("mcp__") {
        let server = rest.split("__").next().unwrap_or(rest);
        p.warn(
            pos,
            format!(
                "'{name}' is a tool of the MCP server '{server}': the agent has it only when that \
                 server is configured for rawko"
            ),
            None,
        );
        return Some(name.to_string());
    }
    if builtin.iter().any(|b| b.eq_ignore_ascii_case(name))
        || did_you_mean(name, &builtin).is_some()
    {
        // A near miss of a built-in tool: check_tool_names says which.
        return Some(name.to_string());
    }
    p.warn(
        pos,
        format!("'{name}' is not a rawko tool; it must come from a plugin or name an agent"),
        Some(format!("rawko's tools are {}", builtin.join(", "))),
    );
    Some(name.to_string())
}

/// `Read` -> (`Read`, None); `Bash(git diff:*)` -> (`Bash`, `git diff *`); `MultiEdit` -> `Edit`.
fn split_tool(entry: &str) -> (String, Option<String>) {
    if let Some(inner) = entry
        .strip_prefix("Bash(")
        .and_then(|r| r.strip_suffix(')'))
    {
        let inner = inner.trim();
        let pattern = match inner.strip_suffix(":*") {
            Some(prefix) => format!("{} *", prefix.trim_end()),
            None => inner.to_string(),
        };
        return ("Bash".into(), (!pattern.is_empty()).then_some(pattern));
    }
    let name = match entry {
        "MultiEdit" => "Edit",
        other => other,
    };
    (name.to_string(), None)
}

fn model_of(m: &Spanned<String>, p: &mut Problems) -> Option<ModelSettings> {
    let anthropic = |model: &str| ModelSettings {
        provider: Some(Provider::Anthropic),
        model: Some(model.to_string()),
        ..ModelSettings::default()
    };
    match m.value.as_str() {
        "inherit" => None,
        alias if ALIASES.contains(&alias) => Some(anthropic(alias)),
        id if id.starts_with("claude-") => Some(anthropic(id)),
        other => {
            p.warn(
                m.pos,
                format!("model '{other}' is not a Claude model; the default adapter is used"),
                Some(format!(
                    "one of: {}, or a claude-* model id",
                    ALIASES.join(", ")
                )),
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split_tool;

    #[test]
    fn bash_permissions_become_command_patterns() {
        assert_eq!(split_tool("Read"), ("Read".into(), None));
        assert_eq!(split_tool("MultiEdit"), ("Edit".into(), None));
        assert_eq!(
            split_tool("Bash(git diff:*)"),
            ("Bash".into(), Some("git diff *".into()))
        );
        assert_eq!(
            split_tool("Bash(npm test)"),
            ("Bash".into(), Some("npm test".into()))
        );
    }
}
