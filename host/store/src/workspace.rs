//! Which workspace a task belongs to, told apart across machines: the repository's first
//! commit and its remote (credentials stripped), and the workspace's path.

use std::path::Path;

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
    /// The identity of the workspace at `path`, read with gix from the repository's own files
    /// (no git program, no user or system config).
    pub fn of(path: &Path) -> WorkspaceId {
        let (root, remote) = read_repository(path).unwrap_or_default();
        WorkspaceId {
            root,
            remote,
            path: path.display().to_string(),
        }
    }

    /// How a person tells the workspace apart: its remote, else its path.
    pub fn label(&self) -> &str {
        self.remote.as_deref().unwrap_or(&self.path)
    }
}

type Identity = (Option<String>, Option<String>);

fn read_repository(path: &Path) -> Option<Identity> {
    // Only a repository whose `.git` directory is in the workspace itself.
    if !std::fs::symlink_metadata(path.join(".git")).ok()?.is_dir() {
        return None;
    }
    let repo = gix::open_opts(path, gix::open::Options::isolated()).ok()?;
    let root = repo.head_id().ok().and_then(|head| {
        head.ancestors()
            .first_parent_only()
            .all()
            .ok()?
            .filter_map(Result::ok)
            .last()
            .map(|c| c.id.to_string())
    });
    let name = repo
        .remote_default_name(gix::remote::Direction::Fetch)
        .map(|n| n.to_string())
        .unwrap_or_else(|| "origin".into());
    let remote = repo.find_remote(name.as_str()).ok().and_then(|r| {
        let mut url = r.url(gix::remote::Direction::Fetch)?.clone();
        url.set_password(None);
        if matches!(url.scheme, gix::url::Scheme::Http | gix::url::Scheme::Https) {
            url.set_user(None);
        }
        Some(url.to_bstring().to_string())
    });
    Some((root, remote))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_repository_only_the_path_is_known() {
        let dir = tempfile::tempdir().unwrap();
        let id = WorkspaceId::of(dir.path());
        assert_eq!((id.root, id.remote), (None, None));
        assert_eq!(id.path, dir.path().display().to_string());
    }
}
