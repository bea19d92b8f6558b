//! Tool plugins: loading one, listing its tools, and calling a tool in a fresh sandbox.

use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::bindings::tool::ToolPre;
use crate::bindings::tools as wit;
use crate::limits::{
    Budget, BudgetKind, DESCRIBE_BUDGET, MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES, MAX_TOOL_NAME,
    MAX_TOOLS,
};
use crate::output::{OutputCtx, OutputSink};
use crate::runtime::{Runtime, RuntimeError};
use crate::sandbox::{Failure, Sandbox};
use crate::state::HostState;
use rawko_capability::{Access, FsGrants};

/// One tool a plugin provides.
#[derive(Debug)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    validator: OnceLock<Result<jsonschema::Validator, String>>,
}

impl ToolInfo {
    /// A tool description, for tools the host provides itself.
    pub fn new(name: &str, description: &str, input_schema: serde_json::Value) -> Self {
        ToolInfo {
            name: name.to_string(),
            description: description.to_string(),
            input_schema,
            validator: OnceLock::new(),
        }
    }

    /// Check `input` against the tool's schema; every problem is reported, at most a few.
    pub fn validate(&self, input: &serde_json::Value) -> Result<(), InputError> {
        let validator = self.validator.get_or_init(|| {
            jsonschema::options()
                .with_pattern_options(jsonschema::PatternOptions::regex())
                .build(&self.input_schema)
                .map_err(|e| e.to_string())
        });
        let validator = validator
            .as_ref()
            .map_err(|e| InputError::InvalidSchema(e.clone()))?;
        let problems = schema_problems(validator, input);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InputError::Invalid(problems))
        }
    }
}

/// Why [`ToolInfo::validate`] refused an input.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InputError {
    /// The tool's schema does not compile, so no input can be checked against it.
    #[error("the tool's own input schema is invalid: {0}")]
    InvalidSchema(String),
    /// What is wrong with the input, at most five problems (see [`schema_problems`]).
    #[error("{}", .0.join("; "))]
    Invalid(Vec<String>),
}

/// What is wrong with `value` under `validator`, at most five problems, each with where it is.
pub fn schema_problems(
    validator: &jsonschema::Validator,
    value: &serde_json::Value,
) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect()
}

/// The cached form of a tool list.
#[derive(Serialize, Deserialize)]
struct CachedSpec {
    name: String,
    description: String,
    input_schema: serde_json::Value,
}

/// A loaded tool plugin: compiled, linked, and described.
pub struct ToolPlugin {
    name: Arc<str>,
    digest: String,
    pre: ToolPre<HostState>,
    tools: Vec<ToolInfo>,
    /// For an installed plugin, the filesystem the user granted it: every call's grants are
    /// intersected with it. Built-in plugins have none and get exactly the call's grants.
    fs_limit: Option<FsGrants>,
}

impl std::fmt::Debug for ToolPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolPlugin")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

/// A successful call.
#[derive(Debug, Clone)]
pub struct ToolCallOutput {
    pub content: String,
    pub duration: Duration,
}

/// What a tool plugin itself said went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GuestErrorKind {
    InvalidInput,
    UnknownTool,
    NotFound,
    Denied,
    Failed,
}

/// Why a tool call failed. Every variant is something to report to the model or the user; none
/// of them stops the host.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolCallError {
    #[error("no tool named `{name}` (available: {available})")]
    UnknownTool { name: String, available: String },
    #[error("invalid input for {tool}: {message}")]
    InvalidInput { tool: String, message: String },
    #[error("{tool}: {message}")]
    Tool {
        tool: String,
        kind: GuestErrorKind,
        message: String,
    },
    #[error("{tool} was stopped: it exceeded its {kind} budget ({limit})")]
    Budget {
        tool: String,
        kind: BudgetKind,
        limit: String,
    },
    #[error("{tool} crashed: {message}")]
    Trap { tool: String, message: String },
    #[error("cannot set up the sandbox for {tool}: {message}")]
    Sandbox { tool: String, message: String },
}

impl ToolCallError {
    /// A stable machine-readable code, for `--json` output and the audit log.
    pub fn code(&self) -> &'static str {
        match self {
            ToolCallError::UnknownTool { .. } => "unknown_tool",
            ToolCallError::InvalidInput { .. } => "invalid_input",
            ToolCallError::Tool { kind, .. } => match kind {
                GuestErrorKind::InvalidInput => "invalid_input",
                GuestErrorKind::UnknownTool => "unknown_tool",
                GuestErrorKind::NotFound => "not_found",
                GuestErrorKind::Denied => "denied",
                GuestErrorKind::Failed => "failed",
            },
            ToolCallError::Budget { kind, .. } => kind.code(),
            ToolCallError::Trap { .. } => "trap",
            ToolCallError::Sandbox { .. } => "sandbox",
        }
    }

    /// Whether the caller's input was at fault (as opposed to the tool or the plugin).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            ToolCallError::UnknownTool { .. } | ToolCallError::InvalidInput { .. }
        )
    }
}

