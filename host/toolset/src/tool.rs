//! What a host tool is: the trait each one implements, what its call gets from its caller
//! ([`HostCallContext`], with the shell set up for a tool that runs commands), and the decisions
//! it records for the audit log.

use std::cell::{OnceCell, RefCell};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;

use rawko_agents::catalogue::{AcpKind, ToolAccess};
use rawko_capability::{Access, FsGrants};
use rawko_git::Identity;
use rawko_runtime::{Runtime, ToolCallError, ToolCallOutput, ToolInfo};
use rawko_shell::exec::Launch;
use rawko_shell::{Policy, Resolver};

use crate::chain::Chain;

/// What a host tool's call returns.
pub type HostFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolCallOutput, ToolCallError>> + 'a>>;

/// A tool the host implements itself rather than a plugin.
pub trait HostTool: std::fmt::Debug + Send + Sync {
    /// Its name, description and input schema, as models see them.
    fn info(&self) -> &ToolInfo;

    /// Whether it only reads the workspace or may change it. Agents are judged by it: one
    /// allowed no tool that writes is read-only.
    fn access(&self) -> ToolAccess;

    /// The kind of call an editor shows it as, and that an external agent's request of this kind
    /// is judged as.
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

/// What a call that runs commands needs: the runtime, the filters, the policy and the resolver
/// of this workspace.
#[derive(Clone, Copy)]
pub struct BashContext<'a> {
    pub rt: &'a Runtime,
    pub chain: &'a Chain,
    pub policy: &'a Policy,
    pub resolver: &'a Resolver,
    /// How the command's programs are started (the kernel sandbox, or not).
    pub launch: &'a Launch,
}
