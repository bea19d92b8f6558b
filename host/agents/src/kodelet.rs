//! kodelet-style Markdown subagents: provider and model fields in the frontmatter, the body is
//! the system prompt.
//!
//! A foreign dialect, read leniently: unknown fields are warnings, so files shared for kodelet
//! load unchanged. kodelet's own tool names (`file_read`, `bash`, ...) are mapped to rawko's.
//!
//! kodelet's recipes (`.kodelet/recipes/NAME.md`, or any file with a recipe's `arguments`,
//! `defaults` or `workflow`) are called by their file name; their `name` is a title ("GitHub
//! Issue Resolver"), kept as the display name. Other files keep `name` when it is a valid agent
//! name and fall back to the file name, with `name` as the title, when it is not.

use std::path::Path;

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness};
use super::diag::{Problems, did_you_mean};
use super::foreign;
use super::markdown;
use super::model::{Agent, Dialect, ModelSettings, Provider, ReasoningEffort, Spans};
use super::validate;
use super::yaml::Node;
use rawko_config::is_env_var_name;

/// Frontmatter keys that only kodelet files have, used to recognise the dialect.
pub const MARKERS: &[&str] = &[
    "provider",
    "max_tokens",
    "reasoning_effort",
    "thinking_budget",
    "allowed_tools",
    "allowed_commands",
    "openai",
    "arguments",
    "defaults",
    "workflow",
];

/// Frontmatter keys only kodelet's recipes have.
pub const RECIPE_KEYS: &[&str] = &["arguments", "defaults", "workflow"];

/// Whether the file at `path` with frontmatter `root` is a kodelet recipe.
pub fn is_recipe(path: &Path, root: &Node) -> bool {
    foreign::in_recipes_dir(path) || RECIPE_KEYS.iter().any(|k| root.get(k).is_some())
}

const MAX_TOKENS: u64 = 1_000_000;
/// kodelet's own default for `max_tokens`.
const DEFAULT_MAX_TOKENS: u32 = 4096;
/// Anthropic's smallest thinking budget.
const MIN_THINKING_BUDGET: u64 = 1024;

/// kodelet's tool names and rawko's equivalents.
const TOOL_NAMES: &[(&str, &str)] = &[
    ("file_read", "Read"),
    ("file_write", "Write"),
    ("file_edit", "Edit"),
    ("file_multi_edit", "Edit"),
    ("grep_tool", "Grep"),
    ("glob_tool", "Glob"),
    ("bash", "Bash"),
];