/// Where and with what a call runs.
#[derive(Debug, Clone)]
pub struct CallContext<'a> {
    /// The workspace root, absolute and canonical.
    pub workspace: &'a Path,
    pub grants: &'a FsGrants,
    pub budget: Budget,
}

impl ToolPlugin {
    /// Compile (or load from the cache), link and describe a tool plugin.
    pub async fn load(rt: &Runtime, name: &str, wasm: &[u8]) -> Result<ToolPlugin, RuntimeError> {
        let fail = |message: String| RuntimeError::Load {
            plugin: name.to_string(),
            message,
        };
        let (compiled, pre) = rt.link(name, wasm, rt.tool_linker())?;
        let pre = ToolPre::new(pre).map_err(|e| {
            fail(format!(
                "is not a tool plugin (no `rawko:plugin/tools@{}` export): {e:#}",
                rawko_wit::VERSION
            ))
        })?;
        let name: Arc<str> = name.into();

        let cached: Option<Vec<CachedSpec>> = rt
            .cache()
            .read_meta(&compiled.key, "tools.json")
            .and_then(|b| serde_json::from_slice(&b).ok());
        let specs = match cached {
            Some(specs) => specs,
            None => {
                let specs = describe(rt, &pre, &name)
                    .await
                    .map_err(|e| fail(e.to_string()))?;
                if let Ok(bytes) = serde_json::to_vec(&specs) {
                    rt.cache().write_meta(&compiled.key, "tools.json", &bytes);
                }
                specs
            }
        };
        let tools = check_specs(specs).map_err(fail)?;
        Ok(ToolPlugin {
            name,
            digest: compiled.digest,
            pre,
            tools,
            fs_limit: None,
        })
    }

