//! DocLoom agents (`apiVersion: docloom.io/v1alpha1`, `kind: Agent`): an agent made of command
//! tools.
//!
//! Each `spec.tools[]` entry runs a program with `${PARAM}` substituted into its arguments;
//! `spec.parameters[]` declares those inputs. DocLoom keeps each agent in its own folder as
//! `<folder>/agent.agent.yaml`. DocLoom files carry no prompt, so rawko writes one from the
//! description and the tools. The legacy `spec.runner` becomes a single `analyze` tool.

use super::FileInfo;
use super::decode::{Fields, Spanned, Strictness, string_list_of};
use super::diag::{Pos, Problems};
use super::model::{
    Agent, BashPolicy, CommandTool, Dialect, Limits, ModelSettings, ParamType, ParamValue,
    Parameter, Spans, ToolPolicy, Transitions, builtin_tools,
};
use super::validate;
use super::yaml::{Node, Resolved, Value};
use rawko_config::is_env_var_name;

pub const API_VERSION: &str = "docloom.io/v1alpha1";
/// Every `apiVersion` DocLoom files are found with; they share one shape.
const API_VERSIONS: &[&str] = &[API_VERSION, "docloom.io/v1", "v1"];
/// The file name DocLoom gives an agent inside its folder.
pub const FILE_NAME: &str = "agent.agent.yaml";
/// Variables DocLoom provides to every tool without a parameter declaring them.
const SPECIAL_VARIABLES: &[&str] = &["SOURCE_PATH", "OUTPUT_PATH"];
/// Most tools one agent may define.
const MAX_TOOLS: usize = 256;

pub fn decode(root: &Node, file: &FileInfo<'_>, p: &mut Problems) -> Option<Agent> {
    let mut f = Fields::of(root, "the agent", p)?;
    let mut spans = Spans::default();
    match f.required_string("apiVersion", p) {
        Some(v) if API_VERSIONS.contains(&v.value.as_str()) => {}
        Some(v) => p.error(
            v.pos,
            format!("unsupported apiVersion '{}'", v.value),
            Some(format!("rawko reads DocLoom {}", API_VERSIONS.join(", "))),
        ),
        None => {}
    }
    match f.required_string("kind", p) {
        Some(k) if k.value == "Agent" => {}
        Some(k) => p.error(
            k.pos,
            format!("kind '{}' is not an agent", k.value),
            Some("a DocLoom agent file has 'kind: Agent'".into()),
        ),
        None => {}
    }
    let (name, description) = match f.node("metadata") {
        Some(m) => decode_metadata(m, &mut spans, p),
        None => {
            f.missing(
                "metadata",
                p,
                Some("metadata needs 'name' and 'description'".into()),
            );
            (None, None)
        }
    };
    let spec = match f.node("spec") {
        Some(s) => decode_spec(s, p),
        None => {
            f.missing("spec", p, Some("spec needs 'tools'".into()));
            None
        }
    };
    f.finish(Strictness::Lenient, p);
    if p.has_errors() {
        return None;
    }
    let (name, description) = (name?, description?);
    let (command_tools, parameters) = spec?;
    let system_prompt = prompt(&name, &description, &command_tools);
    Some(Agent {
        name,
        display_name: None,
        description: Some(description),
        when_to_use: None,
        system_prompt,
        model: ModelSettings::default(),
        tools: ToolPolicy {
            allowed: Some(command_tools.iter().map(|t| t.name.clone()).collect()),
            blocked: Vec::new(),
        },
        bash: BashPolicy::default(),
        command_tools,
        parameters,
        transitions: Transitions::default(),
        limits: Limits::default(),
        sandbox: None,
        network: false,
        output_schema: None,
        source: file.source(Dialect::Docloom, spans),
        acting_for: None,
        external: None,
    })
}

fn decode_metadata(
    node: &Node,
    spans: &mut Spans,
    p: &mut Problems,
) -> (Option<String>, Option<String>) {
    let Some(mut f) = Fields::of(node, "'metadata'", p) else {
        return (None, None);
    };
    let name = f.required_string("name", p).and_then(|n| {
        spans.name = n.pos;
        validate::check_name(&n, p).then_some(n.value)
    });
    let description = f.required_string("description", p).map(|d| d.value);
    f.finish(Strictness::Lenient, p);
    (name, description)
}

