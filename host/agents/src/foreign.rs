//! Two more Markdown dialects, recognised by where the file is:
//!
//! - GitHub Copilot custom agents, `.github/agents/NAME.agent.md`: `name` (a title; the agent
//!   is called by its file), `description`, `tools` (Copilot's aliases `read`, `edit`, `search`, `execute`, ..., and MCP tools as
//!   `server/tool`), `model`; the body is the prompt.
//! - opencode agents, `.opencode/agent/NAME.md` or `.opencode/agents/NAME.md`, also called by
//!   their file: `description`,
//!   `model` as `provider/model`, `tools` as a map of names to `true`/`false`, `permission`
//!   (`edit`, `bash`: `allow`, `ask`, `deny`, or per-command rules); the body is the prompt.
//!
//! Both are foreign and read leniently: what rawko has no use for is a warning, what rawko
//! cannot honour (a tool it does not have, `ask`) is named in one, and the stricter reading is
//! chosen whenever rawko must choose (`ask` denies).

use std::path::Path;

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness};
use super::diag::{Pos, Problems};
use super::markdown;
use super::model::{Agent, Dialect, ModelSettings, Provider, Spans, builtin_tools};
use super::validate;
use super::yaml::{Node, Resolved, Value};

/// The dialect a Markdown file's location says it is written in, if any (kodelet's recipes
/// folder included, whose files need no field only kodelet has).
pub fn dialect_of(path: &Path) -> Option<Dialect> {
    let parent = path.parent()?;
    let name = path.file_name()?.to_str()?;
    if parent.ends_with(".github/agents") && name.ends_with(".agent.md") {
        Some(Dialect::Copilot)
    } else if parent.ends_with(".opencode/agent") || parent.ends_with(".opencode/agents") {
        Some(Dialect::Opencode)
    } else if in_recipes_dir(path) {
        Some(Dialect::Kodelet)
    } else {
        None
    }
}

/// Whether `path` lies in a kodelet recipes folder (`.kodelet/recipes/`, at any depth).
pub fn in_recipes_dir(path: &Path) -> bool {
    path.ancestors()
        .skip(1)
        .any(|a| a.ends_with(".kodelet/recipes"))
}

/// The file name an agent of this file is called by: without `.agent` for Copilot's
/// `NAME.agent.md`.
pub(crate) fn agent_stem<'f>(file: &'f FileInfo<'_>) -> &'f str {
    let stem = file.stem();
    stem.strip_suffix(".agent").unwrap_or(stem)
}

/// The name an agent gets in a dialect that calls agents by their file (Copilot, opencode,
/// kodelet's recipes), given its file name and its `name` field, with the title to show people
/// when that field is one ("Backend Developer (后端开发者)"). With `field_first` (kodelet files
/// other than recipes) a `name` that is a valid agent name wins. When neither is a valid
/// name, the file name with what a name cannot have made `-`, and `true` to say so.
pub(crate) fn by_file(
    stem: &str,
    given: Option<&str>,
    field_first: bool,
) -> (String, Option<String>, bool) {
    let given = given.map(str::trim).filter(|g| !g.is_empty());
    let title = |name: &str| given.filter(|g| *g != name).map(str::to_string);
    match given {
        Some(g) if field_first && validate::is_valid_name(g) => (g.to_string(), None, false),
        _ if validate::is_valid_name(stem) => (stem.to_string(), title(stem), false),
        Some(g) if validate::is_valid_name(g) => (g.to_string(), None, false),
        _ => {
            let fixed = ascii_name(stem);
            let shown = title(&fixed);
            (fixed, shown, true)
        }
    }
}

/// `s` with every character an agent name cannot have made `-`, lower case.
fn ascii_name(s: &str) -> String {
    s.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect()
}

/// An agent's name and the title to show people, when it has one.
pub(crate) type Named = (String, Option<String>);

/// The agent's name and display name by [`by_file`], read from the `name` field; `None` when
/// no usable name results (the problem is reported).
pub(crate) fn file_named(
    f: &mut Fields<'_>,
    stem: &str,
    field_first: bool,
    spans: &mut Spans,
    p: &mut Problems,
) -> Option<Named> {
    let given = match f.string("name", p) {
        Some(n) => Some(n),
        None if f.is_set("name") => return None,
        None => None,
    };
    let pos = given.as_ref().map_or(f.pos(), |g| g.pos);
    spans.name = pos;
    let (name, display, fixed) =
        by_file(stem, given.as_ref().map(|g| g.value.as_str()), field_first);
    if fixed {
        p.warn(
            pos,
            format!(
                "neither the file name '{}' nor 'name' is a valid agent name (letters, digits, \
                 '-' and '_'); the agent is '{name}'",
                stem.escape_debug()
            ),
            Some(format!("rename the file to '{name}'")),
        );
    }
    validate::check_name(&Spanned::new(name.clone(), pos), p).then_some((name, display))
}

