//! The operations, each returning text shaped for a model.

use std::collections::HashMap;
use std::path::Path;

use gix::ObjectId;
use gix::bstr::{BStr, BString, ByteSlice};
use gix::index::entry::{Flags, Mode, Stage};
use gix::refs::transaction::{Change as RefChange, LogChange, PreviousValue, RefEdit, RefLog};

use crate::render::{self, Capped, Diff, Side};
use crate::snapshot::{self, Change, Entry, WorktreeKind};
use crate::{
    DEFAULT_MAX_COUNT, DEFAULT_MAX_LINES, GitError, Identity, Located, MAX_COUNT, MAX_LINES,
    MAX_STATUS_ENTRIES, Options, Request, failed, repo, worktree,
};

pub fn dispatch(located: &Located, request: Request, opts: &Options) -> Result<String, GitError> {
    let repo = repo::open(located)?;
    let cx = Cx {
        repo: &repo,
        located,
        identity: &opts.identity,
    };
    match request {
        Request::Status {} => cx.status(),
        Request::Diff {
            rev,
            paths,
            staged,
            max_lines,
        } => cx.diff(rev.as_deref(), &paths, staged, lines(max_lines)),
        Request::Log {
            rev,
            paths,
            max_count,
        } => cx.log(
            rev.as_deref(),
            &paths,
            max_count.unwrap_or(DEFAULT_MAX_COUNT).clamp(1, MAX_COUNT),
        ),
        Request::Show { rev, max_lines } => cx.show(&rev, lines(max_lines)),
        Request::Blame { path, rev } => cx.blame(&path, rev.as_deref()),
        Request::Branch {} => cx.branch(),
        Request::Add { paths } => cx.add(&paths),
        Request::Commit { message } => cx.commit(&message),
        Request::Switch { branch, create } => cx.switch(&branch, create),
        Request::Stash { pop } => {
            if pop {
                cx.stash_pop()
            } else {
                cx.stash_push()
            }
        }
        Request::Restore { paths, staged } => cx.restore(&paths, staged),
    }
}

fn lines(max: Option<usize>) -> usize {
    max.unwrap_or(DEFAULT_MAX_LINES).clamp(1, MAX_LINES)
}

struct Cx<'a> {
    repo: &'a gix::Repository,
    located: &'a Located,
    identity: &'a Identity,
}

fn invalid(msg: impl Into<String>) -> GitError {
    GitError::Invalid(msg.into())
}

/// Seconds since the epoch, for signatures (in UTC).
fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

fn short(id: impl AsRef<gix::oid>) -> String {
    id.as_ref().to_hex_with_len(8).to_string()
}