    /// Hold every call to at most `limit`, whatever the call's own grants say.
    pub fn with_fs_limit(mut self, limit: FsGrants) -> Self {
        self.fs_limit = Some(limit);
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    pub fn tools(&self) -> &[ToolInfo] {
        &self.tools
    }

    /// The linked component, for embedders that manage stores themselves (benchmarks use it to
    /// time a call on a warm instance). Calls through [`ToolPlugin::call`] are sandboxed and
    /// budgeted; a store built by hand is only as safe as its builder makes it.
    pub fn instance_pre(&self) -> &ToolPre<HostState> {
        &self.pre
    }

    pub fn tool(&self, name: &str) -> Option<&ToolInfo> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Call tool `tool` with `input` (JSON text) in a fresh sandbox built from `cx`. The result
    /// is whole: what the tool handed over through `output.write`, then what it returned.
    pub async fn call(
        &self,
        rt: &Runtime,
        tool: &str,
        input: &str,
        cx: &CallContext<'_>,
    ) -> Result<ToolCallOutput, ToolCallError> {
        self.call_passing(rt, tool, input, cx, None).await
    }

    /// [`ToolPlugin::call`], with the pieces the tool hands over through `output.write` passed
    /// to `sink` as they come, for a caller that shows the result as it is made. The output's
    /// `content` is then only what the tool returned, the end of its result; a failed call may
    /// already have passed pieces on.
    pub async fn call_streaming(
        &self,
        rt: &Runtime,
        tool: &str,
        input: &str,
        cx: &CallContext<'_>,
        sink: Arc<dyn OutputSink>,
    ) -> Result<ToolCallOutput, ToolCallError> {
        self.call_passing(rt, tool, input, cx, Some(sink)).await
    }

    async fn call_passing(
        &self,
        rt: &Runtime,
        tool: &str,
        input: &str,
        cx: &CallContext<'_>,
        sink: Option<Arc<dyn OutputSink>>,
    ) -> Result<ToolCallOutput, ToolCallError> {
        let span = tracing::info_span!(
            "tool_call",
            plugin = &*self.name,
            tool,
            duration_us = tracing::field::Empty,
            outcome = tracing::field::Empty,
        );
        let _enter = span.enter();
        let started = Instant::now();
        let result = self.call_inner(rt, tool, input, cx, sink).await;
        let elapsed = started.elapsed();
        span.record("duration_us", elapsed.as_micros() as u64);
        match &result {
            Ok(_) => span.record("outcome", "ok"),
            Err(e) => span.record("outcome", e.code()),
        };
        tracing::debug!("tool call finished");
        result.map(|content| ToolCallOutput {
            content,
            duration: elapsed,
        })
    }

    async fn call_inner(
        &self,
        rt: &Runtime,
        tool: &str,
        input: &str,
        cx: &CallContext<'_>,
        sink: Option<Arc<dyn OutputSink>>,
    ) -> Result<String, ToolCallError> {
        let info = self.tool(tool).ok_or_else(|| ToolCallError::UnknownTool {
            name: tool.to_string(),
            available: self
                .tools
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
        let invalid = |message: String| ToolCallError::InvalidInput {
            tool: tool.to_string(),
            message,
        };
        let value: serde_json::Value =
            serde_json::from_str(input).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
        info.validate(&value).map_err(|e| invalid(e.to_string()))?;

        let budget = cx.budget.clamped();
        let limited;
        let grants = match &self.fs_limit {
            Some(limit) => {
                limited = cx.grants.intersect(limit);
                &limited
            }
            None => cx.grants,
        };
        let wit_cx = wit::CallContext {
            workspace: cx.workspace.to_string_lossy().into_owned(),
            grants: grants
                .iter()
                .map(|g| wit::Grant {
                    path: g.path().to_string_lossy().into_owned(),
                    access: match g.access() {
                        Access::ReadOnly => wit::Access::ReadOnly,
                        Access::ReadWrite => wit::Access::ReadWrite,
                    },
                })
                .collect(),
            max_output_bytes: budget.output,
        };

        let mut sandbox =
            Sandbox::new(rt, &self.name, grants, budget).map_err(|e| ToolCallError::Sandbox {
                tool: tool.to_string(),
                message: e.to_string(),
            })?;
        if let Some(sink) = sink {
            *sandbox.state_mut().output() = OutputCtx::passing_to(sink, budget.output);
        }
        let pre = &self.pre;
        // The generated binding takes the `json` alias as `&String`.
        let input = input.to_string();
        let outcome = sandbox
            .run(async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .rawko_plugin_tools()
                    .call_call(&mut *store, tool, &input, &wit_cx)
                    .await
            })
            .await;
        // The result is the pieces handed over, then what the call returned, all within the
        // output budget; a piece past it trapped, and is reported as the budget it broke.
        let written = sandbox.state_mut().output().take();
        let result = match outcome {
            _ if written.over => Err(Failure::Budget(BudgetKind::Output)),
            Ok(Ok(content)) => {
                if written.bytes.saturating_add(content.len() as u64) > budget.output {
                    Err(Failure::Budget(BudgetKind::Output))
                } else if written.gathered.is_empty() {
                    Ok(content)
                } else {
                    let mut whole = written.gathered;
                    whole.push_str(&content);
                    Ok(whole)
                }
            }
            Ok(Err(guest)) => return Err(guest_error(tool, guest, budget.output)),
            Err(f) => Err(f),
        };
        result.map_err(|f| failure_error(f, tool, &budget, sandbox.stderr_tail()))
    }
}

/// Ask a freshly loaded plugin for its tools, under a fixed budget and with no filesystem.
async fn describe(
    rt: &Runtime,
    pre: &ToolPre<HostState>,
    name: &Arc<str>,
) -> Result<Vec<CachedSpec>, ToolCallError> {
    let none = FsGrants::none();
    let mut sandbox =
        Sandbox::new(rt, name, &none, DESCRIBE_BUDGET).map_err(|e| ToolCallError::Sandbox {
            tool: "list-tools".into(),
            message: e.to_string(),
        })?;
    let outcome = sandbox
        .run(async |store| {
            let instance = pre.instantiate_async(&mut *store).await?;
            instance
                .rawko_plugin_tools()
                .call_list_tools(&mut *store)
                .await
        })
        .await;
    let specs = outcome
        .map_err(|f| failure_error(f, "list-tools", &DESCRIBE_BUDGET, sandbox.stderr_tail()))?;
    Ok(specs
        .into_iter()
        .map(|s| CachedSpec {
            name: s.name,
            description: s.description,
            // Checked in `check_specs`; kept as text here if it is not JSON.
            input_schema: serde_json::from_str(&s.input_schema)
                .unwrap_or(serde_json::Value::String(s.input_schema)),
        })
        .collect())
}

/// Refuse a tool list that would confuse a model or the host, or crowd its prompts.
fn check_specs(specs: Vec<CachedSpec>) -> Result<Vec<ToolInfo>, String> {
    if specs.is_empty() {
        return Err("provides no tools".into());
    }
    if specs.len() > MAX_TOOLS {
        return Err(format!(
            "provides {} tools; a plugin may provide at most {MAX_TOOLS}",
            specs.len()
        ));
    }
    let mut seen = std::collections::HashSet::new();
    let mut tools = Vec::with_capacity(specs.len());
    for s in specs {
        let valid_name = !s.name.is_empty()
            && s.name.len() <= MAX_TOOL_NAME
            && s.name.starts_with(|c: char| c.is_ascii_alphabetic())
            && s.name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(format!(
                "tool name {:?} is not allowed (letters, digits, `_` and `-`, starting with a letter, at most {MAX_TOOL_NAME})",
                s.name
            ));
        }
        if !seen.insert(s.name.clone()) {
            return Err(format!("provides tool `{}` twice", s.name));
        }
        if s.description.len() > MAX_DESCRIPTION_BYTES {
            return Err(format!(
                "tool `{}` has a description of {} bytes; at most {MAX_DESCRIPTION_BYTES} are allowed (it goes into every prompt)",
                s.name,
                s.description.len()
            ));
        }
        if s.input_schema.to_string().len() > MAX_SCHEMA_BYTES {
            return Err(format!(
                "tool `{}` has an input schema over {MAX_SCHEMA_BYTES} bytes",
                s.name
            ));
        }
        if !s.input_schema.is_object() {
            return Err(format!(
                "tool `{}` has an input schema that is not a JSON object",
                s.name
            ));
        }
        tools.push(ToolInfo {
            name: s.name,
            description: s.description,
            input_schema: s.input_schema,
            validator: OnceLock::new(),
        });
    }
    Ok(tools)
}

fn guest_error(tool: &str, e: wit::ToolError, max: u64) -> ToolCallError {
    let (kind, message) = match e {
        wit::ToolError::InvalidInput(m) => (GuestErrorKind::InvalidInput, m),
        wit::ToolError::UnknownTool(m) => (GuestErrorKind::UnknownTool, m),
        wit::ToolError::NotFound(m) => (GuestErrorKind::NotFound, m),
        wit::ToolError::Denied(m) => (GuestErrorKind::Denied, m),
        wit::ToolError::Failed(m) => (GuestErrorKind::Failed, m),
    };
    ToolCallError::Tool {
        tool: tool.to_string(),
        kind,
        message: truncate(message, usize::try_from(max).unwrap_or(usize::MAX)),
    }
}

fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str(" [truncated]");
    }
    s
}

