//! Where commands read and write: redirections, the paths their arguments name, and the
//! read and write grants those paths are checked against. Kept apart from the rest of the
//! checker so every file-access rule is in one place.

use std::path::Path;

use rawko_plugin_sdk::bash_filter::{Redirect, RedirectKind, Word};
use rawko_plugin_sdk::path::normalize;

use super::{Checker, Cmd, Denial, deny, short};

/// Files anyone may read or write without a grant.
const ALWAYS_READABLE: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];
const ALWAYS_WRITABLE: &[&str] = &["/dev/null"];

impl Checker<'_> {
    pub(super) fn redirect(&self, r: &Redirect, text: &str) -> Result<(), Denial> {
        let what = format!("`{}`", short(text));
        match r.kind {
            RedirectKind::Read => match (&r.target, &r.path) {
                (Word::Literal(_), Some(p)) => self.readable(p, &what),
                _ => deny(
                    "unjudgeable",
                    format!(
                        "{what} reads from `{}`, only known when it runs",
                        r.target.text()
                    ),
                ),
            },
            RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite => {
                match (&r.target, &r.path) {
                    (Word::Literal(_), Some(p)) => self.writable(p, &what),
                    _ => deny(
                        "unjudgeable",
                        format!(
                            "{what} writes to `{}`, only known when it runs",
                            r.target.text()
                        ),
                    ),
                }
            }
            RedirectKind::Duplicate => match &r.target {
                Word::Literal(t) if t == "-" || t.chars().all(|c| c.is_ascii_digit()) => Ok(()),
                other => deny(
                    "unjudgeable",
                    format!("{what} duplicates the descriptor `{}`", other.text()),
                ),
            },
            RedirectKind::HereString | RedirectKind::HereDoc => Ok(()),
        }
    }

    fn inside(path: &str, dirs: &[String]) -> bool {
        dirs.iter().any(|d| {
            path == d
                || d == "/"
                || path
                    .strip_prefix(d.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    pub(super) fn readable(&self, path: &str, what: &str) -> Result<(), Denial> {
        if ALWAYS_READABLE.contains(&path)
            || Self::inside(path, &self.policy.read_paths)
            || Self::inside(path, &self.policy.write_paths)
        {
            return Ok(());
        }
        let granted = if self.policy.read_paths.is_empty() {
            "this agent may read no files".to_string()
        } else {
            format!("readable: {}", self.policy.read_paths.join(", "))
        };
        deny(
            "readPaths",
            format!("{what} reads {path}, outside the paths this agent may read ({granted})"),
        )
    }

    pub(super) fn writable(&self, path: &str, what: &str) -> Result<(), Denial> {
        if ALWAYS_WRITABLE.contains(&path) {
            return Ok(());
        }
        if self.policy.write_paths.is_empty() {
            return deny(
                "writePaths",
                format!("{what} writes {path}, and this agent may not write anything"),
            );
        }
        if !Self::inside(path, &self.policy.write_paths) {
            return deny(
                "writePaths",
                format!(
                    "{what} writes {path}, outside the paths this agent may write ({})",
                    self.policy.write_paths.join(", ")
                ),
            );
        }
        let rawko_dir = format!("{}/.rawko", self.policy.workspace);
        if path.split('/').any(|c| c == ".git")
            || path == rawko_dir
            || path.starts_with(&format!("{rawko_dir}/"))
        {
            return deny(
                "protectedPaths",
                format!(
                    "{what} writes {path}: files under .git (hooks, config) and .rawko decide what runs later, and commands may not change them"
                ),
            );
        }
        Ok(())
    }

    pub(super) fn resolve(&self, path: &str, cwd: &str) -> String {
        self.host.resolve_path(path, cwd)
    }

    /// Arguments that name files outside the workspace's tree (absolute, or climbing out with
    /// `..`) must be readable.
    pub(super) fn path_args(&self, cmd: &Cmd) -> Result<(), Denial> {
        for w in cmd.words.iter().skip(1) {
            let Word::Literal(arg) = w else { continue };
            let what = || format!("`{}` (argument `{arg}`)", short(&cmd.normalized()));
            for candidate in path_candidates(arg) {
                let real = self.resolve(candidate, &cmd.cwd);
                self.readable(&real, &what())?;
            }
            // A relative path that leads out through a symlink.
            let relative = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            if !relative.is_empty() && !relative.starts_with('-') && !relative.starts_with('/') {
                let real = self.resolve(relative, &cmd.cwd);
                if real != lexical(&cmd.cwd, relative) {
                    self.readable(&real, &format!("{} (through a symlink)", what()))?;
                }
            }
        }
        Ok(())
    }
}

/// The parts of an argument that name a path outside the tree the command works in: absolute
/// paths and paths that climb out with `..`, alone or as the value of `--opt=`, `key=` or `-o`.
pub(super) fn path_candidates(arg: &str) -> Vec<&str> {
    let looks = |s: &str| {
        s.starts_with('/')
            || s == ".."
            || s.starts_with("../")
            || s.contains("/../")
            || s.ends_with("/..")
    };
    let mut out = Vec::new();
    if looks(arg) {
        out.push(arg);
    }
    if let Some((_, v)) = arg.split_once('=')
        && looks(v)
    {
        out.push(v);
    }
    if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") && looks(&arg[2..]) {
        out.push(&arg[2..]);
    }
    out
}

/// `rel` joined to `cwd` (absolute) with `.` and `..` removed, without looking at the
/// filesystem: the host's own lexical reading, so where its resolved path differs, a symlink
/// made the difference.
pub(super) fn lexical(cwd: &str, rel: &str) -> String {
    normalize(&Path::new(cwd).join(rel))
        .to_string_lossy()
        .into_owned()
}
