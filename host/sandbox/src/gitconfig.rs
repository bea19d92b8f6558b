//! The programs a repository's own git config names per repository, and the settings that stop
//! git from running them.
//!
//! A fixed list of overrides ([`crate::GIT_OVERRIDES`]) covers the keys whose names git fixes
//! (`core.fsmonitor`, `core.hooksPath`, ...). Drivers are named by the repository itself:
//! `.gitattributes` says `filter=tidy` and `.git/config` defines `filter.tidy.clean`; the same
//! for diff drivers, merge drivers, shell aliases, per-URL credential helpers, a local remote's
//! upload-pack and submodule update commands. Their names can only be read from the
//! repository's config (and the files it includes), and each is then overridden through
//! `GIT_CONFIG_COUNT`, which git reads after every config file: filters and textconv become the
//! identity, diff and merge drivers git's own, aliases that run a shell an error.
//!
//! Reading is a small parser of section and key names, never git itself: the repository is a
//! stranger's, and nothing here may run a program. It over-approximates on purpose: every
//! included file is read whatever its condition, since an override that was not needed costs
//! nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Files read at most, includes and all, and the largest one read.
const MAX_FILES: usize = 64;
const MAX_FILE_SIZE: u64 = 1 << 20;

/// A diff driver's external command replaced by a unified diff of the two versions with the
/// standard `diff` (git passes `path old-file old-hex old-mode new-file new-hex new-mode`; `|| :`
/// keeps the exit status 1 of files that differ from stopping git).
const DIFF_COMMAND: &str = r#"diff -u --label "a/$1" --label "b/$1" -- "$2" "$5" || :"#;
/// A merge driver replaced by git's own three-way merge.
const MERGE_DRIVER: &str = "git merge-file --marker-size=%L %A %O %B";
/// What a shell alias becomes: git answers `unknown option`, and runs nothing.
const ALIAS_DISABLED: &str = "--shell-aliases-are-disabled-by-rawko";

/// The overrides for the programs the git repository around `workspace` names in its config.
pub fn overrides(workspace: &Path) -> Vec<(String, String)> {
    let Some(git_dir) = find_git_dir(workspace) else {
        return Vec::new();
    };
    let mut files = vec![git_dir.join("config"), git_dir.join("config.worktree")];
    if let Ok(common) = std::fs::read_to_string(git_dir.join("commondir")) {
        let common = git_dir.join(common.trim());
        files.push(common.join("config"));
    }
    let mut keys = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for f in files {
        read(&f, &mut keys, &mut seen, 0);
    }
    overrides_for(&keys)
}

/// The repository's git directory: the nearest `.git` above `workspace`, a directory or a
/// `gitdir:` file.
fn find_git_dir(workspace: &Path) -> Option<PathBuf> {
    for dir in workspace.ancestors() {
        let dot = dir.join(".git");
        let Ok(meta) = dot.symlink_metadata() else {
            continue;
        };
        if meta.is_dir() {
            return Some(dot);
        }
        let text = std::fs::read_to_string(&dot).ok()?;
        let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
        return Some(dir.join(target));
    }
    None
}

/// One key as read: section and subsection (lower-cased where git ignores case), key name
/// (lower-cased), and its value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    section: String,
    subsection: Option<String>,
    name: String,
    value: String,
}

/// Read `file` and, with bounded depth and count, the files it includes.
fn read(file: &Path, keys: &mut BTreeSet<Key>, seen: &mut BTreeSet<PathBuf>, depth: usize) {
    if depth > 10 || seen.len() >= MAX_FILES || !seen.insert(file.to_path_buf()) {
        return;
    }
    if file
        .metadata()
        .map_or(true, |m| !m.is_file() || m.len() > MAX_FILE_SIZE)
    {
        return;
    }
    let Ok(bytes) = std::fs::read(file) else {
        return;
    };
    let text = String::from_utf8_lossy(&bytes);
    for key in parse(&text) {
        if key.name == "path"
            && (key.section == "include" || key.section == "includeif")
            && !key.value.is_empty()
        {
            let target = match key.value.strip_prefix("~/") {
                Some(rest) => std::env::home_dir().map(|h| h.join(rest)),
                None => Some(file.parent().unwrap_or(Path::new("/")).join(&key.value)),
            };
            if let Some(t) = target {
                read(&t, keys, seen, depth + 1);
            }
        }
        keys.insert(key);
    }
}

/// Section headers and keys of a git config file, as git reads them where it matters here.
fn parse(text: &str) -> Vec<Key> {
    let mut out = Vec::new();
    let (mut section, mut subsection) = (String::new(), None::<String>);
    for raw in text.lines() {
        let mut line = raw.trim_start();
        if let Some(rest) = line.strip_prefix('[') {
            let Some(end) = header_end(rest) else {
                continue;
            };
            let header = &rest[..end];
            (section, subsection) = match header.split_once(|c: char| c.is_whitespace()) {
                // `[section "subsection"]`: the subsection keeps its case.
                Some((s, sub)) => (s.to_ascii_lowercase(), Some(unquote(sub.trim()))),
                // `[section.subsection]`, the old form: both ignore case.
                None => match header.split_once('.') {
                    Some((s, sub)) => (s.to_ascii_lowercase(), Some(sub.to_ascii_lowercase())),
                    None => (header.to_ascii_lowercase(), None),
                },
            };
            // A key may follow the header on the same line.
            line = rest[end + 1..].trim_start();
        }
        if line.is_empty() || line.starts_with(['#', ';']) || section.is_empty() {
            continue;
        }
        let (name, value) = match line.split_once('=') {
            Some((n, v)) => (n.trim(), value_of(v)),
            None => (line.trim(), String::new()),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            continue;
        }
        out.push(Key {
            section: section.clone(),
            subsection: subsection.clone(),
            name: name.to_ascii_lowercase(),
            value,
        });
    }
    out
}

