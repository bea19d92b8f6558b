//! The `Bash` tool, provided by the host: a command line is parsed, judged by the filter chain,
//! and (only when allowed) run by rawko's executor under the `exec` capability.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::chain::settle_ask;
pub use crate::tool::BashContext;
use rawko_agents::catalogue::{AcpKind, ToolAccess};

use crate::tool::{Audit, HostCallContext, HostFuture, HostTool};
use rawko_runtime::tool::GuestErrorKind;
use rawko_runtime::{ToolCallError, ToolCallOutput, ToolInfo};
use rawko_shell::exec::{self, ExecOptions, ExecOutput};
use rawko_shell::verdict::{CheckReport, Decision};

/// The tool's name, as models call it.
pub const NAME: &str = "Bash";

const DESCRIPTION: &str = "Run a shell command line in the workspace and return its output \
(stdout and stderr interleaved) and exit status. The command is parsed and every program in it \
must be allowed by the agent's policy; rawko runs it itself, so use plain commands, pipes, \
`&&`, `||`, `;`, redirections, quotes and globs (expanded inside the workspace only). Not \
supported: variable and command substitution, `~`, brace expansion, loops and conditionals, \
functions, background jobs. stdin is closed. The timeout is in milliseconds (default 120000, \
at most 600000); output beyond 30000 characters is cut, keeping the beginning and the end.";

/// The tool's description and input schema.
pub fn info() -> ToolInfo {
    ToolInfo::new(
        NAME,
        DESCRIPTION,
        serde_json::json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line to run."},
                "timeout": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": exec::MAX_TIMEOUT.as_millis() as u64,
                    "description": "Milliseconds before the command and everything it started are killed (default 120000)."
                },
                "description": {"type": "string", "description": "What the command does, in a few words, for the user."}
            },
            "required": ["command"],
            "additionalProperties": false
        }),
    )
}

#[derive(Debug, Deserialize)]
struct Input {
    command: String,
    timeout: Option<u64>,
    #[allow(dead_code)]
    description: Option<String>,
}

/// A finished call: the text for the model, the run's details, and the check that allowed it.
#[derive(Debug, Clone)]
pub struct BashOutcome {
    pub output: ToolCallOutput,
    pub run: ExecOutput,
    pub check: CheckReport,
}

/// The tool, for the registry.
pub fn register() -> Option<Arc<dyn HostTool>> {
    Some(Arc::new(Bash { info: info() }))
}

/// The `Bash` tool.
#[derive(Debug)]
pub struct Bash {
    info: ToolInfo,
}

impl HostTool for Bash {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// It changes the workspace; an editor shows its calls as commands run.
    fn access(&self) -> ToolAccess {
        ToolAccess::Write
    }

    fn acp_kind(&self) -> AcpKind {
        AcpKind::Execute
    }

    fn runs_commands(&self) -> bool {
        true
    }

    /// The command line is audited as allowed (with the filter that allowed it, and the
    /// sandbox it ran in) or, when a filter or the executor refused it, as denied.
    fn call<'a>(&'a self, cx: &'a HostCallContext<'a>, input: &'a str) -> HostFuture<'a> {
        Box::pin(async move {
            let Some(shell) = cx.shell else {
                return Err(crate::host_error(
                    NAME,
                    GuestErrorKind::Failed,
                    "the shell is not set up for this call".into(),
                ));
            };
            let command = serde_json::from_str::<serde_json::Value>(input)
                .ok()
                .and_then(|v| {
                    v.get("command")
                        .and_then(|c| c.as_str())
                        .map(str::to_string)
                })
                .unwrap_or_default();
            match call(shell, input).await {
                Ok(outcome) => {
                    cx.audit(Audit::new(
                        "exec",
                        &command,
                        true,
                        &format!("{}: {}", outcome.check.decided_by, outcome.check.reason),
                    ));
                    cx.audit(Audit::sandbox(&outcome.run.sandbox));
                    Ok(outcome.output)
                }
                Err(e) => {
                    if let ToolCallError::Tool { .. } = &e {
                        cx.audit(Audit::new("exec", &command, false, &e.to_string()));
                    }
                    Err(e)
                }
            }
        })
    }
}

/// Check and run one `Bash` call. A denied command never starts a process.
async fn call(cx: BashContext<'_>, input: &str) -> Result<BashOutcome, ToolCallError> {
    let started = Instant::now();
    let input: Input = crate::parse_input(&info(), input)?;
    let timeout = input
        .timeout
        .map(Duration::from_millis)
        .unwrap_or(exec::DEFAULT_TIMEOUT)
        .min(exec::MAX_TIMEOUT);

    let mut check = cx
        .chain
        .check(cx.rt, &input.command, cx.policy, cx.resolver)
        .await;
    settle_ask(&mut check);
    tracing::info!(
        decision = %check.decision,
        decided_by = %check.decided_by,
        "bash check: {}",
        check.reason
    );
    let parsed = match (&check.decision, &check.command) {
        (Decision::Allow, Some(parsed)) => parsed,
        _ => {
            return Err(crate::host_error(
                NAME,
                GuestErrorKind::Denied,
                format!("denied by {}: {}", check.decided_by, check.reason),
            ));
        }
    };
    let opts = ExecOptions {
        workspace: cx.policy.workspace.clone(),
        write_paths: cx.policy.write_paths.clone(),
        path_dirs: cx.resolver.path_dirs().to_vec(),
        timeout,
        max_output: exec::DEFAULT_MAX_OUTPUT,
        separate_stderr: false,
        launch: cx.launch.clone(),
    };
    let run = exec::run(parsed, &opts).await.map_err(|e| match e {
        exec::ExecError::NotRunnable(_) => {
            crate::host_error(NAME, GuestErrorKind::Denied, e.to_string())
        }
        exec::ExecError::Setup(_) => crate::host_error(NAME, GuestErrorKind::Failed, e.to_string()),
    })?;
    let mut content = run.output.clone();
    if run.exit_code != 0 && !run.timed_out {
        if !content.is_empty() && !content.ends_with('\n') {
            content.push('\n');
        }
        content.push_str(&format!("[exit status {}]", run.exit_code));
    }
    Ok(BashOutcome {
        output: ToolCallOutput {
            content,
            duration: started.elapsed(),
        },
        run,
        check,
    })
}