fn decode_spec(node: &Node, p: &mut Problems) -> Option<(Vec<CommandTool>, Vec<Parameter>)> {
    let mut f = Fields::of(node, "'spec'", p)?;
    let tools_node = f.node("tools");
    let runner_entry = f.entry("runner");
    let runner_node = runner_entry.map(|e| &e.value);
    let runner_pos = runner_entry.map_or(f.pos(), |e| e.key_pos);
    let parameters = f
        .node("parameters")
        .map(|n| decode_parameters(n, p))
        .unwrap_or_default();
    let mut tools = match tools_node {
        Some(n) => decode_tools(n, p),
        None => Vec::new(),
    };
    match (tools_node, runner_node) {
        (Some(_), Some(_)) => p.warn(
            runner_pos,
            "'spec.runner' is ignored because 'spec.tools' is set",
            Some("remove the deprecated runner".into()),
        ),
        (None, Some(r)) => {
            p.warn(
                runner_pos,
                "'spec.runner' is deprecated; it is loaded as one tool named 'analyze'",
                Some("move it to 'spec.tools' with a name and a description".into()),
            );
            if let Some((command, args)) = decode_command(r, "'spec.runner'", p) {
                tools.push((
                    r.pos,
                    CommandTool {
                        name: "analyze".into(),
                        description: "Runs the agent's complete analysis (legacy runner).".into(),
                        command,
                        args: args.into_iter().map(|a| a.value).collect(),
                    },
                    Vec::new(),
                ));
            }
        }
        (None, None) => p.error(
            f.pos(),
            "'spec' defines no tools",
            Some("add 'tools:' with name, description, command and args".into()),
        ),
        (Some(_), None) => {}
    }
    f.finish(Strictness::Lenient, p);

    // Every ${NAME} should be a declared parameter (DocLoom matches them case-insensitively:
    // parameter `source_path` is `${SOURCE_PATH}`) or one of DocLoom's own variables.
    for (_, tool, args) in &tools {
        for arg in args {
            for var in super::model::placeholders_in(&arg.value) {
                let declared = parameters
                    .iter()
                    .any(|prm| prm.name.eq_ignore_ascii_case(var))
                    || SPECIAL_VARIABLES.contains(&var);
                if !declared {
                    p.warn(
                        arg.pos,
                        format!(
                            "tool '{}' uses '${{{var}}}', which no parameter declares",
                            tool.name
                        ),
                        Some(format!(
                            "declare it under 'spec.parameters', or use one of {}",
                            SPECIAL_VARIABLES.join(", ")
                        )),
                    );
                }
            }
        }
    }
    Some((tools.into_iter().map(|(_, t, _)| t).collect(), parameters))
}

type ToolWithArgs = (Pos, CommandTool, Vec<Spanned<String>>);

fn decode_tools(node: &Node, p: &mut Problems) -> Vec<ToolWithArgs> {
    let Value::Seq(items) = &node.value else {
        p.error(
            node.pos,
            format!("'spec.tools' must be a list, found {}", node.kind()),
            None,
        );
        return Vec::new();
    };
    if items.len() > MAX_TOOLS {
        p.error(node.pos, format!("more than {MAX_TOOLS} tools"), None);
        return Vec::new();
    }
    let mut out: Vec<ToolWithArgs> = Vec::new();
    for item in items {
        let Some(mut f) = Fields::of(item, "a tool", p) else {
            continue;
        };
        let name = f.required_string("name", p).and_then(|n| {
            if !is_tool_name(&n.value) {
                p.error(
                    n.pos,
                    format!(
                        "tool name '{}' may contain only letters, digits, '_' and '-'",
                        n.value.escape_debug()
                    ),
                    None,
                );
                None
            } else if builtin_tools().contains(&n.value.as_str()) {
                p.error(
                    n.pos,
                    format!("tool name '{}' is taken by a built-in tool", n.value),
                    Some("rename the command tool".into()),
                );
                None
            } else if let Some((first, ..)) = out.iter().find(|(_, t, _)| t.name == n.value) {
                p.error(
                    n.pos,
                    format!("duplicate tool name '{}'", n.value),
                    Some(format!("already defined on line {}", first.line)),
                );
                None
            } else {
                Some(n)
            }
        });
        let description = f.required_string("description", p);
        let command = f.required_string("command", p);
        if let Some(c) = &command
            && c.value.trim().is_empty()
        {
            p.error(c.pos, "'command' is empty", None);
        }
        let args = match f.node("args") {
            Some(a) => string_list_of(a, "args", false, p).map(|l| l.value),
            None => Some(Vec::new()),
        };
        f.finish(Strictness::Lenient, p);
        if let (Some(name), Some(description), Some(command), Some(args)) =
            (name, description, command, args)
        {
            out.push((
                name.pos,
                CommandTool {
                    name: name.value,
                    description: description.value,
                    command: command.value,
                    args: args.iter().map(|a| a.value.clone()).collect(),
                },
                args,
            ));
        }
    }
    out
}

