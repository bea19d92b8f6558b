//! A work tree as a patch, for tasks on Temporal: the uncommitted changes `rawko run --remote`
//! sends, and the edits a worker keeps of a task after each state. Each is a binary git patch
//! (untracked files included, ignored ones not), kept in the team store by its hash, and
//! applied with `git apply`, which writes nothing outside the work tree or beyond a symlink,
//! and either applies a whole patch or changes nothing.
//!
//! Every git here runs with nothing the repository's config could start, as the sandbox's git
//! does ([`rawko_sandbox::git_env`]): no hooks, fsmonitor, pager, external diff or `ext::`
//! transport, and each filter, textconv or driver the repository's own config names made
//! harmless, since that config is whoever wrote the repository's. No system config, no prompt.
//! The patch is built in an index of its own, so the repository's index is never touched.

use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Stdio};

/// The ref a worker's checkout keeps its task's starting tree under: the commit with the
/// client's changes applied. A task's edits are the work tree against it.
pub const START_REF: &str = "refs/rawko/start";

/// Run git in `dir` (None: wherever), hardened, with `index` as its index when given. Its
/// standard output, or its standard error as the message.
pub fn git(dir: Option<&Path>, index: Option<&Path>, args: &[&OsStr]) -> Result<Vec<u8>, String> {
    let mut cmd = Command::new("git");
    if let Some(dir) = dir {
        cmd.arg("-C").arg(dir);
    }
    cmd.args(args)
        .envs(rawko_sandbox::git_env(dir))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_CONFIG_PARAMETERS")
        .stdin(Stdio::null());
    match index {
        Some(index) => cmd.env("GIT_INDEX_FILE", index),
        None => cmd.env_remove("GIT_INDEX_FILE"),
    };
    let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(out.stdout)
    } else {
        let words: Vec<String> = args
            .iter()
            .take(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        Err(format!(
            "git {}: {}",
            words.join(" "),
            rawko_text::line(String::from_utf8_lossy(&out.stderr).trim(), 400)
        ))
    }
}

/// `git` in `dir` with text arguments, its output as trimmed text.
pub fn git_text(dir: &Path, args: &[&str]) -> Result<String, String> {
    let args: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
    git(Some(dir), None, &args).map(|o| String::from_utf8_lossy(&o).trim().to_string())
}

/// An index of its own for `dir`'s work tree as it is now (every file but ignored ones),
/// started from a copy of the repository's index so that unchanged files are not read again.
fn snapshot_index(dir: &Path) -> Result<tempfile::TempDir, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("cannot make a scratch index: {e}"))?;
    let index = scratch.path().join("index");
    let git_dir = git_text(dir, &["rev-parse", "--absolute-git-dir"])?;
    let own = Path::new(&git_dir).join("index");
    if own.is_file() {
        // The copy keeps the index's time: git trusts an entry's stat only when the index is
        // newer than the file, so a copy dated now would hide a file changed in the same
        // second as the index was written, with the same size.
        let copied = std::fs::copy(&own, &index)
            .and_then(|_| own.metadata()?.modified())
            .and_then(|at| {
                std::fs::File::options()
                    .write(true)
                    .open(&index)?
                    .set_modified(at)
            });
        copied.map_err(|e| format!("cannot copy the index: {e}"))?;
    }
    git(
        Some(dir),
        Some(&index),
        &[
            "add".as_ref(),
            "--all".as_ref(),
            "--".as_ref(),
            ".".as_ref(),
        ],
    )?;
    Ok(scratch)
}

/// The patch from `from` (a commit or tree) to `dir`'s work tree, untracked files included and
/// binary files in full; empty when they are the same. A file git would leave out of the patch
/// (one past `core.bigFileThreshold`) is an error, not a silent gap.
pub fn work_tree_patch(dir: &Path, from: &str) -> Result<Vec<u8>, String> {
    let scratch = snapshot_index(dir)?;
    let patch = git(
        Some(dir),
        Some(&scratch.path().join("index")),
        &[
            "diff",
            "--cached",
            "--binary",
            "--full-index",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--no-relative",
            "--src-prefix=a/",
            "--dst-prefix=b/",
            from,
            "--",
        ]
        .map(OsStr::new),
    )?;
    let left_out = String::from_utf8_lossy(&patch)
        .lines()
        .find(|l| l.starts_with("Binary files ") && l.ends_with(" differ"))
        .map(|l| rawko_text::line(l, 200).into_owned());
    match left_out {
        Some(line) => Err(format!("a file is too large for a patch ({line})")),
        None => Ok(patch),
    }
}