/// A foreign dialect's name (`name`, else `stem`) made a rawko name by `fix`, with a warning
/// saying why (`problem`) when that changed it.
pub(crate) fn fixed_name(
    f: &mut Fields<'_>,
    stem: &str,
    spans: &mut Spans,
    p: &mut Problems,
    problem: &str,
    fix: impl Fn(&str) -> String,
) -> Option<String> {
    let given = match f.string("name", p) {
        Some(n) => n,
        None if f.is_set("name") => return None,
        None => Spanned::new(stem.to_string(), f.pos()),
    };
    spans.name = given.pos;
    let fixed = fix(&given.value);
    if fixed != given.value {
        p.warn(
            given.pos,
            format!(
                "agent name '{}' {problem}; it is '{fixed}' here",
                given.value.escape_debug()
            ),
            Some(format!("call it '{fixed}' (or rename it)")),
        );
    }
    validate::check_name(&Spanned::new(fixed.clone(), given.pos), p).then_some(fixed)
}

/// The frontmatter's fields, with the name and description read from them.
fn preamble<'n>(
    root: &'n Node,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<(Fields<'n>, Spans, Option<Named>, Option<String>)> {
    let mut f = Fields::of(root, "the frontmatter", p)?;
    let mut spans = Spans::default();
    // Copilot and opencode call an agent by its file; `name` is what people see.
    let name = file_named(&mut f, agent_stem(file), false, &mut spans, p);
    let description = description_of(&mut f, p);
    Some((f, spans, name, description))
}

/// The body as the prompt, once the frontmatter's remaining fields are reported; `None` when
/// the file has errors.
fn prompt(f: Fields<'_>, body: &str, body_line: usize, p: &mut Problems) -> Option<String> {
    f.finish(Strictness::Lenient, p);
    let system_prompt = markdown::body_prompt(body, body_line, p);
    (!p.has_errors()).then_some(system_prompt)
}

fn description_of(f: &mut Fields<'_>, p: &mut Problems) -> Option<String> {
    let d = f.string("description", p).map(|s| s.value);
    if d.is_none() && !f.is_set("description") {
        p.warn(
            f.pos(),
            "no 'description': other agents and the arbiter will not know when to use it",
            None,
        );
    }
    d
}

/// Copilot's tool aliases and the rawko tools each stands for (empty: none).
const COPILOT_TOOLS: &[(&str, &[&str])] = &[
    ("read", &["Read", "LS"]),
    ("edit", &["Edit", "Write"]),
    ("search", &["Grep", "Glob"]),
    ("execute", &["Bash"]),
    ("shell", &["Bash"]),
    ("runcommands", &["Bash"]),
    ("runinterminal", &["Bash"]),
    ("terminal", &["Bash"]),
    ("web", &[]),
    ("fetch", &[]),
    ("todo", &[]),
    ("agent", &[]),
    ("custom-agent", &[]),
];

