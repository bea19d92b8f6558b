//! The `Git` tool, provided by the host: git operations on the workspace's repository through
//! gitoxide ([`rawko_git`]), which never runs a program the repository names.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rawko_agents::catalogue::{AcpKind, ToolAccess};

use crate::tool::{Audit, HostCallContext, HostFuture, HostTool, fs_capability};
use rawko_capability::{Access, FsGrants};
use rawko_git::{GitError, Identity, Options, READ_OPS, Request, WRITE_OPS};
use rawko_runtime::tool::GuestErrorKind;
use rawko_runtime::{ToolCallError, ToolCallOutput, ToolInfo};

/// The tool's name, as models call it.
pub const NAME: &str = "Git";

const DESCRIPTION: &str = "Inspect (and, with write access, change) the workspace's git \
repository without running git: no hooks, filters, pagers or other programs the repository \
names ever run, and nothing is pushed or fetched. `op` is one of: status; diff (rev: a commit \
to compare the work tree with, or A..B; staged: compare HEAD with the index; paths; max_lines); \
log (rev, paths, max_count); show (rev: a commit, or REV:path for a file's content); blame \
(path, rev); branch (lists branches). With write access: add (paths; \".\" for everything); \
commit (message; commits what is staged); switch (branch, create); stash (pop: false saves \
local changes, true restores the newest stash); restore (paths; staged: unstage instead of \
discarding work-tree changes). Paths are relative to the workspace. Output is cut with a \
marker when long.";

/// The tool's description and input schema.
pub fn info() -> ToolInfo {
    let ops: Vec<&str> = READ_OPS.iter().chain(WRITE_OPS).copied().collect();
    ToolInfo::new(
        NAME,
        DESCRIPTION,
        serde_json::json!({
            "type": "object",
            "properties": {
                "op": {"type": "string", "enum": ops, "description": "The operation."},
                "rev": {"type": "string", "maxLength": 256, "description": "A revision: a commit, branch, tag, HEAD~2, A..B (diff), or REV:path (show)."},
                "paths": {"type": "array", "items": {"type": "string", "maxLength": 4096}, "maxItems": 256, "description": "Paths relative to the workspace."},
                "path": {"type": "string", "maxLength": 4096, "description": "The file to blame."},
                "staged": {"type": "boolean", "description": "diff: HEAD against the index; restore: unstage."},
                "max_lines": {"type": "integer", "minimum": 1, "maximum": rawko_git::MAX_LINES, "description": "diff and show: most lines of output (default 400)."},
                "max_count": {"type": "integer", "minimum": 1, "maximum": rawko_git::MAX_COUNT, "description": "log: most commits (default 20)."},
                "message": {"type": "string", "maxLength": 65536, "description": "commit: the message."},
                "branch": {"type": "string", "maxLength": 256, "description": "switch: the branch."},
                "create": {"type": "boolean", "description": "switch: create the branch at HEAD first."},
                "pop": {"type": "boolean", "description": "stash: restore and drop the newest stash instead of saving."}
            },
            "required": ["op"],
            "additionalProperties": false
        }),
    )
}

/// The tool, for the registry.
pub fn register() -> Option<Arc<dyn HostTool>> {
    Some(Arc::new(Git { info: info() }))
}

/// The `Git` tool.
#[derive(Debug)]
pub struct Git {
    info: ToolInfo,
}

impl HostTool for Git {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// It reads: its write operations need the write grant, which a read-only agent does not get.
    fn access(&self) -> ToolAccess {
        ToolAccess::Read
    }

    fn acp_kind(&self) -> AcpKind {
        AcpKind::Other
    }

    /// The workspace is audited as used with the call's grant before anything is read.
    fn call<'a>(&'a self, cx: &'a HostCallContext<'a>, input: &'a str) -> HostFuture<'a> {
        Box::pin(async move {
            cx.audit(Audit::new(
                fs_capability(cx.grants),
                &cx.workspace.display().to_string(),
                true,
                "Git (rawko itself, no program run) on the workspace's repository",
            ));
            call(cx.workspace, cx.grants, cx.git_identity(), input).await
        })
    }
}

/// Check and run one `Git` call, without blocking the caller's runtime.
async fn call(
    workspace: &Path,
    grants: &FsGrants,
    identity: &Identity,
    input: &str,
) -> Result<ToolCallOutput, ToolCallError> {
    let started = Instant::now();
    let request: Request = crate::parse_input(&info(), input)?;
    let access = crate::workspace_access(NAME, workspace, grants)?;
    let opts = Options {
        write: access == Access::ReadWrite,
        identity: identity.clone(),
    };
    let workspace = workspace.to_path_buf();
    // `run` confines a thread of its own; waiting for it is what goes to the blocking pool.
    let result = tokio::task::spawn_blocking(move || rawko_git::run(&workspace, request, &opts))
        .await
        .unwrap_or_else(|_| Err(GitError::Failed("the git worker stopped".into())));
    match result {
        Ok(content) => Ok(ToolCallOutput {
            content,
            duration: started.elapsed(),
        }),
        Err(GitError::Invalid(m)) => Err(crate::host_error(NAME, GuestErrorKind::InvalidInput, m)),
        Err(GitError::Denied(m)) => Err(crate::host_error(NAME, GuestErrorKind::Denied, m)),
        Err(GitError::Failed(m)) => Err(crate::host_error(NAME, GuestErrorKind::Failed, m)),
    }
}