/// Where a header's `]` is, outside the subsection's quotes.
fn header_end(rest: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in rest.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '"' => quoted = !quoted,
            ']' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> String {
    let inner = s
        .strip_prefix('"')
        .and_then(|s| s.strip_suffix('"'))
        .unwrap_or(s);
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.extend(chars.next());
        } else {
            out.push(c);
        }
    }
    out
}

/// A value as git reads it: quotes removed, escapes applied, a comment outside quotes cut.
fn value_of(v: &str) -> String {
    let mut out = String::new();
    let (mut quoted, mut chars) = (false, v.trim().chars());
    while let Some(c) = chars.next() {
        match c {
            '"' => quoted = !quoted,
            '\\' => match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some(o) => out.push(o),
                None => {}
            },
            '#' | ';' if !quoted => break,
            _ => out.push(c),
        }
    }
    out.trim_end().to_string()
}

/// The settings that neutralise each program-naming key in `keys`.
fn overrides_for(keys: &BTreeSet<Key>) -> Vec<(String, String)> {
    let mut out = BTreeSet::new();
    for k in keys {
        let Some(sub) = &k.subsection else {
            if k.section == "alias" && k.value.starts_with('!') {
                out.insert((format!("alias.{}", k.name), ALIAS_DISABLED.to_string()));
            }
            continue;
        };
        let key = |name: &str| format!("{}.{sub}.{name}", k.section);
        let set: &[(&str, &str)] = match (k.section.as_str(), k.name.as_str()) {
            ("filter", "clean" | "smudge" | "process" | "required") => &[
                ("clean", ""),
                ("smudge", ""),
                ("process", ""),
                ("required", "false"),
            ],
            ("diff", "textconv") => &[("textconv", "cat")],
            ("diff", "command") => &[("command", DIFF_COMMAND)],
            ("merge", "driver") => &[("driver", MERGE_DRIVER)],
            ("difftool" | "mergetool", "cmd" | "path") => &[("cmd", "false"), ("path", "false")],
            ("browser" | "man", "cmd" | "path") => &[("cmd", "false"), ("path", "false")],
            ("credential", "helper") => &[("helper", "")],
            ("remote", "uploadpack") => &[("uploadpack", "git-upload-pack")],
            ("remote", "receivepack") => &[("receivepack", "git-receive-pack")],
            ("submodule", "update") if k.value.starts_with('!') => &[("update", "none")],
            _ => &[],
        };
        for (name, value) in set {
            out.insert((key(name), (*value).to_string()));
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(text: &str) -> Vec<(String, String)> {
        overrides_for(&parse(text).into_iter().collect())
    }

    #[test]
    fn drivers_named_in_every_header_form_are_overridden() {
        let o = names(
            "[filter \"Tidy\"] clean = x\n[diff.Old]\n\ttextconv = \"y\" # c\n\
             [merge \"m\\\"q\"]\n  driver = z\n[alias]\n\tst = !sh -c x\n\tlg = log -p\n\
             [submodule \"s\"]\n\tupdate = !evil\n[submodule \"t\"]\n\tupdate = rebase\n\
             [remote \"origin\"]\n\tuploadpack = evil\n[credential \"https://x\"]\n\thelper = evil\n",
        );
        let has = |k: &str| o.iter().any(|(key, _)| key == k);
        for k in [
            "filter.Tidy.clean",
            "filter.Tidy.smudge",
            "filter.Tidy.process",
            "filter.Tidy.required",
            "diff.old.textconv",
            "merge.m\"q.driver",
            "alias.st",
            "submodule.s.update",
            "remote.origin.uploadpack",
            "credential.https://x.helper",
        ] {
            assert!(has(k), "{k} missing from {o:?}");
        }
        assert!(!has("alias.lg"), "a plain alias is kept: {o:?}");
        assert!(!has("submodule.t.update"), "{o:?}");
        assert!(!has("diff.old.command"), "only what is set: {o:?}");
    }

    #[test]
    fn includes_are_followed_whatever_their_condition_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let git = dir.path().join(".git");
        std::fs::create_dir(&git).unwrap();
        std::fs::write(
            git.join("config"),
            "[include]\n\tpath = a.config\n[includeIf \"gitdir:/nowhere/\"]\n\tpath = b.config\n",
        )
        .unwrap();
        // `a` includes itself: read once.
        std::fs::write(
            git.join("a.config"),
            "[include]\npath = a.config\n[filter \"a\"]\nclean = x\n",
        )
        .unwrap();
        std::fs::write(git.join("b.config"), "[diff \"b\"]\ncommand = y\n").unwrap();
        let o = overrides(dir.path());
        assert!(o.iter().any(|(k, _)| k == "filter.a.clean"), "{o:?}");
        assert!(o.iter().any(|(k, _)| k == "diff.b.command"), "{o:?}");
    }

    #[test]
    fn a_gitdir_file_is_followed_and_no_repository_gives_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::write(real.join("config"), "[filter \"x\"]\nsmudge = y\n").unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(ws.join(".git"), "gitdir: ../real\n").unwrap();
        assert!(overrides(&ws).iter().any(|(k, _)| k == "filter.x.smudge"));
        let none = tempfile::tempdir().unwrap();
        assert!(
            overrides(none.path())
                .iter()
                .all(|(k, _)| !k.starts_with("filter."))
        );
    }
}