/// Put a sandbox failure into a tool call's words.
fn failure_error(f: Failure, tool: &str, budget: &Budget, stderr: String) -> ToolCallError {
    match f {
        Failure::Budget(kind) => ToolCallError::Budget {
            tool: tool.to_string(),
            kind,
            limit: kind.limit(budget),
        },
        Failure::Trap(message) => ToolCallError::Trap {
            tool: tool.to_string(),
            message: Failure::with_stderr(message, &stderr),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, description: &str) -> CachedSpec {
        CachedSpec {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({"type": "object"}),
        }
    }

    /// A plugin cannot crowd every prompt: too many tools, a huge description or schema, a
    /// name given twice, all refuse the plugin; a plugin at the limits loads.
    #[test]
    fn a_tool_list_that_would_crowd_the_prompts_is_refused() {
        let at_limit: Vec<CachedSpec> = (0..MAX_TOOLS)
            .map(|i| spec(&format!("T{i}"), &"d".repeat(MAX_DESCRIPTION_BYTES)))
            .collect();
        assert_eq!(check_specs(at_limit).unwrap().len(), MAX_TOOLS);

        let too_many: Vec<CachedSpec> = (0..=MAX_TOOLS)
            .map(|i| spec(&format!("T{i}"), "d"))
            .collect();
        assert!(check_specs(too_many).unwrap_err().contains("at most 64"));

        let long = vec![spec("Big", &"d".repeat(MAX_DESCRIPTION_BYTES + 1))];
        assert!(check_specs(long).unwrap_err().contains("description"));

        let mut huge = spec("Schema", "d");
        huge.input_schema =
            serde_json::json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        assert!(
            check_specs(vec![huge])
                .unwrap_err()
                .contains("input schema over")
        );

        let twice = vec![spec("Same", "a"), spec("Same", "b")];
        assert!(check_specs(twice).unwrap_err().contains("twice"));
    }
}