impl Cx<'_> {
    fn root(&self) -> &Path {
        &self.located.root
    }

    /// Workspace-relative `paths` as repository-relative prefixes; `.` or an empty list is the
    /// whole workspace. Absolute paths and paths leaving the workspace are refused.
    fn pathspecs(&self, paths: &[String]) -> Result<Vec<BString>, GitError> {
        let prefix = self.located.prefix();
        let mut out = Vec::new();
        for p in paths {
            let mut parts: Vec<&str> = Vec::new();
            if p.starts_with('/') {
                let abs = Path::new(p);
                let rel = abs.strip_prefix(&self.located.workspace).map_err(|_| {
                    invalid(format!(
                        "{p} is outside the workspace; paths are relative to the workspace"
                    ))
                })?;
                let rel = rel.to_string_lossy().into_owned();
                return self.pathspecs(&[if rel.is_empty() { ".".into() } else { rel }]);
            }
            for part in p.split('/') {
                match part {
                    "" | "." => {}
                    ".." => {
                        if parts.pop().is_none() {
                            return Err(invalid(format!("{p} leaves the workspace")));
                        }
                    }
                    part => parts.push(part),
                }
            }
            if parts.iter().any(|c| c.eq_ignore_ascii_case(".git")) {
                return Err(GitError::Denied(format!(
                    "{p} is inside .git; the Git tool does not touch git's own files"
                )));
            }
            let joined = format!("{prefix}{}", parts.join("/"));
            out.push(BString::from(joined.trim_end_matches('/')));
        }
        if out.is_empty() && !prefix.is_empty() {
            out.push(BString::from(prefix.trim_end_matches('/')));
        }
        if out.iter().any(|p| p.is_empty()) {
            return Ok(Vec::new());
        }
        Ok(out)
    }

    fn matches(specs: &[BString], path: &BStr) -> bool {
        specs.is_empty() || specs.iter().any(|s| snapshot::under(path, s.as_ref()))
    }

    fn index(&self) -> Result<gix::index::File, GitError> {
        let index = self
            .repo
            .index_or_empty()
            .map_err(|e| failed("cannot read the index")(&e))?;
        Ok(gix::index::File::clone(&index))
    }

    fn blob(&self, id: ObjectId) -> Result<Vec<u8>, GitError> {
        if id.is_null() {
            return Ok(Vec::new());
        }
        let obj = self
            .repo
            .find_object(id)
            .map_err(|e| failed("cannot read an object")(&e))?;
        Ok(obj.detach().data)
    }

    fn commit_of(&self, rev: &str) -> Result<gix::Commit<'_>, GitError> {
        let id = self.repo.rev_parse_single(rev).map_err(|e| {
            invalid(format!(
                "unknown revision {:?}: {e}",
                rawko_text::line(rev, 200)
            ))
        })?;
        id.object()
            .map_err(|e| failed("cannot read the revision")(&e))?
            .peel_to_commit()
            .map_err(|e| invalid(format!("{rev} is not a commit: {e}")))
    }

    fn tree_entries(&self, commit: &gix::Commit<'_>) -> Result<Vec<Entry>, GitError> {
        let tree = commit
            .tree_id()
            .map_err(|e| failed("cannot read a commit's tree")(&e))?;
        snapshot::of_tree(self.repo, tree.detach())
    }

    fn head_entries(&self) -> Result<Vec<Entry>, GitError> {
        match snapshot::head_tree(self.repo)? {
            Some(t) => snapshot::of_tree(self.repo, t),
            None => Ok(Vec::new()),
        }
    }

    /// `On branch x`, `HEAD detached at abc`, or `No commits yet on x`.
    fn head_line(&self) -> String {
        let name = self
            .repo
            .head_name()
            .ok()
            .flatten()
            .map(|n| n.shorten().to_string());
        match (self.repo.head_commit().ok(), name) {
            (Some(_), Some(n)) => format!("On branch {n}"),
            (Some(c), None) => format!("HEAD detached at {}", short(c.id)),
            (None, Some(n)) => format!("No commits yet on {n}"),
            (None, None) => "No commits yet".into(),
        }
    }

    fn status(&self) -> Result<String, GitError> {
        let index = self.index()?;
        let head = self.head_entries()?;
        let staged = snapshot::compare(&head, &snapshot::of_state(&index));
        let specs = self.pathspecs(&[])?;
        let unstaged = snapshot::worktree_changes(self.repo, &specs)?;
        let mut out = format!("{}\n", self.head_line());
        if !self.located.prefix().is_empty() {
            out.push_str(&format!(
                "(paths are relative to the repository root; the workspace is {})\n",
                self.located.prefix()
            ));
        }
        let section = |out: &mut String, title: &str, items: Vec<String>| {
            if items.is_empty() {
                return;
            }
            out.push_str(&format!("{title} ({}):\n", items.len()));
            let n = items.len();
            for i in items.into_iter().take(MAX_STATUS_ENTRIES) {
                out.push_str(&format!("  {i}\n"));
            }
            if n > MAX_STATUS_ENTRIES {
                out.push_str(&format!(
                    "  [cut: {} more; narrow with diff or log paths]\n",
                    n - MAX_STATUS_ENTRIES
                ));
            }
        };
        let staged_items: Vec<String> = staged
            .iter()
            .filter(|c| Self::matches(&specs, c.path()))
            .map(|c| match c {
                Change::Added(e) => format!("A {}", render::path(e.path.as_ref())),
                Change::Deleted(e) => format!("D {}", render::path(e.path.as_ref())),
                Change::Modified { new, .. } => format!("M {}", render::path(new.path.as_ref())),
            })
            .collect();
        let conflicts: Vec<String> = index
            .entries()
            .iter()
            .filter(|e| e.stage() != Stage::Unconflicted)
            .map(|e| render::path(e.path(&index)))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let tracked: Vec<String> = unstaged
            .iter()
            .filter(|c| c.kind != WorktreeKind::Untracked && c.kind != WorktreeKind::Conflict)
            .map(|c| {
                let tag = match c.kind {
                    WorktreeKind::Removed => "D",
                    WorktreeKind::TypeChange => "T",
                    _ => "M",
                };
                format!("{tag} {}", render::path(c.path.as_ref()))
            })
            .collect();
        let untracked: Vec<String> = unstaged
            .iter()
            .filter(|c| c.kind == WorktreeKind::Untracked)
            .map(|c| render::path(c.path.as_ref()))
            .collect();
        let clean = staged_items.is_empty()
            && conflicts.is_empty()
            && tracked.is_empty()
            && untracked.is_empty();
        section(&mut out, "Conflicts", conflicts);
        section(&mut out, "Staged (to be committed)", staged_items);
        section(&mut out, "Not staged", tracked);
        section(&mut out, "Untracked", untracked);
        if clean {
            out.push_str("Nothing to commit: the work tree is clean.\n");
        }
        Ok(out)
    }

    fn diff(
        &self,
        rev: Option<&str>,
        paths: &[String],
        staged: bool,
        max_lines: usize,
    ) -> Result<String, GitError> {
        let specs = self.pathspecs(paths)?;
        let mut contents: HashMap<BString, Vec<u8>> = HashMap::new();
        let (from, to, to_worktree, what) = match rev {
            Some(range) if range.contains("..") => {
                if staged {
                    return Err(invalid("staged compares the index; it takes no range"));
                }
                let (a, b) = range.split_once("..").unwrap_or((range, ""));
                let b = b.trim_start_matches('.');
                let (a, b) = (
                    if a.is_empty() { "HEAD" } else { a },
                    if b.is_empty() { "HEAD" } else { b },
                );
                let (ca, cb) = (self.commit_of(a)?, self.commit_of(b)?);
                (
                    self.tree_entries(&ca)?,
                    self.tree_entries(&cb)?,
                    false,
                    format!("{a}..{b}"),
                )
            }
            Some(rev) => {
                let c = self.commit_of(rev)?;
                let from = self.tree_entries(&c)?;
                let index = self.index()?;
                if staged {
                    (
                        from,
                        snapshot::of_state(&index),
                        false,
                        format!("{rev} and the index"),
                    )
                } else {
                    let changes = snapshot::worktree_changes(self.repo, &specs)?;
                    let (to, read) =
                        snapshot::of_worktree(self.repo, self.root(), &index, &changes)?;
                    contents = read;
                    (from, to, true, format!("{rev} and the work tree"))
                }
            }
            None => {
                let index = self.index()?;
                if staged {
                    (
                        self.head_entries()?,
                        snapshot::of_state(&index),
                        false,
                        "HEAD and the index (staged)".into(),
                    )
                } else {
                    let changes = snapshot::worktree_changes(self.repo, &specs)?;
                    let (to, read) =
                        snapshot::of_worktree(self.repo, self.root(), &index, &changes)?;
                    contents = read;
                    (
                        snapshot::of_state(&index),
                        to,
                        true,
                        "the index and the work tree (not staged)".into(),
                    )
                }
            }
        };
        let changes: Vec<Change> = snapshot::compare(&from, &to)
            .into_iter()
            .filter(|c| Self::matches(&specs, c.path()))
            .collect();
        if changes.is_empty() {
            return Ok(format!("No differences between {what}.\n"));
        }
        let new_data = |e: &Entry| -> Result<Vec<u8>, GitError> {
            match (to_worktree, contents.get(&e.path)) {
                (true, Some(data)) => Ok(data.clone()),
                _ => self.blob(e.id),
            }
        };
        let mut diff = Diff::default();
        for c in &changes {
            match c {
                Change::Added(e) => {
                    let data = new_data(e)?;
                    diff.file(
                        &render::path(e.path.as_ref()),
                        None,
                        Some(Side {
                            mode: e.mode,
                            data: &data,
                        }),
                    );
                }
                Change::Deleted(e) => {
                    let data = self.blob(e.id)?;
                    diff.file(
                        &render::path(e.path.as_ref()),
                        Some(Side {
                            mode: e.mode,
                            data: &data,
                        }),
                        None,
                    );
                }
                Change::Modified { old, new } => {
                    let (a, b) = (self.blob(old.id)?, new_data(new)?);
                    diff.file(
                        &render::path(new.path.as_ref()),
                        Some(Side {
                            mode: old.mode,
                            data: &a,
                        }),
                        Some(Side {
                            mode: new.mode,
                            data: &b,
                        }),
                    );
                }
            }
        }
        Ok(format!(
            "Diff between {what}:\n{}",
            diff.render(
                max_lines,
                "narrow with paths, or raise max_lines (at most 5000)"
            )
        ))
    }

    fn describe_commit(&self, c: &gix::Commit<'_>) -> Result<(String, String, String), GitError> {
        let author = c
            .author()
            .map_err(|e| failed("cannot read a commit's author")(&e))?;
        let seconds = author.time().map(|t| t.seconds).unwrap_or(0);
        let who = rawko_text::line(&author.name.to_str_lossy(), 80).into_owned();
        let subject = c
            .message()
            .map(|m| rawko_text::line(&m.summary().to_str_lossy(), 200).into_owned())
            .unwrap_or_default();
        Ok((who, render::date(seconds), subject))
    }

    fn log(&self, rev: Option<&str>, paths: &[String], max: usize) -> Result<String, GitError> {
        let specs = self.pathspecs(paths)?;
        let start = match rev {
            Some(r) => self.commit_of(r)?,
            None => match self.repo.head_commit() {
                Ok(c) => c,
                Err(_) => return Ok(format!("{}.\n", self.head_line())),
            },
        };
        let walk = self
            .repo
            .rev_walk([start.id])
            .sorting(gix::revision::walk::Sorting::ByCommitTime(
                Default::default(),
            ))
            .all()
            .map_err(|e| failed("cannot walk the history")(&e))?;
        let mut out = String::new();
        let mut shown = 0;
        let mut more = false;
        for info in walk {
            let info = info.map_err(|e| failed("cannot walk the history")(&e))?;
            let commit = info
                .object()
                .map_err(|e| failed("cannot read a commit")(&e))?;
            if !specs.is_empty() && !self.touches(&commit, &specs)? {
                continue;
            }
            if shown == max {
                more = true;
                break;
            }
            let (who, when, subject) = self.describe_commit(&commit)?;
            out.push_str(&format!("{} {when} {who}: {subject}\n", short(commit.id)));
            shown += 1;
        }
        if shown == 0 {
            out.push_str("No commits match.\n");
        }
        if more {
            out.push_str(&format!(
                "[cut after {max} commits; raise max_count (at most {MAX_COUNT}) or give a rev]\n"
            ));
        }
        Ok(out)
    }

    /// Whether `commit` changed anything under `specs` compared with its first parent.
    fn touches(&self, commit: &gix::Commit<'_>, specs: &[BString]) -> Result<bool, GitError> {
        let lookup = |c: &gix::Commit<'_>, p: &BStr| -> Result<Option<ObjectId>, GitError> {
            let tree = c.tree().map_err(|e| failed("cannot read a tree")(&e))?;
            let entry = tree
                .lookup_entry_by_path(p.to_str_lossy().as_ref())
                .map_err(|e| failed("cannot read a tree")(&e))?;
            Ok(entry.map(|e| e.object_id()))
        };
        let parent = commit
            .parent_ids()
            .next()
            .and_then(|id| id.object().ok())
            .and_then(|o| o.try_into_commit().ok());
        for s in specs {
            let now = lookup(commit, s.as_ref())?;
            let before = match &parent {
                Some(p) => lookup(p, s.as_ref())?,
                None => None,
            };
            if now != before {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn show(&self, rev: &str, max_lines: usize) -> Result<String, GitError> {
        let id = self.repo.rev_parse_single(rev).map_err(|e| {
            invalid(format!(
                "unknown revision {:?}: {e}",
                rawko_text::line(rev, 200)
            ))
        })?;
        let object = id
            .object()
            .map_err(|e| failed("cannot read the object")(&e))?;
        match object.kind {
            gix::object::Kind::Blob => {
                let text = String::from_utf8_lossy(&object.data);
                if object.data[..object.data.len().min(8000)].contains(&0) {
                    return Ok(format!(
                        "{rev}: a binary blob of {} bytes\n",
                        object.data.len()
                    ));
                }
                let mut capped = Capped::new(max_lines);
                for l in text.lines() {
                    capped.line(l);
                }
                Ok(capped.finish("raise max_lines (at most 5000), or use Read on the file"))
            }
            gix::object::Kind::Tree => {
                let tree = object.into_tree();
                let decoded = tree
                    .decode()
                    .map_err(|e| failed("cannot read the tree")(&e))?;
                let mut capped = Capped::new(max_lines);
                for e in &decoded.entries {
                    let slash = if e.mode.is_tree() { "/" } else { "" };
                    capped.line(&format!("{}{slash}", render::path(e.filename)));
                }
                Ok(capped.finish("raise max_lines"))
            }
            gix::object::Kind::Tag | gix::object::Kind::Commit => {
                let commit = object
                    .peel_to_commit()
                    .map_err(|e| invalid(format!("{rev} does not lead to a commit: {e}")))?;
                let author = commit
                    .author()
                    .map_err(|e| failed("cannot read the author")(&e))?;
                let seconds = author.time().map(|t| t.seconds).unwrap_or(0);
                let message = commit
                    .message_raw()
                    .map(|m| m.to_str_lossy().into_owned())
                    .unwrap_or_default();
                let mut out = format!(
                    "commit {}\nAuthor: {} <{}>\nDate:   {}\n\n",
                    commit.id,
                    rawko_text::line(&author.name.to_str_lossy(), 200),
                    rawko_text::line(&author.email.to_str_lossy(), 200),
                    render::date(seconds)
                );
                let mut capped = Capped::new(200);
                for l in message.lines() {
                    capped.line(&format!("    {}", rawko_text::line(l, 1000)));
                }
                out.push_str(&capped.finish("the message is longer"));
                out.push('\n');
                let parent = commit
                    .parent_ids()
                    .next()
                    .and_then(|id| id.object().ok())
                    .and_then(|o| o.try_into_commit().ok());
                let before = match &parent {
                    Some(p) => self.tree_entries(p)?,
                    None => Vec::new(),
                };
                let after = self.tree_entries(&commit)?;
                let mut diff = Diff::default();
                for c in snapshot::compare(&before, &after) {
                    let (old, new) = match &c {
                        Change::Added(e) => (None, Some(e)),
                        Change::Deleted(e) => (Some(e), None),
                        Change::Modified { old, new } => (Some(old), Some(new)),
                    };
                    let a = old.map(|e| self.blob(e.id)).transpose()?;
                    let b = new.map(|e| self.blob(e.id)).transpose()?;
                    diff.file(
                        &render::path(c.path()),
                        old.zip(a.as_deref()).map(|(e, d)| Side {
                            mode: e.mode,
                            data: d,
                        }),
                        new.zip(b.as_deref()).map(|(e, d)| Side {
                            mode: e.mode,
                            data: d,
                        }),
                    );
                }
                if !diff.is_empty() {
                    out.push_str(&diff.render(max_lines, "raise max_lines (at most 5000)"));
                }
                Ok(out)
            }
        }
    }

    fn blame(&self, path: &str, rev: Option<&str>) -> Result<String, GitError> {
        let specs = self.pathspecs(&[path.to_string()])?;
        let Some(rela) = specs.first() else {
            return Err(invalid("blame needs a file path"));
        };
        let commit = match rev {
            Some(r) => self.commit_of(r)?,
            None => self
                .repo
                .head_commit()
                .map_err(|_| invalid("there are no commits to blame"))?,
        };
        let outcome = self
            .repo
            .blame_file(rela.as_ref(), commit.id, Default::default())
            .map_err(|e| invalid(format!("cannot blame {path}: {e}")))?;
        let mut authors: HashMap<ObjectId, (String, String)> = HashMap::new();
        let mut capped = Capped::new(2_000);
        for (entry, lines) in outcome.entries_with_lines() {
            let (who, when) = match authors.get(&entry.commit_id) {
                Some(a) => a.clone(),
                None => {
                    let c = self
                        .repo
                        .find_commit(entry.commit_id)
                        .map_err(|e| failed("cannot read a commit")(&e))?;
                    let (who, when, _) = self.describe_commit(&c)?;
                    let when = when[..10].to_string();
                    authors.insert(entry.commit_id, (who.clone(), when.clone()));
                    (who, when)
                }
            };
            for (i, line) in lines.iter().enumerate() {
                let n = entry.start_in_blamed_file as usize + i + 1;
                let text = line.to_str_lossy();
                capped.line(&format!(
                    "{} ({who} {when} {n:>5}) {}",
                    short(entry.commit_id),
                    text.trim_end_matches(['\n', '\r'])
                ));
            }
        }
        if capped.is_empty() {
            return Ok(format!("{path} is empty at {}.\n", short(commit.id)));
        }
        Ok(capped.finish("blame a smaller file, or Read the rest"))
    }

    fn branch(&self) -> Result<String, GitError> {
        let current = self.repo.head_name().ok().flatten();
        let refs = self
            .repo
            .references()
            .map_err(|e| failed("cannot read the branches")(&e))?;
        let mut out = String::new();
        let mut n = 0;
        for r in refs
            .local_branches()
            .map_err(|e| failed("cannot read the branches")(&e))?
        {
            let Ok(mut r) = r else { continue };
            let name = r.name().shorten().to_string();
            let mark = if current.as_ref().map(|c| c.as_ref()) == Some(r.name()) {
                "*"
            } else {
                " "
            };
            let tip = r
                .peel_to_commit()
                .ok()
                .map(|c| {
                    let subject = self
                        .describe_commit(&c)
                        .map(|(_, _, s)| s)
                        .unwrap_or_default();
                    format!("{} {subject}", short(c.id))
                })
                .unwrap_or_default();
            n += 1;
            if n <= 500 {
                out.push_str(&format!("{mark} {} {tip}\n", rawko_text::line(&name, 200)));
            }
        }
        if n > 500 {
            out.push_str(&format!("[cut: {} more branches]\n", n - 500));
        }
        if n == 0 {
            out.push_str(&format!("No branches yet. {}.\n", self.head_line()));
        }
        Ok(out)
    }

    // ---- writes ----

    /// The tool's identity, signing at `time` (`SECONDS +0000`).
    fn signature<'t>(&'t self, time: &'t str) -> gix::actor::SignatureRef<'t> {
        gix::actor::SignatureRef {
            name: self.identity.name.as_str().into(),
            email: self.identity.email.as_str().into(),
            time,
        }
    }

    fn write_index(&self, mut index: gix::index::File) -> Result<(), GitError> {
        index.sort_entries();
        // The tree cache is written as read; after any change it would be stale, and git
        // trusts it when it compares the index with HEAD or builds the next commit's tree.
        index.remove_tree();
        index
            .write(Default::default())
            .map_err(|e| failed("cannot write the index")(&e))
    }

    fn add(&self, paths: &[String]) -> Result<String, GitError> {
        if paths.is_empty() {
            return Err(invalid("add needs paths (\".\" for the whole workspace)"));
        }
        let specs = self.pathspecs(paths)?;
        let changes = snapshot::worktree_changes(self.repo, &specs)?;
        let mut index = self.index()?;
        let mut report = Capped::new(MAX_STATUS_ENTRIES);
        let mut removed: Vec<BString> = Vec::new();
        for c in changes
            .iter()
            .filter(|c| Self::matches(&specs, c.path.as_ref()))
        {
            match c.kind {
                WorktreeKind::Conflict => {
                    return Err(GitError::Denied(format!(
                        "{} has a merge conflict; resolving conflicts is not something the Git \
                         tool does",
                        render::path(c.path.as_ref())
                    )));
                }
                WorktreeKind::Removed => {
                    removed.push(c.path.clone());
                    report.line(&format!("D {}", render::path(c.path.as_ref())));
                }
                WorktreeKind::Modified | WorktreeKind::TypeChange | WorktreeKind::Untracked => {
                    let Some((mode, data)) = worktree::read(self.root(), c.path.as_ref())? else {
                        continue;
                    };
                    let id = self
                        .repo
                        .write_blob(&data)
                        .map_err(|e| failed("cannot store a file")(&e))?
                        .detach();
                    let stat = worktree::stat(self.root(), c.path.as_ref());
                    match index.entry_mut_by_path_and_stage(c.path.as_ref(), Stage::Unconflicted) {
                        Some(e) => {
                            e.id = id;
                            e.mode = mode;
                            e.stat = stat;
                            report.line(&format!("M {}", render::path(c.path.as_ref())));
                        }
                        None => {
                            index.dangerously_push_entry(
                                stat,
                                id,
                                Flags::empty(),
                                mode,
                                c.path.as_ref(),
                            );
                            index.sort_entries();
                            report.line(&format!("A {}", render::path(c.path.as_ref())));
                        }
                    }
                }
            }
        }
        if report.is_empty() {
            return Ok(format!(
                "Nothing to add under {}: no changes (ignored files are not added).\n",
                paths.join(", ")
            ));
        }
        index.remove_entries(|_, path, _| removed.iter().any(|r| r == path));
        self.write_index(index)?;
        Ok(format!("Staged:\n{}", report.finish("more were staged")))
    }

    fn tree_of_index(&self, index: &gix::index::State) -> Result<ObjectId, GitError> {
        if index
            .entries()
            .iter()
            .any(|e| e.stage() != Stage::Unconflicted)
        {
            return Err(GitError::Denied(
                "the index has unresolved conflicts; the Git tool does not commit them".into(),
            ));
        }
        let empty = ObjectId::empty_tree(self.repo.object_hash());
        let mut editor = self
            .repo
            .edit_tree(empty)
            .map_err(|e| failed("cannot build a tree")(&e))?;
        for e in index.entries() {
            let kind = match e.mode {
                Mode::FILE => gix::object::tree::EntryKind::Blob,
                Mode::FILE_EXECUTABLE => gix::object::tree::EntryKind::BlobExecutable,
                Mode::SYMLINK => gix::object::tree::EntryKind::Link,
                Mode::COMMIT => gix::object::tree::EntryKind::Commit,
                _ => continue,
            };
            editor
                .upsert(e.path(index), kind, e.id)
                .map_err(|err| failed("cannot build a tree")(&err))?;
        }
        Ok(editor
            .write()
            .map_err(|e| failed("cannot write a tree")(&e))?
            .detach())
    }

    fn commit(&self, message: &str) -> Result<String, GitError> {
        let message = message.replace('\0', "");
        if message.trim().is_empty() {
            return Err(invalid("commit needs a message"));
        }
        if message.len() > 64 * 1024 {
            return Err(invalid("the commit message is longer than 64 KiB"));
        }
        let index = self.index()?;
        let tree = self.tree_of_index(&index)?;
        let parent = self.repo.head_commit().ok();
        if let Some(p) = &parent
            && p.tree_id().map(|t| t.detach()).ok() == Some(tree)
        {
            return Err(invalid(
                "nothing to commit: the index matches HEAD (stage changes with add first)",
            ));
        }
        let time = format!("{} +0000", now());
        let sig = self.signature(&time);
        let parents: Vec<ObjectId> = parent.iter().map(|p| p.id).collect();
        let id = self
            .repo
            .commit_as(sig, sig, "HEAD", &message, tree, parents)
            .map_err(|e| failed("cannot commit")(&e))?;
        let files = match &parent {
            Some(p) => snapshot::compare(&self.tree_entries(p)?, &snapshot::of_state(&index)).len(),
            None => index.entries().len(),
        };
        Ok(format!(
            "[{} {}] {}\n{files} file(s) changed; author {} <{}>\n",
            self.head_line().trim_start_matches("On branch "),
            short(id),
            rawko_text::line(message.lines().next().unwrap_or(""), 200),
            self.identity.name,
            self.identity.email
        ))
    }

    /// Point `name` at `target` with a reflog entry by the tool's identity.
    fn edit_ref(
        &self,
        name: gix::refs::FullName,
        target: gix::refs::Target,
        expected: PreviousValue,
        message: String,
        force_reflog: bool,
    ) -> Result<(), String> {
        let time = format!("{} +0000", now());
        let sig = self.signature(&time);
        self.repo
            .edit_references_as(
                [RefEdit {
                    change: RefChange::Update {
                        log: LogChange {
                            mode: RefLog::AndReference,
                            force_create_reflog: force_reflog,
                            message: message.into(),
                        },
                        expected,
                        new: target,
                    },
                    name,
                    deref: false,
                }],
                Some(sig),
            )
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn set_head(&self, branch: &gix::refs::FullName, message: String) -> Result<(), GitError> {
        self.edit_ref(
            "HEAD".try_into().expect("HEAD is a valid name"),
            gix::refs::Target::Symbolic(branch.clone()),
            PreviousValue::Any,
            message,
            false,
        )
        .map_err(|e| failed("cannot move HEAD")(&e))
    }

    /// Refuse when tracked files have changes (staged or not), which a switch or a stash pop
    /// would lose: `what` says how.
    fn refuse_if_dirty(&self, what: &str) -> Result<(), GitError> {
        let index = self.index()?;
        let mut dirty: Vec<String> =
            snapshot::compare(&self.head_entries()?, &snapshot::of_state(&index))
                .iter()
                .map(|c| render::path(c.path()))
                .collect();
        dirty.extend(
            snapshot::worktree_changes(self.repo, &[])?
                .iter()
                .filter(|c| c.kind != WorktreeKind::Untracked)
                .map(|c| render::path(c.path.as_ref())),
        );
        dirty.sort();
        dirty.dedup();
        if dirty.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = dirty.iter().take(20).map(String::as_str).collect();
        Err(GitError::Denied(format!(
            "local changes to {} {what}; commit or stash them first",
            shown.join(", ")
        )))
    }

    /// Make the work tree go from `from` to `to` (both clean snapshots), refusing to overwrite
    /// an untracked file; then write an index of `index_tree` entries with fresh stats.
    fn apply(&self, from: &[Entry], to: &[Entry]) -> Result<usize, GitError> {
        let changes = snapshot::compare(from, to);
        for c in &changes {
            if let Change::Added(e) = c
                && worktree::read(self.root(), e.path.as_ref())?.is_some()
            {
                return Err(GitError::Denied(format!(
                    "the untracked file {} would be overwritten; move it away first",
                    render::path(e.path.as_ref())
                )));
            }
        }
        for c in &changes {
            match c {
                Change::Added(e) | Change::Modified { new: e, .. } => {
                    let data = self.blob(e.id)?;
                    worktree::write(self.root(), e.path.as_ref(), e.mode, &data)?;
                }
                Change::Deleted(e) => worktree::remove(self.root(), e.path.as_ref())?,
            }
        }
        Ok(changes.len())
    }

    /// An index of `tree`'s entries, with stats taken from files whose content is the entry's.
    fn index_for(&self, tree: ObjectId, worktree_matches: &[Entry]) -> Result<(), GitError> {
        let mut index = self
            .repo
            .index_from_tree(&tree)
            .map_err(|e| failed("cannot build the index")(&e))?;
        let matching: HashMap<&BStr, ObjectId> = worktree_matches
            .iter()
            .map(|e| (e.path.as_ref(), e.id))
            .collect();
        let root = self.root().to_path_buf();
        let paths: Vec<(usize, BString)> = index
            .entries()
            .iter()
            .enumerate()
            .map(|(i, e)| (i, e.path(&index).to_owned()))
            .collect();
        for (i, path) in paths {
            let e = &mut index.entries_mut()[i];
            if matching.get(path.as_bstr()) == Some(&e.id) {
                e.stat = worktree::stat(&root, path.as_ref());
            }
        }
        self.write_index(index)
    }

    fn switch(&self, branch: &str, create: bool) -> Result<String, GitError> {
        let full: gix::refs::FullName = format!("refs/heads/{branch}")
            .try_into()
            .map_err(|e| invalid(format!("{branch:?} is not a valid branch name: {e}")))?;
        let exists = self.repo.try_find_reference(full.as_ref()).ok().flatten();
        let from_name = self.head_line();
        if create {
            if exists.is_some() {
                return Err(invalid(format!(
                    "branch {branch} already exists; switch to it without create"
                )));
            }
            if let Ok(head) = self.repo.head_commit() {
                self.edit_ref(
                    full.clone(),
                    gix::refs::Target::Object(head.id),
                    PreviousValue::MustNotExist,
                    format!("branch: Created from {}", short(head.id)),
                    false,
                )
                .map_err(|e| failed("cannot create the branch")(&e))?;
            }
            self.set_head(&full, format!("checkout: moving to {branch}"))?;
            return Ok(format!(
                "Switched to a new branch {branch} (from: {from_name}).\n"
            ));
        }
        let Some(mut target) = exists else {
            return Err(invalid(format!(
                "no branch named {branch}; create it with create: true"
            )));
        };
        let target_commit = target
            .peel_to_commit()
            .map_err(|e| failed("cannot read the branch")(&e))?;
        let target_entries = self.tree_entries(&target_commit)?;
        let head_entries = self.head_entries()?;
        let changed = snapshot::compare(&head_entries, &target_entries).len();
        if changed > 0 {
            self.refuse_if_dirty("would be lost by switching")?;
            self.apply(&head_entries, &target_entries)?;
            let tree = target_commit
                .tree_id()
                .map_err(|e| failed("cannot read the tree")(&e))?
                .detach();
            self.index_for(tree, &target_entries)?;
        }
        self.set_head(&full, format!("checkout: moving to {branch}"))?;
        Ok(format!(
            "Switched to branch {branch} at {} ({changed} file(s) changed in the work tree).\n",
            short(target_commit.id)
        ))
    }

    fn restore(&self, paths: &[String], staged: bool) -> Result<String, GitError> {
        if paths.is_empty() {
            return Err(invalid(
                "restore needs paths (\".\" for the whole workspace)",
            ));
        }
        let specs = self.pathspecs(paths)?;
        let mut index = self.index()?;
        let mut report = Capped::new(MAX_STATUS_ENTRIES);
        if staged {
            let head = self.head_entries()?;
            let changes: Vec<Change> = snapshot::compare(&head, &snapshot::of_state(&index))
                .into_iter()
                .filter(|c| Self::matches(&specs, c.path()))
                .collect();
            let mut drop: Vec<BString> = Vec::new();
            for c in &changes {
                match c {
                    Change::Added(e) => drop.push(e.path.clone()),
                    Change::Deleted(e) => index.dangerously_push_entry(
                        Default::default(),
                        e.id,
                        Flags::empty(),
                        e.mode,
                        e.path.as_ref(),
                    ),
                    Change::Modified { old, .. } => {
                        if let Some(entry) = index
                            .entry_mut_by_path_and_stage(old.path.as_ref(), Stage::Unconflicted)
                        {
                            entry.id = old.id;
                            entry.mode = old.mode;
                            entry.stat = Default::default();
                        }
                    }
                }
                report.line(&format!("unstaged {}", render::path(c.path())));
            }
            index.remove_entries(|_, path, _| drop.iter().any(|d| d == path));
        } else {
            let changes = snapshot::worktree_changes(self.repo, &specs)?;
            for c in changes.iter().filter(|c| {
                matches!(
                    c.kind,
                    WorktreeKind::Modified | WorktreeKind::Removed | WorktreeKind::TypeChange
                ) && Self::matches(&specs, c.path.as_ref())
            }) {
                let Some(entry) =
                    index.entry_mut_by_path_and_stage(c.path.as_ref(), Stage::Unconflicted)
                else {
                    continue;
                };
                let (id, mode) = (entry.id, entry.mode);
                let data = self.blob(id)?;
                worktree::write(self.root(), c.path.as_ref(), mode, &data)?;
                entry.stat = worktree::stat(self.root(), c.path.as_ref());
                report.line(&format!("restored {}", render::path(c.path.as_ref())));
            }
        }
        if report.is_empty() {
            return Ok(format!("Nothing to restore under {}.\n", paths.join(", ")));
        }
        self.write_index(index)?;
        Ok(report.finish("more were restored"))
    }

    fn write_commit(
        &self,
        tree: ObjectId,
        parents: Vec<ObjectId>,
        message: String,
    ) -> Result<ObjectId, GitError> {
        let sig = gix::actor::Signature {
            name: self.identity.name.as_str().into(),
            email: self.identity.email.as_str().into(),
            time: gix::date::Time::new(now(), 0),
        };
        let commit = gix::objs::Commit {
            tree,
            parents: parents.into(),
            author: sig.clone(),
            committer: sig,
            encoding: None,
            message: message.into(),
            extra_headers: Vec::new(),
        };
        Ok(self
            .repo
            .write_object(&commit)
            .map_err(|e| failed("cannot write a commit")(&e))?
            .detach())
    }

    fn stash_push(&self) -> Result<String, GitError> {
        let head = self
            .repo
            .head_commit()
            .map_err(|_| invalid("there is no commit to stash changes on"))?;
        let index = self.index()?;
        let head_entries = self.tree_entries(&head)?;
        let changes = snapshot::worktree_changes(self.repo, &[])?;
        let (worktree_entries, contents) =
            snapshot::of_worktree(self.repo, self.root(), &index, &changes)?;
        let staged = snapshot::compare(&head_entries, &snapshot::of_state(&index));
        let unstaged = snapshot::compare(&snapshot::of_state(&index), &worktree_entries);
        if staged.is_empty() && unstaged.is_empty() {
            return Ok("No local changes to save.\n".into());
        }
        for (path, data) in &contents {
            self.repo.write_blob(data).map_err(|e| {
                failed(&format!("cannot store {}", render::path(path.as_ref())))(&e)
            })?;
        }
        let branch = self
            .repo
            .head_name()
            .ok()
            .flatten()
            .map(|n| n.shorten().to_string())
            .unwrap_or_else(|| "(no branch)".into());
        let (_, _, subject) = self.describe_commit(&head)?;
        let base = format!("{branch}: {} {subject}", short(head.id));
        let index_tree = self.tree_of_index(&index)?;
        let i_commit =
            self.write_commit(index_tree, vec![head.id], format!("index on {base}\n"))?;
        let mut wt_state = gix::index::State::new(self.repo.object_hash());
        for e in &worktree_entries {
            wt_state.dangerously_push_entry(
                Default::default(),
                e.id,
                Flags::empty(),
                e.mode,
                e.path.as_ref(),
            );
        }
        wt_state.sort_entries();
        let w_tree = self.tree_of_index(&wt_state)?;
        let w_commit =
            self.write_commit(w_tree, vec![head.id, i_commit], format!("WIP on {base}\n"))?;
        self.edit_ref(
            "refs/stash".try_into().expect("a valid name"),
            gix::refs::Target::Object(w_commit),
            PreviousValue::Any,
            format!("WIP on {base}"),
            true,
        )
        .map_err(|e| failed("cannot record the stash")(&e))?;
        self.apply(&worktree_entries, &head_entries)?;
        let tree = head
            .tree_id()
            .map_err(|e| failed("cannot read HEAD's tree")(&e))?
            .detach();
        self.index_for(tree, &head_entries)?;
        Ok(format!(
            "Saved working directory and index state WIP on {base} as stash@{{0}} ({})\n",
            short(w_commit)
        ))
    }

    fn stash_pop(&self) -> Result<String, GitError> {
        let Some(mut stash) = self.repo.try_find_reference("refs/stash").ok().flatten() else {
            return Err(invalid("there is no stash to pop"));
        };
        let w = stash
            .peel_to_commit()
            .map_err(|e| failed("cannot read the stash")(&e))?;
        let parents: Vec<ObjectId> = w.parent_ids().map(|p| p.detach()).collect();
        let (Some(base), Some(i_id)) = (parents.first().copied(), parents.get(1).copied()) else {
            return Err(invalid("refs/stash does not look like a stash"));
        };
        let head = self
            .repo
            .head_commit()
            .map_err(|_| invalid("there is no commit to pop the stash onto"))?;
        if head.id != base {
            return Err(GitError::Denied(format!(
                "the stash was made on {} and HEAD is {}; the Git tool pops a stash only onto \
                 the commit it was made on",
                short(base),
                short(head.id)
            )));
        }
        self.refuse_if_dirty("would be overwritten by the stash")?;
        let head_entries = self.tree_entries(&head)?;
        let w_entries = self.tree_entries(&w)?;
        let changed = self.apply(&head_entries, &w_entries)?;
        let i_tree = self
            .repo
            .find_commit(i_id)
            .map_err(|e| failed("cannot read the stash's index")(&e))?
            .tree_id()
            .map_err(|e| failed("cannot read the stash's index")(&e))?
            .detach();
        self.index_for(i_tree, &w_entries)?;
        self.drop_stash(w.id)?;
        Ok(format!(
            "Restored the stash {} ({changed} file(s) changed) and dropped it.\n",
            short(w.id)
        ))
    }

    /// Remove the newest stash entry: the reflog's last line, and the ref with it when it was
    /// the only one.
    fn drop_stash(&self, top: ObjectId) -> Result<(), GitError> {
        let log_path = self.repo.common_dir().join("logs/refs/stash");
        let log = std::fs::read(&log_path).unwrap_or_default();
        let mut lines: Vec<&[u8]> = log
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        lines.pop();
        let previous = lines.last().and_then(|l| {
            let new = l.split(|b| *b == b' ').nth(1)?;
            ObjectId::from_hex(new).ok()
        });
        if let Some(prev) = previous {
            // Move the ref without a log line, then cut the log to the entries that remain.
            let refs_path = self.repo.common_dir().join("refs/stash");
            std::fs::write(&refs_path, format!("{prev}\n"))
                .map_err(|e| GitError::Failed(format!("cannot update refs/stash: {e}")))?;
            let mut rest = lines.join(&b'\n');
            rest.push(b'\n');
            std::fs::write(&log_path, rest)
                .map_err(|e| GitError::Failed(format!("cannot update the stash log: {e}")))?;
            return Ok(());
        }
        let change = RefChange::Delete {
            expected: PreviousValue::MustExistAndMatch(gix::refs::Target::Object(top)),
            log: RefLog::AndReference,
        };
        self.repo
            .edit_reference(RefEdit {
                change,
                name: "refs/stash".try_into().expect("a valid name"),
                deref: false,
            })
            .map_err(|e| failed("cannot drop the stash")(&e))?;
        Ok(())
    }
}
