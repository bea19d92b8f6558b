//! The tools an agent's model can call, as the engine sees them, and the `finish` tool that
//! ends a state.

use std::future::Future;
use std::pin::Pin;

use serde_json::json;

use super::llm::ToolSpec;
use rawko_agents::model::Agent;
use rawko_capability::Decision;
use rawko_store::AuditEntry;

pub use rawko_agents::model::FINISH;

/// The result of running one tool for an agent.
#[derive(Debug, Clone)]
pub struct ToolOutcome {
    /// The text the model sees.
    pub output: String,
    pub is_error: bool,
    /// What the host decided before running it: `allowed`, or `denied: ...`.
    pub verdict: String,
    /// Capability decisions made along the way, for the audit log.
    pub decisions: Vec<AuditEntry>,
}

pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = ToolOutcome> + 'a>>;

/// What rawko's own policy says of something an external agent asks permission for (a command
/// line, a path), and the rule that said it, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Judgement {
    pub decision: Decision,
    pub rule: String,
}

impl Judgement {
    pub fn deny(rule: impl Into<String>) -> Self {
        Judgement {
            decision: Decision::Deny,
            rule: rule.into(),
        }
    }
}

pub type JudgeFuture<'a> = Pin<Box<dyn Future<Output = Judgement> + 'a>>;

pub type CheckpointFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + 'a>>;

/// Keeps what a tool call did to the workspace, after the call ran and before the engine
/// records it as done, for a runner that may be replaced in the middle of a state: a Temporal
/// worker keeps its checkout's edits in the team store, so that whoever takes the task over
/// from the record starts from the files the recorded calls made. When they cannot be kept,
/// the call is not recorded and the run stops with an error: from the record, the call runs
/// again rather than being taken for done with its effects lost.
pub trait Checkpoint {
    /// Keep the effects of a call of `tool` in `task`.
    fn keep<'a>(&'a self, task: &'a str, tool: &'a str) -> CheckpointFuture<'a>;
}

/// Runs tools for agents, with each agent's own capabilities.
pub trait ToolHost {
    /// Every tool the host could run for `agent` (the engine filters by the agent's policy).
    fn specs(&self, agent: &Agent) -> Vec<ToolSpec>;
    /// Run `name` with `input` (JSON text as the model wrote it) for `agent`. The engine has
    /// already checked that the agent may call it; the host applies the agent's capabilities.
    fn call<'a>(&'a self, agent: &'a Agent, name: &'a str, input: &'a str) -> ToolFuture<'a>;
    /// Why the host withholds `name` from `agent` although it has the tool, if it does.
    fn withheld(&self, _agent: &Agent, _name: &str) -> Option<String> {
        None
    }
    /// The workspace the agents work in.
    fn workspace(&self) -> std::path::PathBuf {
        std::path::PathBuf::from(".")
    }
    /// Read a file for `agent` as it is (for an external agent's `fs/read_text_file`), within
    /// the agent's read grants and at most `max` bytes: the text, or the error as the output.
    fn read_text(&self, _agent: &Agent, path: &std::path::Path, _max: u64) -> ToolOutcome {
        ToolOutcome {
            output: format!("cannot read {}: no files here", path.display()),
            is_error: true,
            verdict: "denied: no files".into(),
            decisions: Vec::new(),
        }
    }
    /// Judge `command` as `agent`'s `Bash` would (its shell policy and the filter chain),
    /// without running it. An `ask` is returned as such: the caller puts the question.
    fn judge_command<'a>(&'a self, _agent: &'a Agent, _command: &'a str) -> JudgeFuture<'a> {
        Box::pin(async { Judgement::deny("no shell here to judge commands with") })
    }
    /// Judge `path` (absolute, or relative to the workspace) for reading or, with `write`,
    /// for writing, against `agent`'s grants as its tools would have them.
    fn judge_path(&self, _agent: &Agent, _path: &std::path::Path, _write: bool) -> Judgement {
        Judgement::deny("no files here to judge paths against")
    }
}

/// The `finish` tool, with the agent's output schema when it declares one.
pub fn finish_spec(output_schema: Option<&serde_json::Value>) -> ToolSpec {
    let mut properties = json!({
        "status": {
            "type": "string",
            "enum": ["success", "failure"],
            "description": "success if you did what your role asks, failure if you could not"
        },
        "summary": {
            "type": "string",
            "description": "What you did and found, for the next agent and the user"
        }
    });
    let mut required = vec!["status", "summary"];
    let description = match output_schema {
        Some(schema) => {
            properties["output"] = schema.clone();
            required.push("output");
            "End your turn with a status, a summary and the structured output your role defines."
        }
        None => "End your turn with a status and a summary.",
    };
    ToolSpec {
        name: FINISH.into(),
        description: description.into(),
        input_schema: json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false
        }),
    }
}

