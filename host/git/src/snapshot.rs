//! Trees, the index and the work tree as sorted lists of entries, and the changes between two.

use std::collections::HashMap;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Mode, Stage};
use gix::status::UntrackedFiles;

use crate::{GitError, failed, worktree};

/// One tracked path: its mode and object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub path: BString,
    pub mode: Mode,
    pub id: ObjectId,
}

/// A difference between two snapshots.
#[derive(Debug, Clone)]
pub enum Change {
    Added(Entry),
    Deleted(Entry),
    Modified { old: Entry, new: Entry },
}

impl Change {
    pub fn path(&self) -> &BStr {
        match self {
            Change::Added(e) | Change::Deleted(e) => e.path.as_ref(),
            Change::Modified { new, .. } => new.path.as_ref(),
        }
    }
}

/// The stage-0 entries of an index state, in index order.
pub fn of_state(state: &gix::index::State) -> Vec<Entry> {
    state
        .entries()
        .iter()
        .filter(|e| e.stage() == Stage::Unconflicted)
        .map(|e| Entry {
            path: e.path(state).to_owned(),
            mode: e.mode,
            id: e.id,
        })
        .collect()
}

/// The entries of a tree (blobs, links and submodule commits), validated as a checkout would
/// validate them, in index order.
pub fn of_tree(repo: &gix::Repository, tree: ObjectId) -> Result<Vec<Entry>, GitError> {
    let index = repo
        .index_from_tree(&tree)
        .map_err(|e| failed("cannot read the tree")(&e))?;
    Ok(of_state(&index))
}

/// The tree `HEAD` points at, or `None` in a repository without commits.
pub fn head_tree(repo: &gix::Repository) -> Result<Option<ObjectId>, GitError> {
    match repo.head_commit() {
        Ok(c) => c
            .tree_id()
            .map(|t| Some(t.detach()))
            .map_err(|e| failed("cannot read HEAD's tree")(&e)),
        Err(_) => Ok(None),
    }
}

/// The changes from `a` to `b`, both in index order.
pub fn compare(a: &[Entry], b: &[Entry]) -> Vec<Change> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        let ord = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => x.path.cmp(&y.path),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, _) => std::cmp::Ordering::Greater,
        };
        match ord {
            std::cmp::Ordering::Less => {
                out.push(Change::Deleted(a[i].clone()));
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(Change::Added(b[j].clone()));
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                if a[i].id != b[j].id || a[i].mode != b[j].mode {
                    out.push(Change::Modified {
                        old: a[i].clone(),
                        new: b[j].clone(),
                    });
                }
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// How a path in the work tree differs from the index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorktreeKind {
    Modified,
    Removed,
    TypeChange,
    Untracked,
    Conflict,
}

/// One path whose work-tree state differs from the index.
#[derive(Debug, Clone)]
pub struct WorktreeChange {
    pub path: BString,
    pub kind: WorktreeKind,
}

/// The index-to-work-tree changes under `patterns` (repository-relative literal paths; empty:
/// everything), untracked files listed one by one, ignored files left out.
pub fn worktree_changes(
    repo: &gix::Repository,
    patterns: &[BString],
) -> Result<Vec<WorktreeChange>, GitError> {
    use gix::status::index_worktree::iter::Summary;
    let specs: Vec<BString> = patterns.iter().map(|p| literal(p.as_ref())).collect();
    let iter = repo
        .status(gix::progress::Discard)
        .map_err(|e| failed("cannot compute the status")(&e))?
        .untracked_files(UntrackedFiles::Files)
        .index_worktree_submodules(None)
        .into_index_worktree_iter(specs)
        .map_err(|e| failed("cannot compute the status")(&e))?;
    let mut out = Vec::new();
    for item in iter {
        let item = item.map_err(|e| failed("cannot compute the status")(&e))?;
        let kind = match item.summary() {
            Some(Summary::Removed) => WorktreeKind::Removed,
            Some(Summary::Added) => WorktreeKind::Untracked,
            Some(Summary::Modified) | Some(Summary::IntentToAdd) => WorktreeKind::Modified,
            Some(Summary::TypeChange) => WorktreeKind::TypeChange,
            Some(Summary::Conflict) => WorktreeKind::Conflict,
            Some(Summary::Renamed) | Some(Summary::Copied) | None => continue,
        };
        out.push(WorktreeChange {
            path: item.rela_path().to_owned(),
            kind,
        });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out.dedup_by(|a, b| a.path == b.path);
    Ok(out)
}

/// A pathspec that matches `path` literally (no globs, no magic), from the repository's root.
fn literal(path: &BStr) -> BString {
    let mut s = BString::from(":(top,literal)");
    s.extend_from_slice(path);
    s
}

/// File contents read from the work tree, by repository-relative path.
pub type Contents = HashMap<BString, Vec<u8>>;

/// The tracked files as they are in the work tree: the index's entries with every modified,
/// removed or retyped file read from disk (and hashed). Returns the entries and the contents read.
pub fn of_worktree(
    repo: &gix::Repository,
    root: &Path,
    index: &gix::index::State,
    changes: &[WorktreeChange],
) -> Result<(Vec<Entry>, Contents), GitError> {
    let by_path: HashMap<&BStr, WorktreeKind> =
        changes.iter().map(|c| (c.path.as_ref(), c.kind)).collect();
    let mut contents = HashMap::new();
    let mut out = Vec::new();
    for mut e in of_state(index) {
        match by_path.get(e.path.as_bstr()) {
            None | Some(WorktreeKind::Untracked) | Some(WorktreeKind::Conflict) => out.push(e),
            Some(WorktreeKind::Removed) => {}
            Some(WorktreeKind::Modified) | Some(WorktreeKind::TypeChange) => {
                match worktree::read(root, e.path.as_ref())? {
                    None => {}
                    Some((mode, data)) => {
                        e.mode = mode;
                        e.id = gix::objs::compute_hash(
                            repo.object_hash(),
                            gix::object::Kind::Blob,
                            &data,
                        )
                        .map_err(|err| failed("cannot hash a file")(&err))?;
                        contents.insert(e.path.clone(), data);
                        out.push(e);
                    }
                }
            }
        }
    }
    Ok((out, contents))
}

/// Whether repository-relative `path` is `prefix` or inside it (`prefix` empty: always).
pub fn under(path: &BStr, prefix: &BStr) -> bool {
    prefix.is_empty()
        || path == prefix
        || (path.starts_with(prefix) && path.get(prefix.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(path: &str, id: u8) -> Entry {
        Entry {
            path: path.into(),
            mode: Mode::FILE,
            id: ObjectId::from_bytes_or_panic(&[id; 20]),
        }
    }

    #[test]
    fn compare_finds_additions_deletions_and_modifications() {
        let a = vec![e("a", 1), e("b", 2), e("d", 4)];
        let b = vec![e("b", 3), e("c", 5), e("d", 4)];
        let changes: Vec<String> = compare(&a, &b)
            .iter()
            .map(|c| match c {
                Change::Added(e) => format!("A {}", e.path),
                Change::Deleted(e) => format!("D {}", e.path),
                Change::Modified { new, .. } => format!("M {}", new.path),
            })
            .collect();
        assert_eq!(changes, ["D a", "M b", "A c"]);
    }

    #[test]
    fn under_matches_whole_components() {
        assert!(under("src/a.rs".into(), "src".into()));
        assert!(under("src".into(), "src".into()));
        assert!(!under("srcx/a.rs".into(), "src".into()));
        assert!(under("anything".into(), "".into()));
    }
}
