//! Command tools (DocLoom `spec.tools[]`): a fixed program and argument list, with `${PARAM}`
//! replaced by the model's input and no shell in between.
//!
//! The argv is built word by word, so a parameter value is always exactly one argument, never
//! a second command. Parameters are also passed as `PARAM_<NAME>` environment variables. The
//! program runs through the same executor as `Bash` (scrubbed environment, closed stdin,
//! deadline killing the process group, capped output, landlock on writes); stdout is the result
//! (as JSON when it parses), and a non-zero exit status is a tool error.

use std::time::Duration;

pub use rawko_agents::model::CommandTool;
use rawko_shell::exec::{self, ExecOptions, Launch};
use rawko_shell::model::{ListItem, Pipeline, Program, Script, SimpleCommand, Stage};
use rawko_shell::{ParsedCommand, Resolver, Word};

/// Why a command tool call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandToolError {
    #[error("{tool}: missing parameter `{param}`")]
    MissingParam { tool: String, param: String },
    #[error("{tool}: `{command}` is not a program on PATH")]
    NotFound { tool: String, command: String },
    #[error("{tool} exited with status {status}: {stderr}")]
    Failed {
        tool: String,
        status: i32,
        stderr: String,
    },
    #[error("{tool} timed out after {secs} s")]
    Timeout { tool: String, secs: u64 },
    #[error("{tool}: {message}")]
    Setup { tool: String, message: String },
}

/// A successful call: stdout, and its JSON value when it is JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandToolOutput {
    pub text: String,
    pub json: Option<serde_json::Value>,
    /// The kernel sandbox policy the program ran under; `None` when unconfined.
    pub sandbox: Option<rawko_sandbox::Policy>,
}

/// Where and with what a command tool runs.
#[derive(Debug, Clone)]
pub struct CommandToolContext<'a> {
    pub resolver: &'a Resolver,
    /// Deadline; [`exec::DEFAULT_TIMEOUT`] when unset.
    pub timeout: Option<Duration>,
    /// How the tool's program is started (the kernel sandbox, or not).
    pub launch: &'a Launch,
    pub workspace: &'a std::path::Path,
    pub write_paths: &'a [std::path::PathBuf],
}

fn value_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The argv for `params`: each `${NAME}` replaced by the parameter's value.
pub fn argv(
    tool: &CommandTool,
    params: &serde_json::Map<String, serde_json::Value>,
) -> Result<Vec<String>, CommandToolError> {
    let mut argv = vec![tool.command.clone()];
    for a in &tool.args {
        let mut out = String::new();
        let mut rest = a.as_str();
        while let Some(start) = rest.find("${") {
            let Some(len) = rest[start + 2..].find('}') else {
                break;
            };
            let name = &rest[start + 2..start + 2 + len];
            let value = params
                .get(name)
                .ok_or_else(|| CommandToolError::MissingParam {
                    tool: tool.name.clone(),
                    param: name.to_string(),
                })?;
            out.push_str(&rest[..start]);
            out.push_str(&value_text(value));
            rest = &rest[start + 3 + len..];
        }
        out.push_str(rest);
        argv.push(out);
    }
    Ok(argv)
}

/// `PARAM_<NAME>` for every parameter (upper case, other characters as `_`).
pub fn env(params: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    params
        .iter()
        .map(|(k, v)| {
            let name: String = k
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            format!("PARAM_{name}={}", value_text(v))
        })
        .collect()
}