/// The tree of `dir`'s work tree as it is now (every file but ignored ones).
pub fn work_tree_id(dir: &Path) -> Result<String, String> {
    let scratch = snapshot_index(dir)?;
    let out = git(
        Some(dir),
        Some(&scratch.path().join("index")),
        &["write-tree".as_ref()],
    )?;
    Ok(String::from_utf8_lossy(&out).trim().to_string())
}

/// `git apply ARGS FILE` in `dir`, FILE holding `patch`; its output.
fn git_apply(dir: &Path, patch: &[u8], args: &[&str]) -> Result<Vec<u8>, String> {
    let scratch = tempfile::tempdir().map_err(|e| format!("cannot hold the patch: {e}"))?;
    let file = scratch.path().join("task.patch");
    std::fs::write(&file, patch).map_err(|e| format!("cannot hold the patch: {e}"))?;
    let mut all: Vec<&OsStr> = vec!["apply".as_ref()];
    all.extend(args.iter().map(OsStr::new));
    all.push(file.as_os_str());
    git(Some(dir), None, &all)
}

/// Apply `patch` to `dir`'s work tree (not its index), or with `check` only say whether it
/// applies. Nothing changes unless all of it applies.
pub fn apply(dir: &Path, patch: &[u8], check: bool) -> Result<(), String> {
    if patch.is_empty() {
        return Ok(());
    }
    let mut args = vec!["--binary", "--whitespace=nowarn"];
    if check {
        args.push("--check");
    }
    git_apply(dir, patch, &args).map(drop)
}

/// Of the paths a patch touches (both sides of a rename or copy, as git reads them, quoting
/// undone), those in the places a task may not change: anything named `.git` (git itself
/// refuses to write those) and the workspace's `.rawko/`, rawko's own files, which the kernel
/// sandbox keeps read-only for a task's commands. A task's edits come from whoever could
/// write the team store, and must not do there what its commands could not do here.
pub fn protected_paths(dir: &Path, patch: &[u8]) -> Result<Vec<String>, String> {
    if patch.is_empty() {
        return Ok(Vec::new());
    }
    let mut paths = std::collections::BTreeSet::new();
    // `--numstat` names each file by its new name (its old one when deleted); reversed, by
    // its old one.
    for args in [&["--numstat", "-z"][..], &["-R", "--numstat", "-z"][..]] {
        let out = git_apply(dir, patch, args)?;
        for record in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
            let path = record.splitn(3, |&b| b == b'\t').nth(2).unwrap_or(record);
            paths.insert(path.to_vec());
        }
    }
    Ok(paths
        .into_iter()
        .filter(|p| is_protected(p))
        .map(|p| rawko_text::line(&String::from_utf8_lossy(&p), 200).into_owned())
        .collect())
}

/// Whether `path` (relative to the work tree) is one no task may change.
fn is_protected(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').enumerate().any(|(i, part)| {
        part.eq_ignore_ascii_case(b".git") || (i == 0 && part.eq_ignore_ascii_case(b".rawko"))
    })
}

