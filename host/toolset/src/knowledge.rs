//! The `Knowledge` tool, provided by the host: search the workspace's knowledge index
//! ([`rawko_knowledge`]) by words. Each call first brings the index up to date (only files whose
//! stat changed are read again), so what an agent finds includes the edits made so far.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use rawko_agents::catalogue::{AcpKind, ToolAccess};

use crate::tool::{Audit, HostCallContext, HostFuture, HostTool, fs_capability};
use rawko_capability::FsGrants;
use rawko_knowledge::{Index, KnowledgeConfig, KnowledgeError, Quiet};
use rawko_runtime::tool::GuestErrorKind;
use rawko_runtime::{ToolCallError, ToolCallOutput, ToolInfo};
use serde::Deserialize;

/// The tool's name, as models call it.
pub const NAME: &str = "Knowledge";

const DESCRIPTION: &str = "Search the project's own docs and source for what it already knows: \
returns the best-matching passages (file, line range, text), best first. `query` is plain \
words (no query syntax); `k` is how many passages (default 5). Use it to find where something \
is described or implemented before reading whole files.";

/// Most passages a call returns.
const MAX_K: usize = 20;

/// Most bytes of output: the passages are cut to fit.
const MAX_OUTPUT: usize = 32 << 10;

/// The tool's description and input schema.
pub fn info() -> ToolInfo {
    ToolInfo::new(
        NAME,
        DESCRIPTION,
        serde_json::json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 1000, "description": "What to look for, in plain words."},
                "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": "How many passages (default 5)."}
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    )
}

#[derive(Debug, Deserialize)]
struct Input {
    query: String,
    k: Option<usize>,
}

/// The tool, for the registry.
pub fn register() -> Option<Arc<dyn HostTool>> {
    Some(Arc::new(Knowledge { info: info() }))
}

/// The `Knowledge` tool.
#[derive(Debug)]
pub struct Knowledge {
    info: ToolInfo,
}

impl HostTool for Knowledge {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// It only reads, and an editor shows its calls as searches.
    fn access(&self) -> ToolAccess {
        ToolAccess::Read
    }

    fn acp_kind(&self) -> AcpKind {
        AcpKind::Search
    }

    /// The workspace is audited as used with the call's grant before the index is touched.
    fn call<'a>(&'a self, cx: &'a HostCallContext<'a>, input: &'a str) -> HostFuture<'a> {
        Box::pin(async move {
            cx.audit(Audit::new(
                fs_capability(cx.grants),
                &cx.workspace.display().to_string(),
                true,
                "Knowledge (rawko itself) searches the workspace's knowledge index",
            ));
            call(cx.workspace, cx.grants, input).await
        })
    }
}

/// Check and run one `Knowledge` call, without blocking the caller's runtime.
async fn call(
    workspace: &Path,
    grants: &FsGrants,
    input: &str,
) -> Result<ToolCallOutput, ToolCallError> {
    let started = Instant::now();
    let input: Input = crate::parse_input(&info(), input)?;
    crate::workspace_access(NAME, workspace, grants)?;
    let root = workspace.to_path_buf();
    let k = input.k.unwrap_or(5).clamp(1, MAX_K);
    let query = input.query;
    let result = tokio::task::spawn_blocking(move || search(&root, &query, k))
        .await
        .unwrap_or_else(|_| Err(KnowledgeError::Query("the search stopped".into())));
    match result {
        Ok(content) => Ok(ToolCallOutput {
            content,
            duration: started.elapsed(),
        }),
        Err(KnowledgeError::Query(m)) => {
            Err(crate::host_error(NAME, GuestErrorKind::InvalidInput, m))
        }
        Err(KnowledgeError::Refused(m)) => Err(crate::host_error(NAME, GuestErrorKind::Denied, m)),
        Err(e) => Err(crate::host_error(
            NAME,
            GuestErrorKind::Failed,
            e.to_string(),
        )),
    }
}

/// Refresh the index of `root` (words only), then search it.
fn search(root: &Path, query: &str, k: usize) -> Result<String, KnowledgeError> {
    let config = KnowledgeConfig::load(root)?;
    let mut index = Index::open(root)?;
    index.refresh(&config, &mut Quiet)?;
    let hits = index.query(query, k, None)?;
    if hits.is_empty() {
        return Ok(format!("No passage matches {query:?}."));
    }
    let mut out = String::new();
    let per_hit = MAX_OUTPUT / hits.len();
    for h in &hits {
        let text = &h.text[..h.text.floor_char_boundary(per_hit)];
        out.push_str(&format!(
            "## {}:{}-{} (score {:.3})\n{}\n\n",
            h.path, h.start_line, h.end_line, h.score, text
        ));
    }
    Ok(out)
}