pub fn decode(
    root: &Node,
    body: &str,
    body_line: usize,
    file: &FileInfo<'_>,
    p: &mut Problems,
) -> Option<Agent> {
    let mut f = Fields::of(root, "the frontmatter", p)?;
    let mut spans = Spans::default();
    let recipe = is_recipe(file.path, root);
    let name = foreign::file_named(&mut f, file.stem(), !recipe, &mut spans, p);
    let description = f.string("description", p).map(|s| s.value);
    // kodelet fills a recipe's arguments into its body (`{{.name}}`); rawko does not.
    let template = ["arguments", "defaults"]
        .into_iter()
        .filter_map(|k| f.entry(k).map(|e| e.key_pos))
        .min();
    if let Some(pos) = template {
        p.warn(
            pos,
            "kodelet fills a recipe's arguments into its body ({{.name}}); rawko sends the body \
             as written",
            Some("write the values into the prompt, or let the task give them".into()),
        );
    }
    let _ = f.node("workflow");

    let provider = f.string("provider", p).and_then(|s| {
        let parsed = Provider::parse(&s.value);
        if parsed.is_none() {
            p.error(
                s.pos,
                format!("unknown provider '{}'", s.value),
                Some(hint_one_of(&s.value, Provider::NAMES)),
            );
        }
        parsed
    });
    let model = f.string("model", p).map(|s| s.value);
    // Without max_tokens kodelet uses 4096; without provider and model, the user's
    // configured defaults (here: `defaults.adapter` and its model).
    let max_tokens = f.uint("max_tokens", 1, MAX_TOKENS, p);
    let reasoning_effort = f.string("reasoning_effort", p).and_then(|s| {
        let parsed = ReasoningEffort::parse(&s.value);
        if parsed.is_none() {
            p.error(
                s.pos,
                format!("unknown reasoning_effort '{}'", s.value),
                Some(hint_one_of(&s.value, ReasoningEffort::NAMES)),
            );
        } else if provider == Some(Provider::Anthropic) {
            p.error(
                s.pos,
                "reasoning_effort applies to provider openai only",
                Some("for anthropic use thinking_budget".into()),
            );
        }
        parsed.map(|r| (r, s.pos))
    });
    let thinking_budget = f.uint("thinking_budget", 1, MAX_TOKENS, p).inspect(|b| {
        if provider == Some(Provider::OpenAi) {
            p.error(
                b.pos,
                "thinking_budget applies to provider anthropic only",
                Some("for openai use reasoning_effort".into()),
            );
        } else if b.value < MIN_THINKING_BUDGET {
            p.error(
                b.pos,
                format!(
                    "thinking_budget must be at least {MIN_THINKING_BUDGET}, found {}",
                    b.value
                ),
                None,
            );
        } else if b.value
            >= max_tokens
                .as_ref()
                .map_or(u64::from(DEFAULT_MAX_TOKENS), |m| m.value)
        {
            p.error(
                b.pos,
                format!(
                    "thinking_budget ({}) must be less than max_tokens ({})",
                    b.value,
                    max_tokens
                        .as_ref()
                        .map_or(u64::from(DEFAULT_MAX_TOKENS), |m| m.value)
                ),
                Some("thinking tokens count towards max_tokens".into()),
            );
        }
    });

    let allowed_tools = f.string_list("allowed_tools", true, p).map(|l| {
        let mapped: Vec<Spanned<String>> = l
            .value
            .into_iter()
            .map(|t| match TOOL_NAMES.iter().find(|(k, _)| *k == t.value) {
                Some((_, rawko)) => Spanned::new(rawko.to_string(), t.pos),
                None => t,
            })
            .collect();
        validate::check_tool_names(&mapped, false, p);
        let mut names: Vec<String> = Vec::new();
        for t in mapped {
            if !names.contains(&t.value) {
                names.push(t.value);
            }
        }
        names
    });
    let allowed_commands = f.string_list("allowed_commands", true, p).map(|l| {
        validate::check_command_patterns(&l.value, p);
        (
            l.pos,
            l.value.into_iter().map(|s| s.value).collect::<Vec<_>>(),
        )
    });
    // kodelet treats an empty tool list as "every tool".
    let allowed_tools = allowed_tools.filter(|t| !t.is_empty());
    if let (Some(tools), Some((pos, _))) = (&allowed_tools, &allowed_commands)
        && !tools.iter().any(|t| t == "Bash")
    {
        p.warn(
            *pos,
            "allowed_commands has no effect: bash is not in allowed_tools",
            Some("add bash to allowed_tools, or remove allowed_commands".into()),
        );
    }

    let (base_url, api_key_env_var) = match f.node("openai") {
        Some(n) => {
            if provider != Some(Provider::OpenAi) {
                p.error(
                    n.pos,
                    "the 'openai' section applies to provider openai only",
                    None,
                );
            }
            decode_openai(n, p)
        }
        None => (None, None),
    };
    f.finish(Strictness::Lenient, p);

    let system_prompt = markdown::body_prompt(body, body_line, p);
    if p.has_errors() {
        return None;
    }
    let (name, display_name) = name?;
    let mut agent = Agent::subagent(
        name,
        description,
        system_prompt,
        ModelSettings {
            adapter: None,
            provider,
            model,
            max_tokens: Some(max_tokens.map_or(DEFAULT_MAX_TOKENS, |m| m.value as u32)),
            reasoning_effort: reasoning_effort.map(|(r, _)| r),
            thinking_budget: thinking_budget.map(|b| b.value as u32),
            base_url,
            api_key_env_var,
        },
        allowed_tools,
        allowed_commands.map(|(_, c)| c),
        file.source(Dialect::Kodelet, spans),
    );
    agent.display_name = display_name;
    Some(agent)
}

fn decode_openai(node: &Node, p: &mut Problems) -> (Option<String>, Option<String>) {
    let Some(mut f) = Fields::of(node, "'openai'", p) else {
        return (None, None);
    };
    let base_url = f.string("base_url", p).and_then(|u| {
        if u.value.starts_with("https://") || u.value.starts_with("http://") {
            Some(u.value)
        } else {
            p.error(
                u.pos,
                format!("base_url '{}' is not an http(s) URL", u.value),
                Some("e.g. https://api.openai.com/v1".into()),
            );
            None
        }
    });
    let key_var = f.string("api_key_env_var", p).and_then(|v| {
        if is_env_var_name(&v.value) {
            Some(v.value)
        } else {
            p.error(
                v.pos,
                format!(
                    "api_key_env_var '{}' is not an environment variable name",
                    v.value
                ),
                Some("name the variable (OPENAI_API_KEY), not the key itself".into()),
            );
            None
        }
    });
    f.finish(Strictness::Lenient, p);
    (base_url, key_var)
}

fn hint_one_of(value: &str, names: &[&str]) -> String {
    match did_you_mean(value, names) {
        Some(s) => format!("did you mean '{s}'?"),
        None => format!("one of: {}", names.join(", ")),
    }
}
