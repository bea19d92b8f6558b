//! `HostProbe`, a host tool that exists only for rawko's own tests: it proves that a host tool
//! is a module and one line in the registry, and nothing else, by being listed, called, served
//! over MCP and shown to an editor like any other. It is compiled into debug builds only, and
//! registered only when `RAWKO_TEST_HOST_TOOLS=1`, so no release binary has it and no ordinary
//! run lists it.

use std::sync::Arc;
use std::time::Instant;

use serde::Deserialize;

use crate::tool::{Audit, HostCallContext, HostFuture, HostTool, fs_capability};
use rawko_agents::catalogue::{AcpKind, ToolAccess};
use rawko_runtime::{ToolCallOutput, ToolInfo};

/// The tool's name, as models call it.
pub const NAME: &str = "HostProbe";

/// The environment variable that registers it.
pub const ENABLE: &str = "RAWKO_TEST_HOST_TOOLS";

/// The probe, when the environment asks for it.
pub fn register() -> Option<Arc<dyn HostTool>> {
    (std::env::var(ENABLE).as_deref() == Ok("1")).then(|| Arc::new(Probe::new()) as _)
}

#[derive(Debug)]
struct Probe {
    info: ToolInfo,
}

#[derive(Debug, Deserialize)]
struct Input {
    text: String,
}

impl Probe {
    fn new() -> Self {
        Probe {
            info: ToolInfo::new(
                NAME,
                "Answer with the text given and the filesystem access the call has. \
                 For rawko's own tests.",
                serde_json::json!({
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "maxLength": 1000, "description": "What to answer with."}
                    },
                    "required": ["text"],
                    "additionalProperties": false
                }),
            ),
        }
    }
}

impl HostTool for Probe {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    fn access(&self) -> ToolAccess {
        ToolAccess::Read
    }

    /// A kind no built-in tool has, so an editor's update shows where the kind came from.
    fn acp_kind(&self) -> AcpKind {
        AcpKind::Think
    }

    fn call<'a>(&'a self, cx: &'a HostCallContext<'a>, input: &'a str) -> HostFuture<'a> {
        Box::pin(async move {
            let started = Instant::now();
            let input: Input = crate::parse_input(&self.info, input)?;
            let capability = fs_capability(cx.grants);
            cx.audit(Audit::new(
                capability,
                &cx.workspace.display().to_string(),
                true,
                "HostProbe (rawko's test tool) answers",
            ));
            Ok(ToolCallOutput {
                content: format!("probe: {} ({capability})", input.text),
                duration: started.elapsed(),
            })
        })
    }
}
