//! The one list that registers the host's own tools, each behind one trait ([`HostTool`]).
//!
//! A host tool describes itself (name, description, input schema, what it does to the
//! workspace, the kind an editor shows it as) and runs a call with what its caller hands it in
//! a [`HostCallContext`]. `tools list`, `tool call`, runs, `rawko mcp serve` and `rawko acp`
//! reach every host tool through [`HostTool`] alone, so a tool that is registered is routed,
//! and one that is not does not exist: nothing falls through to another tool.

use std::sync::{Arc, OnceLock};

use rawko_agents::catalogue::{self, AcpKind};

pub use crate::tool::{Audit, HostCallContext, HostFuture, HostTool, fs_capability};

/// The host's own tools, in the order they are listed. Registering a host tool is a line here.
const HOST_TOOLS: &[Register] = &[
    crate::bash::register,
    crate::git::register,
    crate::knowledge::register,
    #[cfg(debug_assertions)]
    crate::probe::register,
];

/// Makes a host tool, or none when it is not wanted here.
pub type Register = fn() -> Option<Arc<dyn HostTool>>;

/// The registered host tools, made once.
pub fn host_tools() -> &'static [Arc<dyn HostTool>] {
    static TOOLS: OnceLock<Vec<Arc<dyn HostTool>>> = OnceLock::new();
    TOOLS.get_or_init(|| HOST_TOOLS.iter().filter_map(|make| make()).collect())
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
