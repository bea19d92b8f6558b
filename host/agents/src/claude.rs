//! Claude Code subagent files: `name`, `description`, `tools` as a comma-separated string and a
//! `model` alias in the frontmatter; the body is the system prompt.
//!
//! These are the most widely shared agent files, so they load unchanged: unknown fields are
//! warnings, a missing name falls back to the file name, `MultiEdit` maps to `Edit`, and a
//! `Bash(git diff:*)` entry becomes the `Bash` tool with a `git diff *` command pattern.

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness};
use super::diag::Problems;
use super::kodelet::name_or_stem;
use super::markdown;
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
    let name = name_or_stem(&mut f, file, &mut spans, p);
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
            if !names.iter().any(|n| n.value == tool) {
                names.push(Spanned::new(tool, t.pos));
            }
        }
        validate::check_tool_names(&names, false, p);
        names.into_iter().map(|n| n.value).collect::<Vec<_>>()
    });
    let model = f.string("model", p).and_then(|m| model_of(&m, p));
    // Claude Code's UI colour: known, not used.
    let _ = f.node("color");
    f.finish(Strictness::Lenient, p);

    let system_prompt = markdown::body_prompt(body, body_line, p);
    if p.has_errors() {
        return None;
    }
    Some(Agent::subagent(
        name?,
        description,
        system_prompt,
        model.unwrap_or_default(),
        tools,
        (!commands.is_empty()).then_some(commands),
        file.source(Dialect::ClaudeCode, spans),
    ))
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