fn decode_command(
    node: &Node,
    what: &str,
    p: &mut Problems,
) -> Option<(String, Vec<Spanned<String>>)> {
    let mut f = Fields::of(node, what, p)?;
    let command = f.required_string("command", p);
    let args = match f.node("args") {
        Some(a) => string_list_of(a, "args", false, p).map(|l| l.value),
        None => Some(Vec::new()),
    };
    f.finish(Strictness::Lenient, p);
    Some((command?.value, args?))
}

fn decode_parameters(node: &Node, p: &mut Problems) -> Vec<Parameter> {
    let Value::Seq(items) = &node.value else {
        p.error(
            node.pos,
            format!("'spec.parameters' must be a list, found {}", node.kind()),
            None,
        );
        return Vec::new();
    };
    let mut out: Vec<Parameter> = Vec::new();
    for item in items {
        let Some(mut f) = Fields::of(item, "a parameter", p) else {
            continue;
        };
        let name = f.required_string("name", p).and_then(|n| {
            if !is_param_name(&n.value) {
                p.error(
                    n.pos,
                    format!(
                        "parameter name '{}' must be letters, digits, '_' and '-'",
                        n.value.escape_debug()
                    ),
                    Some(
                        "it becomes ${NAME} and the environment variable PARAM_NAME ('-' as '_')"
                            .into(),
                    ),
                );
                None
            } else if out.iter().any(|o| o.name.eq_ignore_ascii_case(&n.value)) {
                p.error(n.pos, format!("duplicate parameter '{}'", n.value), None);
                None
            } else {
                Some(n.value)
            }
        });
        let kind = match f.string("type", p) {
            Some(t) => Some(t),
            None if f.is_set("type") => None,
            // DocLoom's own examples leave it out; text is what any value can be passed as.
            None => {
                p.warn(
                    f.pos(),
                    format!(
                        "parameter '{}' has no 'type'; it is a string",
                        name.as_deref().unwrap_or("?")
                    ),
                    Some("add 'type: string' (or integer, boolean)".into()),
                );
                Some(Spanned::new("string".to_string(), f.pos()))
            }
        };
        let kind = kind.and_then(|t| {
            // DocLoom writes JSON Schema's names; rawko's are shorter.
            let k = match t.value.as_str() {
                "boolean" => Some(ParamType::Bool),
                "integer" => Some(ParamType::Int),
                other => ParamType::parse(other),
            };
            if k.is_none() {
                p.error(
                    t.pos,
                    format!("unknown parameter type '{}'", t.value),
                    Some(format!(
                        "one of: {} (or boolean, integer)",
                        ParamType::NAMES.join(", ")
                    )),
                );
            }
            k
        });
        let required = f.bool("required", p).is_some_and(|r| r.value);
        let default = match (f.node("default"), kind) {
            (Some(d), Some(k)) => default_of(d, k, p),
            _ => None,
        };
        let description = f.required_string("description", p).map(|d| d.value);
        f.finish(Strictness::Lenient, p);
        if let (Some(name), Some(kind)) = (name, kind) {
            out.push(Parameter {
                name,
                kind,
                required,
                default,
                description,
            });
        }
    }
    out
}

fn default_of(node: &Node, kind: ParamType, p: &mut Problems) -> Option<ParamValue> {
    let resolved = match &node.value {
        Value::Scalar(s) => Some(s.resolve()),
        _ => None,
    };
    let value = match (kind, resolved) {
        (ParamType::String, Some(Resolved::Str(s))) => Some(ParamValue::String(s.to_string())),
        (ParamType::Int, Some(Resolved::Int(i))) => Some(ParamValue::Int(i)),
        (ParamType::Bool, Some(Resolved::Bool(b))) => Some(ParamValue::Bool(b)),
        _ => None,
    };
    if value.is_none() {
        let want = match kind {
            ParamType::String => "text",
            ParamType::Int => "a whole number",
            ParamType::Bool => "true or false",
        };
        p.error(
            node.pos,
            format!(
                "the default must be {want} to match the parameter's type, found {}",
                node.kind()
            ),
            None,
        );
    }
    value
}

/// A parameter name: an environment variable name, or one with `-` as DocLoom allows.
fn is_param_name(s: &str) -> bool {
    is_env_var_name(&s.replace('-', "_")) && !s.starts_with('-')
}

fn is_tool_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// A system prompt for an agent that has only a description and tools.
fn prompt(name: &str, description: &str, tools: &[CommandTool]) -> String {
    let mut out = format!(
        "You are {name}. {}\n\nYou work through the tools below. Each one runs a program and returns its output; base what you say on that output, not on guesses.\n\n",
        description.trim()
    );
    for t in tools {
        out.push_str(&format!("- {}: {}\n", t.name, t.description.trim()));
    }
    out.push_str(
        "\nCall the tools you need, then call finish with a summary of what you found and the evidence for it.",
    );
    out
}