/// The files a patch touches, as `git apply --numstat` reads them: (added, deleted, path),
/// with `-` counts for binary files.
pub fn files_of(dir: &Path, patch: &[u8]) -> Result<Vec<(String, String, String)>, String> {
    if patch.is_empty() {
        return Ok(Vec::new());
    }
    let out = git_apply(dir, patch, &["--numstat"])?;
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| {
            let mut parts = l.splitn(3, '\t');
            Some((
                parts.next()?.to_string(),
                parts.next()?.to_string(),
                parts.next()?.to_string(),
            ))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git_text(d, &["init", "-q"]).unwrap();
        std::fs::write(d.join("a.txt"), "one\n").unwrap();
        std::fs::write(d.join("gone.txt"), "soon\n").unwrap();
        std::fs::write(d.join(".gitignore"), "target/\n").unwrap();
        commit_all(d, "one");
        dir
    }

    fn commit_all(d: &Path, message: &str) {
        git_text(d, &["add", "-A"]).unwrap();
        let commit = ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm"];
        let mut args = commit.to_vec();
        args.push(message);
        git_text(d, &args).unwrap();
    }

    #[test]
    fn a_patch_carries_edits_new_binary_and_deleted_files_but_not_ignored_ones() {
        let from = repo();
        let d = from.path();
        std::fs::write(d.join("a.txt"), "two\n").unwrap();
        std::fs::write(d.join("new.bin"), [0u8, 159, 146, 150, 255]).unwrap();
        std::fs::create_dir(d.join("target")).unwrap();
        std::fs::write(d.join("target/out"), "built").unwrap();
        std::fs::remove_file(d.join("gone.txt")).unwrap();
        let index_before = std::fs::read(d.join(".git/index")).unwrap();
        let patch = work_tree_patch(d, "HEAD").unwrap();
        assert_eq!(
            std::fs::read(d.join(".git/index")).unwrap(),
            index_before,
            "the repository's own index is untouched"
        );
        let text = String::from_utf8_lossy(&patch);
        assert!(
            text.contains("+two") && text.contains("GIT binary patch"),
            "{text}"
        );
        assert!(!text.contains("target/out"), "ignored files stay behind");

        // The same commit elsewhere, with the patch applied, has the same files.
        let to = repo();
        apply(to.path(), &patch, true).unwrap();
        apply(to.path(), &patch, false).unwrap();
        assert_eq!(
            std::fs::read_to_string(to.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert_eq!(
            std::fs::read(to.path().join("new.bin")).unwrap(),
            [0u8, 159, 146, 150, 255]
        );
        assert!(!to.path().join("gone.txt").exists());
        assert_eq!(work_tree_id(to.path()).unwrap(), work_tree_id(d).unwrap());
        let files = files_of(to.path(), &patch).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");

        // Applied again, it no longer fits, and nothing changes.
        let err = apply(to.path(), &patch, false).unwrap_err();
        assert!(err.contains("git apply"), "{err}");
        assert_eq!(
            std::fs::read_to_string(to.path().join("a.txt")).unwrap(),
            "two\n"
        );
        assert!(
            work_tree_patch(to.path(), &work_tree_id(d).unwrap())
                .unwrap()
                .is_empty()
        );
    }

    /// Paths in rawko's own `.rawko/` are found however the patch names them: quoted, as
    /// the old side of a rename, deleted; other paths are not.
    #[test]
    fn a_patch_that_changes_rawkos_own_files_is_found_out() {
        let to = repo();
        let d = to.path();
        std::fs::create_dir(d.join(".rawko")).unwrap();
        std::fs::write(d.join(".rawko/config.yaml"), "kept\n").unwrap();
        commit_all(d, "two");
        let quoted = "diff --git \"a/\\056rawko/x\" \"b/\\056rawko/x\"\nnew file mode 100644\n--- /dev/null\n+++ \"b/\\056rawko/x\"\n@@ -0,0 +1 @@\n+owned\n";
        assert_eq!(protected_paths(d, quoted.as_bytes()).unwrap(), [".rawko/x"]);
        git_text(d, &["mv", ".rawko/config.yaml", "moved.yaml"]).unwrap();
        let renamed = git(
            Some(d),
            None,
            &[
                "diff".as_ref(),
                "--no-ext-diff".as_ref(),
                "--cached".as_ref(),
                "-M".as_ref(),
                "HEAD".as_ref(),
            ],
        )
        .unwrap();
        assert!(String::from_utf8_lossy(&renamed).contains("rename from"));
        assert_eq!(
            protected_paths(d, &renamed).unwrap(),
            [".rawko/config.yaml"]
        );
        git_text(d, &["reset", "-q", "--hard"]).unwrap();
        std::fs::remove_file(d.join(".rawko/config.yaml")).unwrap();
        std::fs::write(d.join("a.txt"), "changed\n").unwrap();
        let deleted = work_tree_patch(d, "HEAD").unwrap();
        assert_eq!(
            protected_paths(d, &deleted).unwrap(),
            [".rawko/config.yaml"]
        );
        git_text(d, &["checkout", "-q", "--", ".rawko"]).unwrap();
        let honest = work_tree_patch(d, "HEAD").unwrap();
        assert!(protected_paths(d, &honest).unwrap().is_empty());
        assert!(is_protected(b"sub/.GIT/config") && is_protected(b".Rawko"));
        assert!(!is_protected(b"sub/.rawko/x") && !is_protected(b".rawkorc"));
    }

    /// A hostile patch cannot write outside the work tree, directly or through a symlink the
    /// work tree holds.
    #[test]
    fn a_patch_cannot_write_outside_the_work_tree() {
        let outside = tempfile::tempdir().unwrap();
        let to = repo();
        let escape = "diff --git a/../../x b/../../x\nnew file mode 100644\n--- /dev/null\n+++ b/../../x\n@@ -0,0 +1 @@\n+owned\n";
        assert!(apply(to.path(), escape.as_bytes(), false).is_err());
        std::os::unix::fs::symlink(outside.path(), to.path().join("link")).unwrap();
        let through = "diff --git a/link/x b/link/x\nnew file mode 100644\n--- /dev/null\n+++ b/link/x\n@@ -0,0 +1 @@\n+owned\n";
        let err = apply(to.path(), through.as_bytes(), false).unwrap_err();
        assert!(err.contains("symbolic link"), "{err}");
        assert!(!outside.path().join("x").exists());
    }
}