/// A valid `finish` call.
#[derive(Debug, Clone, PartialEq)]
pub struct Finish {
    pub success: bool,
    pub summary: String,
    pub output: Option<serde_json::Value>,
}

/// Why a `finish` call was rejected, in words for the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishError(pub String);

/// Most characters of a summary kept; a summary is a report, not a file.
const MAX_SUMMARY: usize = 20_000;
/// Largest structured output accepted, as JSON: it goes to the store, to the next agents'
/// prompts and to the terminal.
const MAX_OUTPUT_BYTES: usize = 64 << 10;

/// Check a `finish` call against its schema (and the agent's output schema).
pub fn parse_finish(
    arguments: &str,
    output_schema: Option<&serde_json::Value>,
) -> Result<Finish, FinishError> {
    let value: serde_json::Value = serde_json::from_str(arguments)
        .map_err(|e| FinishError(format!("`finish` arguments are not valid JSON ({e})")))?;
    if let Some(output) = value.get("output") {
        let size = output.to_string().len();
        if size > MAX_OUTPUT_BYTES {
            return Err(FinishError(format!(
                "`finish` output is {size} bytes of JSON; at most {MAX_OUTPUT_BYTES} are accepted: \
                 put less in it (files belong in the workspace, not in the output)"
            )));
        }
    }
    let spec = finish_spec(output_schema);
    let validator = jsonschema::options()
        .with_pattern_options(jsonschema::PatternOptions::regex())
        .build(&spec.input_schema)
        .map_err(|e| FinishError(format!("the agent's output schema is invalid: {e}")))?;
    // The first few problems, each with where it is.
    let problems: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| match e.instance_path().to_string() {
            at if at.is_empty() => e.to_string(),
            at => format!("at {at}: {e}"),
        })
        .collect();
    if !problems.is_empty() {
        return Err(FinishError(format!(
            "`finish` input does not match its schema: {}",
            problems.join("; ")
        )));
    }
    let success = value["status"] == "success";
    let summary: String = value["summary"]
        .as_str()
        .unwrap_or_default()
        .chars()
        .take(MAX_SUMMARY)
        .collect();
    Ok(Finish {
        success,
        summary,
        output: value.get("output").cloned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finish_needs_status_and_summary() {
        let f = parse_finish(r#"{"status":"success","summary":"done"}"#, None).unwrap();
        assert!(f.success && f.summary == "done" && f.output.is_none());
        let e = parse_finish(r#"{"status":"ok","summary":"x"}"#, None).unwrap_err();
        assert!(e.0.contains("status"), "{e:?}");
        let e = parse_finish(r#"{"summary":"x"}"#, None).unwrap_err();
        assert!(e.0.contains("status"), "{e:?}");
        let e = parse_finish("not json", None).unwrap_err();
        assert!(e.0.contains("not valid JSON"), "{e:?}");
    }

    #[test]
    fn summaries_are_cut_and_huge_outputs_refused() {
        let long = "x".repeat(MAX_SUMMARY * 3);
        let f = parse_finish(
            &json!({"status": "success", "summary": long}).to_string(),
            None,
        )
        .unwrap();
        assert_eq!(f.summary.chars().count(), MAX_SUMMARY);
        let huge = json!({"status": "success", "summary": "s", "output": {"blob": "y".repeat(MAX_OUTPUT_BYTES)}});
        let e = parse_finish(&huge.to_string(), Some(&json!({"type": "object"}))).unwrap_err();
        assert!(e.0.contains("at most"), "{e:?}");
    }

    #[test]
    fn output_schema_is_enforced() {
        let schema = json!({
            "type": "object",
            "properties": { "files": { "type": "array", "items": { "type": "string" } } },
            "required": ["files"]
        });
        let ok = parse_finish(
            r#"{"status":"success","summary":"s","output":{"files":["a.rs"]}}"#,
            Some(&schema),
        )
        .unwrap();
        assert_eq!(ok.output.unwrap()["files"][0], "a.rs");
        let e = parse_finish(
            r#"{"status":"success","summary":"s","output":{"files":[1]}}"#,
            Some(&schema),
        )
        .unwrap_err();
        assert!(e.0.contains("/output/files/0"), "{e:?}");
        let e = parse_finish(r#"{"status":"success","summary":"s"}"#, Some(&schema)).unwrap_err();
        assert!(e.0.contains("output"), "{e:?}");
    }
}
