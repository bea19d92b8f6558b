//! Finding the workspace's repository and opening it so that nothing in it can name a program.

use std::path::{Path, PathBuf};

use gix::bstr::{BString, ByteSlice};

use crate::{GitError, failed};

/// The workspace and the root of the repository it is in (the directory holding `.git`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    pub root: PathBuf,
    pub workspace: PathBuf,
}

impl Located {
    /// The repository-relative prefix of the workspace (`""` when it is the root), with a
    /// trailing slash otherwise.
    pub fn prefix(&self) -> String {
        match self.workspace.strip_prefix(&self.root) {
            Ok(p) if p.as_os_str().is_empty() => String::new(),
            Ok(p) => format!("{}/", p.to_string_lossy()),
            Err(_) => String::new(),
        }
    }
}

/// The repository `workspace` is in: the nearest ancestor (or itself) with a `.git` directory.
/// A `.git` that is a file or a symbolic link (linked worktrees, submodules, or a planted
/// pointer to another repository), a linked worktree's git directory, and alternates are refused:
/// the tool reads and writes only what is inside the repository's own directory.
pub fn locate(workspace: &Path) -> Result<Located, GitError> {
    let workspace = workspace
        .canonicalize()
        .map_err(|e| GitError::Failed(format!("the workspace {}: {e}", workspace.display())))?;
    for dir in workspace.ancestors() {
        let dotgit = dir.join(".git");
        let meta = match std::fs::symlink_metadata(&dotgit) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(GitError::Failed(format!("{}: {e}", dotgit.display()))),
        };
        if meta.file_type().is_symlink() {
            return Err(GitError::Denied(format!(
                "{} is a symbolic link; the Git tool only works on a repository whose .git \
                 directory is inside it",
                dotgit.display()
            )));
        }
        if !meta.is_dir() {
            return Err(GitError::Denied(format!(
                "{} is a file pointing at a git directory elsewhere (a linked worktree or a \
                 submodule); the Git tool only works on a repository whose .git directory is \
                 inside it",
                dotgit.display()
            )));
        }
        for inside in ["objects", "refs", "HEAD", "index", "config"] {
            if std::fs::symlink_metadata(dotgit.join(inside))
                .map(|m| m.file_type().is_symlink())
                .unwrap_or(false)
            {
                return Err(GitError::Denied(format!(
                    "{} is a symbolic link; the Git tool does not follow links out of the \
                     repository",
                    dotgit.join(inside).display()
                )));
            }
        }
        if dotgit.join("commondir").exists() {
            return Err(GitError::Denied(format!(
                "{} belongs to a linked worktree; open the main worktree instead",
                dotgit.display()
            )));
        }
        let alternates = dotgit.join("objects/info/alternates");
        if std::fs::metadata(&alternates)
            .map(|m| m.len() > 0)
            .unwrap_or(false)
        {
            return Err(GitError::Denied(format!(
                "{} borrows objects from other repositories (objects/info/alternates); the Git \
                 tool reads only the repository's own objects",
                dotgit.display()
            )));
        }
        return Ok(Located {
            root: dir.to_path_buf(),
            workspace,
        });
    }
    Err(GitError::Invalid(format!(
        "{} is not inside a git repository",
        workspace.display()
    )))
}

/// Config sections whose entries name programs git would run (filter drivers, diff drivers
/// with `command` or `textconv`, merge drivers): removed before anything reads them.
const PROGRAM_SECTIONS: &[&str] = &["filter", "diff", "merge"];

/// Open the located repository isolated (its own config only, no environment) and without the
/// sections that name programs. A `core.worktree` that moves the work tree elsewhere is refused.
pub fn open(located: &Located) -> Result<gix::Repository, GitError> {
    let opts = gix::open::Options::isolated().strict_config(false);
    let mut repo = gix::open_opts(&located.root, opts).map_err(|e| {
        GitError::Failed(format!(
            "cannot open the repository at {}: {e}",
            located.root.display()
        ))
    })?;
    let workdir = repo
        .workdir()
        .and_then(|w| w.canonicalize().ok())
        .ok_or_else(|| {
            GitError::Denied(format!(
                "the repository at {} has no work tree (bare, or core.worktree points nowhere)",
                located.root.display()
            ))
        })?;
    if workdir != located.root {
        return Err(GitError::Denied(format!(
            "the repository's config moves its work tree to {} (core.worktree); the Git tool \
             works only on {}",
            workdir.display(),
            located.root.display()
        )));
    }
    let mut snapshot = repo.config_snapshot_mut();
    for name in PROGRAM_SECTIONS {
        let subsections: Vec<Option<BString>> = snapshot
            .sections_by_name(name)
            .into_iter()
            .flatten()
            .map(|s| s.header().subsection_name().map(|n| n.to_owned()))
            .collect();
        for sub in subsections {
            while snapshot
                .remove_section(*name, sub.as_ref().map(|s| s.as_bstr()))
                .is_some()
            {}
        }
    }
    snapshot
        .commit()
        .map_err(|e| failed("cannot apply the hardened configuration")(&e))?;
    Ok(repo)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_repository_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let err = locate(dir.path()).unwrap_err();
        assert!(
            matches!(&err, GitError::Invalid(m) if m.contains("not inside a git repository")),
            "{err}"
        );
    }

    #[test]
    fn a_dot_git_file_is_refused_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".git"), "gitdir: /elsewhere/.git\n").unwrap();
        let err = locate(dir.path()).unwrap_err();
        assert!(matches!(err, GitError::Denied(_)), "{err}");
        assert!(err.to_string().contains("linked worktree"), "{err}");
    }

    #[test]
    fn alternates_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(".git/objects/info")).unwrap();
        std::fs::write(
            dir.path().join(".git/objects/info/alternates"),
            "/home/someone/secret/.git/objects\n",
        )
        .unwrap();
        let err = locate(dir.path()).unwrap_err();
        assert!(err.to_string().contains("alternates"), "{err}");
    }
}