/// Run the tool with `params`.
pub async fn run(
    tool: &CommandTool,
    params: &serde_json::Map<String, serde_json::Value>,
    cx: &CommandToolContext<'_>,
) -> Result<CommandToolOutput, CommandToolError> {
    let argv = argv(tool, params)?;
    let program: Program = cx.resolver.program(&tool.command, cx.workspace);
    if program.path.is_none() {
        return Err(CommandToolError::NotFound {
            tool: tool.name.clone(),
            command: tool.command.clone(),
        });
    }
    let command = SimpleCommand {
        argv: argv.iter().cloned().map(Word::Literal).collect(),
        program,
        assignments: env(params).into_iter().map(Word::Literal).collect(),
        redirects: Vec::new(),
        cwd: cx.workspace.to_path_buf(),
        nesting: Vec::new(),
        text: argv.join(" "),
        not_runnable: Vec::new(),
    };
    let parsed = ParsedCommand {
        raw: command.text.clone(),
        commands: vec![command],
        unsupported: Vec::new(),
        script: Script(vec![ListItem {
            first: Pipeline {
                negated: false,
                timed: false,
                stages: vec![Stage::Command(0)],
            },
            rest: Vec::new(),
            background: false,
        }]),
    };
    let timeout = cx
        .timeout
        .unwrap_or(exec::DEFAULT_TIMEOUT)
        .min(exec::MAX_TIMEOUT);
    let opts = ExecOptions {
        workspace: cx.workspace.to_path_buf(),
        write_paths: cx.write_paths.to_vec(),
        path_dirs: cx.resolver.path_dirs().to_vec(),
        timeout,
        max_output: exec::DEFAULT_MAX_OUTPUT,
        separate_stderr: true,
        launch: cx.launch.clone(),
    };
    let run = exec::run(&parsed, &opts)
        .await
        .map_err(|e| CommandToolError::Setup {
            tool: tool.name.clone(),
            message: e.to_string(),
        })?;
    if run.timed_out {
        return Err(CommandToolError::Timeout {
            tool: tool.name.clone(),
            secs: timeout.as_secs(),
        });
    }
    if run.exit_code != 0 {
        return Err(CommandToolError::Failed {
            tool: tool.name.clone(),
            status: run.exit_code,
            stderr: run.stderr.trim().to_string(),
        });
    }
    let json = serde_json::from_str(run.output.trim()).ok();
    Ok(CommandToolOutput {
        text: run.output,
        json,
        sandbox: run.sandbox,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().unwrap().clone()
    }

    fn tool(command: &str, args: &[&str]) -> CommandTool {
        CommandTool {
            name: "t".into(),
            description: String::new(),
            command: command.into(),
            args: args.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn parameters_are_substituted_as_whole_words() {
        let t = tool("echo", &["--name=${NAME}", "${NAME}", "plain"]);
        let p = params(serde_json::json!({"NAME": "a; rm -rf x", "n": 3}));
        assert_eq!(
            argv(&t, &p).unwrap(),
            ["echo", "--name=a; rm -rf x", "a; rm -rf x", "plain"]
        );
        assert!(env(&p).contains(&"PARAM_N=3".to_string()));
        assert!(matches!(
            argv(&tool("echo", &["${MISSING}"]), &p),
            Err(CommandToolError::MissingParam { .. })
        ));
    }

    fn run(t: &CommandTool, p: serde_json::Value) -> Result<CommandToolOutput, CommandToolError> {
        run_within(t, p, Duration::from_secs(5))
    }

    fn run_within(
        t: &CommandTool,
        p: serde_json::Value,
        timeout: Duration,
    ) -> Result<CommandToolOutput, CommandToolError> {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        let resolver = Resolver::from_env(&[&ws]);
        let cx = CommandToolContext {
            resolver: &resolver,
            timeout: Some(timeout),
            launch: &Launch::Unconfined { reaper: None },
            workspace: &ws,
            write_paths: &[],
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(super::run(t, &params(p), &cx))
    }

    #[test]
    fn stdout_is_the_result_and_json_is_parsed() {
        let out = run(
            &tool("printf", &["{\"n\": ${N}}"]),
            serde_json::json!({"N": 4}),
        )
        .unwrap();
        assert_eq!(out.json, Some(serde_json::json!({"n": 4})));
        let out = run(
            &tool("sh", &["-c", "echo \"$PARAM_WHO\""]),
            serde_json::json!({"who": "x y"}),
        )
        .unwrap();
        assert_eq!(out.text, "x y\n");
        assert_eq!(out.json, None);
    }

    #[test]
    fn failure_and_timeout_are_tool_errors() {
        let e = run(
            &tool("sh", &["-c", "echo oops >&2; exit 3"]),
            serde_json::json!({}),
        )
        .unwrap_err();
        assert_eq!(
            e,
            CommandToolError::Failed {
                tool: "t".into(),
                status: 3,
                stderr: "oops".into()
            }
        );
        let slow = tool("sleep", &["10"]);
        assert!(matches!(
            run_within(&slow, serde_json::json!({}), Duration::from_millis(200)),
            Err(CommandToolError::Timeout { .. })
        ));
    }
}
