//! Which workspace a task belongs to, told apart across machines: the repository's first
//! commit and its remote (credentials stripped), and the workspace's path. The store only
//! records them; `rawko_git::repository_id` reads them from the repository.

use serde::Serialize;

/// A task's workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WorkspaceId {
    /// The repository's root commit (the first one on HEAD's first-parent line); None outside
    /// a repository or before its first commit.
    pub root: Option<String>,
    /// The URL of its default remote, without user name or password in an `http(s)` URL and
    /// without a password in any other.
    pub remote: Option<String>,
    /// The workspace's path on its host.
    pub path: String,
}

impl WorkspaceId {
    /// How a person tells the workspace apart: its remote, else its path.
    pub fn label(&self) -> &str {
        self.remote.as_deref().unwrap_or(&self.path)
    }
}
