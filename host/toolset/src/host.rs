//! The host's own tools behind one trait, and the one list that registers them.
//!
//! A host tool describes itself (name, description, input schema, what it does to the
//! workspace, the kind an editor shows it as) and runs a call with what its caller hands it in
//! a [`HostCallContext`]. `tools list`, `tool call`, runs, `rawko mcp serve` and `rawko acp`
//! reach every host tool through [`HostTool`] alone, so a tool that is registered is routed,
//! and one that is not does not exist: nothing falls through to another tool.

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};

use rawko_agents::catalogue::{self, AcpKind, BuiltinTool, ToolAccess};
use rawko_capability::{Access, FsGrants};
use rawko_git::Identity;
use rawko_runtime::{ToolCallError, ToolCallOutput, ToolInfo};

use crate::bash::BashContext;

/// The host's own tools, in the order they are listed. Registering a host tool is a line here.
const HOST_TOOLS: &[Register] = &[
    || Some(Arc::new(crate::bash::Bash::new())),
    || Some(Arc::new(crate::git::Git::new())),
    || Some(Arc::new(crate::knowledge::Knowledge::new())),
    #[cfg(debug_assertions)]
    crate::probe::register,
];

/// Makes a host tool, or none when it is not wanted here.
pub type Register = fn() -> Option<Arc<dyn HostTool>>;

/// What a host tool's call returns.
pub type HostFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolCallOutput, ToolCallError>> + 'a>>;

/// A tool the host implements itself rather than a plugin.
pub trait HostTool: std::fmt::Debug + Send + Sync {
    /// Its name, description and input schema, as models see them.
    fn info(&self) -> &ToolInfo;

    /// Whether it only reads the workspace or may change it.
    fn access(&self) -> ToolAccess;

    /// The kind of call an editor shows it as.
    fn acp_kind(&self) -> AcpKind;

    /// Whether it runs native commands, and so needs the shell set up
    /// ([`HostCallContext::shell`]) for its calls.
    fn runs_commands(&self) -> bool {
        false
    }

    /// Check and run one call. What was decided on the way (and would be audited) goes to
    /// [`HostCallContext::audit`].
    fn call<'a>(&'a self, cx: &'a HostCallContext<'a>, input: &'a str) -> HostFuture<'a>;
}

/// The catalogue's entry for a built-in host tool: where its access class and kind come from.
pub(crate) fn catalogued(name: &str) -> &'static BuiltinTool {
    catalogue::builtin(name)
        .unwrap_or_else(|| panic!("the built-in host tool {name} is missing from the catalogue"))
}

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

/// One decision a host tool made for a call, for the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Audit {
    /// The capability used: `fs.read`, `fs.write`, `exec`, `sandbox`.
    pub capability: String,
    /// What it was used on.
    pub detail: String,
    pub allow: bool,
    pub reason: String,
}

impl Audit {
    pub fn new(capability: &str, detail: &str, allow: bool, reason: &str) -> Self {
        Audit {
            capability: capability.into(),
            detail: detail.into(),
            allow,
            reason: reason.into(),
        }
    }

    /// The kernel sandbox a native command ran under: its mode, network, limits and paths, or
    /// that it ran unconfined.
    pub fn sandbox(policy: &Option<rawko_sandbox::Policy>) -> Self {
        match policy {
            Some(p) => Audit::new(
                "sandbox",
                &serde_json::to_string(p).unwrap_or_default(),
                true,
                &format!(
                    "{}, network {}",
                    p.mode,
                    if p.network { "on" } else { "off" }
                ),
            ),
            None => Audit::new(
                "sandbox",
                "none",
                true,
                "no kernel sandbox (--no-sandbox, or the agent's mode is full)",
            ),
        }
    }
}

/// The filesystem capability `grants` give: `fs.write` with any read-write grant, else
/// `fs.read`.
pub fn fs_capability(grants: &FsGrants) -> &'static str {
    if grants.iter().any(|g| g.access() == Access::ReadWrite) {
        "fs.write"
    } else {
        "fs.read"
    }
}

/// What a host tool's call gets from its caller: the workspace and the grants there, the shell
/// for a tool that [runs commands](HostTool::runs_commands), who commits, and where its
/// decisions are recorded.
pub struct HostCallContext<'a> {
    pub workspace: &'a Path,
    pub grants: &'a FsGrants,
    /// The filter chain, policy, resolver and launch commands go through; set by the caller
    /// for a tool that runs commands.
    pub shell: Option<BashContext<'a>>,
    /// Who the Git tool commits as, read when first needed.
    git_identity: &'a OnceCell<Identity>,
    audit: RefCell<Vec<Audit>>,
}

impl<'a> HostCallContext<'a> {
    pub fn new(
        workspace: &'a Path,
        grants: &'a FsGrants,
        git_identity: &'a OnceCell<Identity>,
    ) -> Self {
        HostCallContext {
            workspace,
            grants,
            shell: None,
            git_identity,
            audit: RefCell::new(Vec::new()),
        }
    }

    /// The same, with the shell for commands.
    pub fn with_shell(mut self, shell: BashContext<'a>) -> Self {
        self.shell = Some(shell);
        self
    }

    /// The user's git identity.
    pub fn git_identity(&self) -> &Identity {
        self.git_identity.get_or_init(Identity::from_user_config)
    }

    /// Record a decision.
    pub fn audit(&self, entry: Audit) {
        self.audit.borrow_mut().push(entry);
    }

    /// The decisions recorded so far, in order, taken out.
    pub fn take_audit(&self) -> Vec<Audit> {
        self.audit.take()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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
