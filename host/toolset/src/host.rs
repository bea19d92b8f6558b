//! The registry of the host's own tools, each behind one trait ([`HostTool`]) and listed once
//! (`host_tools!` in this crate's root).
//!
//! A host tool describes itself (name, description, input schema, what it does to the
//! workspace, the kind an editor shows it as) and runs a call with what its caller hands it in
//! a [`HostCallContext`]. `tools list`, `tool call`, runs, `rawko mcp serve` and `rawko acp`
//! reach every host tool through [`HostTool`] alone, so a tool that is registered is routed,
//! and one that is not does not exist: nothing falls through to another tool.

use std::sync::{Arc, OnceLock};

use rawko_agents::catalogue::{self, AcpKind, BuiltinTool};

pub use crate::tool::{Audit, HostCallContext, HostFuture, HostTool, fs_capability};

/// Makes a host tool, or none when it is not wanted here.
pub type Register = fn() -> Option<Arc<dyn HostTool>>;

/// The registered host tools, made once. Making them completes the agents' catalogue with what
/// each says of itself (its name, whether it writes, its kind), so every entry point that reads
/// agents calls this first.
pub fn host_tools() -> &'static [Arc<dyn HostTool>] {
    static TOOLS: OnceLock<Vec<Arc<dyn HostTool>>> = OnceLock::new();
    TOOLS.get_or_init(|| {
        let tools: Vec<Arc<dyn HostTool>> =
            crate::HOST_TOOLS.iter().filter_map(|make| make()).collect();
        catalogue::install(tools.iter().map(|t| BuiltinTool {
            // The name outlives the catalogue: a host tool is made once and never dropped.
            name: leak_name(&t.info().name),
            access: t.access(),
            acp_kind: t.acp_kind(),
        }));
        tools
    })
}

/// Make the host's tools, and with them the agents' catalogue complete, before anything reads
/// an agent.
pub fn install_catalogue() {
    host_tools();
}

fn leak_name(name: &str) -> &'static str {
    Box::leak(name.to_owned().into_boxed_str())
}

/// The ACP kind of tool `name`: the host tool's own, else the catalogue's, else none.
pub fn acp_kind(name: &str) -> Option<AcpKind> {
    host_tools()
        .iter()
        .find(|t| t.info().name == name)
        .map(|t| t.acp_kind())
        .or_else(|| catalogue::builtin(name).map(|t| t.acp_kind))
}

#[cfg(test)]
mod tests {
    use std::cell::OnceCell;
    use std::future::Future;

    use super::*;
    use rawko_capability::FsGrants;
    use rawko_runtime::ToolCallError;
    use rawko_runtime::tool::GuestErrorKind;

    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Each host tool answers a call itself, under its own name: input meant for another tool is
    /// refused by the tool called, and a tool that runs commands without a shell set up is a
    /// tool error, never a command run by some other tool.
    #[test]
    fn each_host_tool_answers_its_own_calls() {
        let ws = tempfile::tempdir().unwrap();
        let grants = FsGrants::none();
        let identity = OnceCell::new();
        let cx = HostCallContext::new(ws.path(), &grants, &identity);
        for tool in host_tools() {
            let name = tool.info().name.clone();
            let err = block_on(tool.call(&cx, r#"{"command": "touch ran"}"#)).unwrap_err();
            match err {
                ToolCallError::InvalidInput { tool, .. } => assert_eq!(tool, name),
                ToolCallError::Tool {
                    tool,
                    kind: GuestErrorKind::Failed,
                    message,
                } => {
                    assert_eq!(tool, name);
                    assert!(message.contains("shell is not set up"), "{message}");
                }
                e => panic!("{name}: {e}"),
            }
        }
        assert!(!ws.path().join("ran").exists());
    }

    #[test]
    fn each_host_tool_has_one_name() {
        let mut names: Vec<&str> = host_tools()
            .iter()
            .map(|t| t.info().name.as_str())
            .collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n);
    }
}