pub fn decode_copilot(
    root: &Node,
    body: &str,
    body_line: usize,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    let (mut f, spans, name, description) = preamble(root, file, p)?;
    let mut commands: Option<Vec<String>> = None;
    let tools = f.string_list("tools", true, p).map(|l| {
        let mut names: Vec<String> = Vec::new();
        let mut push = |n: &str| {
            if !names.iter().any(|x| x == n) {
                names.push(n.to_string());
            }
        };
        for t in &l.value {
            let v = t.value.trim();
            if let Some((server, tool)) = v.split_once('/') {
                if tool == "*" {
                    p.warn(
                        t.pos,
                        format!(
                            "'{v}' means every tool of the MCP server '{server}'; rawko names MCP \
                             tools one by one"
                        ),
                        Some(format!("list them as '{server}/TOOL'")),
                    );
                } else {
                    push(&format!("mcp__{server}__{tool}"));
                }
                continue;
            }
            let alias = COPILOT_TOOLS
                .iter()
                .find(|(alias, _)| alias.eq_ignore_ascii_case(v));
            if alias.is_none()
                && let Some(builtin) = builtin_tools()
                    .into_iter()
                    .find(|b| b.eq_ignore_ascii_case(v))
            {
                push(builtin);
                continue;
            }
            match alias {
                Some((_, [])) => p.warn(
                    t.pos,
                    format!("rawko has no tool for Copilot's '{v}'; the agent does without it"),
                    None,
                ),
                Some((_, mapped)) => {
                    for m in *mapped {
                        push(m);
                    }
                    if mapped.contains(&"Bash") && commands.is_none() {
                        let defaults = super::builtin::default_commands();
                        p.warn(
                            t.pos,
                            format!(
                                "Copilot's '{v}' runs any command; here it gets rawko's default \
                                 command policy ({})",
                                defaults.join(", ")
                            ),
                            None,
                        );
                        commands = Some(defaults.to_vec());
                    }
                }
                None => {
                    p.warn(
                        t.pos,
                        format!("'{v}' is not a tool rawko knows; it must come from a plugin"),
                        Some(format!(
                            "Copilot's aliases here are {}",
                            COPILOT_TOOLS
                                .iter()
                                .map(|(a, _)| *a)
                                .collect::<Vec<_>>()
                                .join(", ")
                        )),
                    );
                    push(v);
                }
            }
        }
        names
    });
    let model = f.string("model", p).map(|m| ModelSettings {
        model: Some(copilot_model(&m.value)),
        ..ModelSettings::default()
    });
    for known in [
        "target",
        "argument-hint",
        "mcp-servers",
        "handoffs",
        "infer",
    ] {
        let _ = f.node(known);
    }
    let system_prompt = prompt(f, body, body_line, p)?;
    let (name, display_name) = name?;
    let mut agent = Agent::subagent(
        name,
        description,
        system_prompt,
        model.unwrap_or_default(),
        tools,
        commands,
        file.source(Dialect::Copilot, spans),
    );
    agent.display_name = display_name;
    Some(agent)
}

/// Copilot names models for people ("Claude Sonnet 4.5 (copilot)"); providers want ids
/// ("claude-sonnet-4-5"). `model_aliases` in config.yaml can map either.
fn copilot_model(name: &str) -> String {
    let name = name.trim();
    let name = name
        .strip_suffix("(copilot)")
        .or_else(|| name.strip_suffix("(Copilot)"))
        .unwrap_or(name)
        .trim();
    let id = name.to_ascii_lowercase().replace(' ', "-");
    if id.starts_with("claude") {
        id.replace('.', "-")
    } else {
        id
    }
}

/// opencode's tool names and rawko's.
const OPENCODE_TOOLS: &[(&str, &[&str])] = &[
    ("read", &["Read"]),
    ("write", &["Write"]),
    ("edit", &["Edit"]),
    ("patch", &["Edit"]),
    ("grep", &["Grep"]),
    ("glob", &["Glob"]),
    ("list", &["LS"]),
    ("bash", &["Bash"]),
    ("webfetch", &[]),
    ("todowrite", &[]),
    ("todoread", &[]),
];

pub fn decode_opencode(
    root: &Node,
    body: &str,
    body_line: usize,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    let (mut f, spans, name, description) = preamble(root, file, p)?;
    let model = f.string("model", p).map(|m| {
        let (provider, id) = match m.value.split_once('/') {
            Some(("anthropic", id)) => (Some(Provider::Anthropic), id.to_string()),
            Some(("openai", id)) => (Some(Provider::OpenAi), id.to_string()),
            _ => (None, m.value.clone()),
        };
        ModelSettings {
            provider,
            model: Some(id),
            ..ModelSettings::default()
        }
    });
    let mut blocked: Vec<String> = Vec::new();
    let mut block = |names: &[&str]| {
        for n in names {
            if !blocked.iter().any(|b| b == n) {
                blocked.push(n.to_string());
            }
        }
    };
    if let Some(tools) = f.node("tools") {
        for (key, key_pos, on) in bool_map(tools, "'tools'", p) {
            let mapped = OPENCODE_TOOLS
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(&key))
                .map(|(_, m)| *m);
            match (mapped, on) {
                (Some(m), false) => block(m),
                (Some(_), true) => {}
                (None, false) if key.contains('*') => p.warn(
                    key_pos,
                    format!("'{key}: false' blocks by wildcard, which rawko does not do"),
                    Some("list the tools to block one by one".into()),
                ),
                (None, false) => block(&[key.as_str()]),
                (None, true) => {}
            }
        }
    }
    let mut blocked_patterns: Vec<String> = Vec::new();
    if let Some(perm) = f.node("permission") {
        decode_permission(perm, &mut block, &mut blocked_patterns, p);
    }
    for known in [
        "mode",
        "temperature",
        "top_p",
        "disable",
        "maxSteps",
        "color",
    ] {
        let _ = f.node(known);
    }
    if f.node("prompt").is_some() {
        p.warn(
            f.pos(),
            "'prompt' (a prompt kept in another file) is not read; the body is the prompt",
            None,
        );
    }
    let system_prompt = prompt(f, body, body_line, p)?;
    let (name, display_name) = name?;
    let mut agent = Agent::subagent(
        name,
        description,
        system_prompt,
        model.unwrap_or_default(),
        None,
        None,
        file.source(Dialect::Opencode, spans),
    );
    agent.display_name = display_name;
    agent.tools.blocked = blocked;
    agent.bash.blocked_patterns = blocked_patterns;
    Some(agent)
}

/// `permission: {edit: deny, bash: ask | {"git push": deny, "*": allow}}`: what is denied (or
/// asked, which rawko cannot ask here) is blocked.
fn decode_permission(
    node: &Node,
    block: &mut dyn FnMut(&[&str]),
    patterns: &mut Vec<String>,
    p: &mut Problems,
) {
    let Some(entries) = node.as_map() else {
        p.warn(
            node.pos,
            "'permission' should be a mapping; it is ignored",
            None,
        );
        return;
    };
    for e in entries {
        let tools: &[&str] = match e.key.as_str() {
            "edit" => &["Edit", "Write"],
            "bash" => &["Bash"],
            _ => &[],
        };
        match (&e.value.value, tools.is_empty()) {
            (_, true) => {}
            (Value::Scalar(s), false) => match s.text.as_str() {
                "allow" => {}
                "deny" => block(tools),
                "ask" => {
                    p.warn(
                        e.value.pos,
                        format!("'{}: ask' cannot ask here; rawko denies it", e.key),
                        None,
                    );
                    block(tools);
                }
                other => p.warn(
                    e.value.pos,
                    format!("unknown permission '{other}' (allow, ask or deny); ignored"),
                    None,
                ),
            },
            (Value::Map(rules), false) if e.key == "bash" => {
                for r in rules {
                    let verdict = r.value.as_str().unwrap_or("");
                    if verdict == "deny" || verdict == "ask" {
                        if r.key == "*" {
                            block(tools);
                        } else {
                            patterns.push(glob_to_pattern(&r.key));
                        }
                    }
                }
            }
            (_, false) => p.warn(
                e.value.pos,
                format!("'permission.{}' is not understood; ignored", e.key),
                None,
            ),
        }
    }
}

/// opencode's command glob (`git push*`) as a blocked-pattern regex anchored at the start.
fn glob_to_pattern(glob: &str) -> String {
    let parts: Vec<String> = glob.trim().split('*').map(regex_syntax::escape).collect();
    format!(r"^\s*{}", parts.join(".*"))
}

/// The `key: true|false` entries of a mapping; other values are warnings.
fn bool_map(node: &Node, what: &str, p: &mut Problems) -> Vec<(String, Pos, bool)> {
    let Some(entries) = node.as_map() else {
        p.warn(
            node.pos,
            format!("{what} should be a mapping; it is ignored"),
            None,
        );
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries {
        match &e.value.value {
            Value::Scalar(s) => match s.resolve() {
                Resolved::Bool(b) => out.push((e.key.clone(), e.key_pos, b)),
                _ => p.warn(
                    e.value.pos,
                    format!("{what}: '{}' should be true or false; ignored", e.key),
                    None,
                ),
            },
            _ => p.warn(
                e.value.pos,
                format!("{what}: '{}' should be true or false; ignored", e.key),
                None,
            ),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_location_decides_the_dialect() {
        assert_eq!(
            dialect_of(Path::new("/w/.github/agents/review.agent.md")),
            Some(Dialect::Copilot)
        );
        assert_eq!(dialect_of(Path::new("/w/.github/agents/notes.md")), None);
        assert_eq!(
            dialect_of(Path::new("/w/.opencode/agent/review.md")),
            Some(Dialect::Opencode)
        );
        assert_eq!(
            dialect_of(Path::new("/w/.opencode/agents/review.md")),
            Some(Dialect::Opencode)
        );
        assert_eq!(dialect_of(Path::new("/w/.rawko/agents/review.md")), None);
    }

    #[test]
    fn copilot_model_names_become_ids() {
        assert_eq!(copilot_model("Claude Sonnet 4.5"), "claude-sonnet-4-5");
        assert_eq!(copilot_model("GPT-4.1 (copilot)"), "gpt-4.1");
        assert_eq!(copilot_model("gpt-5"), "gpt-5");
    }

    #[test]
    fn command_globs_become_anchored_patterns() {
        assert_eq!(glob_to_pattern("git push*"), r"^\s*git push.*");
        assert!(regex::Regex::new(&glob_to_pattern("rm -rf *")).is_ok());
    }
}
