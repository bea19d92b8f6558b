//! Every Git tool operation on a scratch repository, checked against what the `git` command
//! itself then reports about the same repository.

use std::path::Path;
use std::process::Command;

use rawko_git::{GitError, Identity, Options, Request};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "user.name=Tester", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with two commits on `main`.
fn scratch() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    git(d, &["init", "-q", "-b", "main"]);
    std::fs::write(d.join("a.txt"), "one\ntwo\nthree\n").unwrap();
    std::fs::create_dir(d.join("src")).unwrap();
    std::fs::write(d.join("src/lib.rs"), "fn main() {}\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "first commit"]);
    std::fs::write(d.join("a.txt"), "one\n2\nthree\n").unwrap();
    git(d, &["commit", "-q", "-am", "second: change a"]);
    dir
}

fn opts(write: bool) -> Options {
    Options {
        write,
        identity: Identity {
            name: "Agent Smith".into(),
            email: "agent@example.com".into(),
        },
    }
}

fn run(dir: &Path, input: serde_json::Value) -> Result<String, GitError> {
    let request: Request = serde_json::from_value(input).expect("a valid request");
    rawko_git::run(dir, request, &opts(true))
}

fn ok(dir: &Path, input: serde_json::Value) -> String {
    run(dir, input.clone()).unwrap_or_else(|e| panic!("{input}: {e}"))
}

#[test]
fn status_lists_staged_unstaged_and_untracked() {
    let repo = scratch();
    let d = repo.path();
    assert!(ok(d, serde_json::json!({"op": "status"})).contains("clean"));
    std::fs::write(d.join("a.txt"), "changed\n").unwrap();
    std::fs::write(d.join("new.txt"), "new\n").unwrap();
    std::fs::write(d.join("staged.txt"), "s\n").unwrap();
    git(d, &["add", "staged.txt"]);
    std::fs::remove_file(d.join("src/lib.rs")).unwrap();
    let out = ok(d, serde_json::json!({"op": "status"}));
    assert!(out.starts_with("On branch main\n"), "{out}");
    assert!(
        out.contains("Staged (to be committed) (1):\n  A staged.txt"),
        "{out}"
    );
    assert!(out.contains("M a.txt"), "{out}");
    assert!(out.contains("D src/lib.rs"), "{out}");
    assert!(out.contains("Untracked (1):\n  new.txt"), "{out}");
}

#[test]
fn diff_covers_the_work_tree_the_index_revisions_and_ranges() {
    let repo = scratch();
    let d = repo.path();
    std::fs::write(d.join("a.txt"), "one\n2\nthree\nfour\n").unwrap();
    let out = ok(d, serde_json::json!({"op": "diff"}));
    assert!(out.contains("a.txt | +1 -0"), "{out}");
    assert!(out.contains("+four"), "{out}");
    assert!(
        ok(d, serde_json::json!({"op": "diff", "staged": true})).contains("No differences"),
        "nothing staged yet"
    );
    git(d, &["add", "a.txt"]);
    assert!(ok(d, serde_json::json!({"op": "diff", "staged": true})).contains("+four"));
    assert!(ok(d, serde_json::json!({"op": "diff"})).contains("No differences"));

    let range = ok(d, serde_json::json!({"op": "diff", "rev": "HEAD~1..HEAD"}));
    assert!(range.contains("-two\n+2"), "{range}");
    let against = ok(d, serde_json::json!({"op": "diff", "rev": "HEAD~1"}));
    assert!(
        against.contains("-two") && against.contains("+four"),
        "{against}"
    );
    let filtered = ok(
        d,
        serde_json::json!({"op": "diff", "rev": "HEAD~1", "paths": ["src"]}),
    );
    assert!(filtered.contains("No differences"), "{filtered}");

    let many: String = (0..100).map(|i| format!("line {i}\n")).collect();
    std::fs::write(d.join("a.txt"), many).unwrap();
    let cut = ok(d, serde_json::json!({"op": "diff", "max_lines": 10}));
    assert!(cut.contains("more lines not shown"), "{cut}");
}

#[test]
fn log_show_blame_and_branch_read_history() {
    let repo = scratch();
    let d = repo.path();
    let log = ok(d, serde_json::json!({"op": "log"}));
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 2, "{log}");
    assert!(lines[0].ends_with("Tester: second: change a"), "{log}");
    let one = ok(d, serde_json::json!({"op": "log", "max_count": 1}));
    assert!(one.contains("[cut after 1 commits"), "{one}");
    let by_path = ok(d, serde_json::json!({"op": "log", "paths": ["src/lib.rs"]}));
    assert_eq!(by_path.lines().count(), 1, "{by_path}");
    assert!(by_path.contains("first commit"));

    let show = ok(d, serde_json::json!({"op": "show", "rev": "HEAD"}));
    assert!(show.contains("Author: Tester <t@example.com>"), "{show}");
    assert!(
        show.contains("second: change a") && show.contains("+2"),
        "{show}"
    );
    let blob = ok(d, serde_json::json!({"op": "show", "rev": "HEAD~1:a.txt"}));
    assert_eq!(blob, "one\ntwo\nthree\n");

    let blame = ok(d, serde_json::json!({"op": "blame", "path": "a.txt"}));
    let head = git(d, &["rev-parse", "--short=8", "HEAD"]);
    let first = git(d, &["rev-parse", "--short=8", "HEAD~1"]);
    let blamed: Vec<&str> = blame.lines().collect();
    assert_eq!(blamed.len(), 3, "{blame}");
    assert!(
        blamed[0].starts_with(first.trim()) && blamed[0].ends_with(") one"),
        "{blame}"
    );
    assert!(
        blamed[1].starts_with(head.trim()) && blamed[1].ends_with(") 2"),
        "{blame}"
    );

    git(d, &["branch", "feature"]);
    let branches = ok(d, serde_json::json!({"op": "branch"}));
    assert!(branches.contains("* main"), "{branches}");
    assert!(branches.contains("  feature"), "{branches}");

    let err = run(d, serde_json::json!({"op": "show", "rev": "no-such-rev"})).unwrap_err();
    assert!(err.to_string().contains("unknown revision"), "{err}");
}

#[test]
fn add_and_commit_make_a_commit_git_accepts() {
    let repo = scratch();
    let d = repo.path();
    std::fs::write(d.join("a.txt"), "rewritten\n").unwrap();
    std::fs::create_dir(d.join("docs")).unwrap();
    std::fs::write(d.join("docs/new.md"), "# new\n").unwrap();
    std::fs::remove_file(d.join("src/lib.rs")).unwrap();
    std::fs::write(d.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(d.join("debug.log"), "ignored\n").unwrap();
    let added = ok(d, serde_json::json!({"op": "add", "paths": ["."]}));
    assert!(
        added.contains("A docs/new.md") && added.contains("D src/lib.rs"),
        "{added}"
    );
    assert!(!added.contains("debug.log"), "{added}");
    let porcelain = git(d, &["status", "--porcelain"]);
    assert_eq!(
        porcelain, "A  .gitignore\nM  a.txt\nA  docs/new.md\nD  src/lib.rs\n",
        "git sees what was staged"
    );
    let committed = ok(
        d,
        serde_json::json!({"op": "commit", "message": "agent work\n\nbody"}),
    );
    assert!(committed.contains("4 file(s) changed"), "{committed}");
    assert_eq!(git(d, &["status", "--porcelain"]), "");
    assert_eq!(
        git(d, &["log", "-1", "--format=%an <%ae>|%cn|%s"]),
        "Agent Smith <agent@example.com>|Agent Smith|agent work\n"
    );
    git(d, &["fsck", "--strict"]);
    let again = run(d, serde_json::json!({"op": "commit", "message": "empty"})).unwrap_err();
    assert!(again.to_string().contains("nothing to commit"), "{again}");
}

#[test]
fn switch_creates_and_moves_between_branches() {
    let repo = scratch();
    let d = repo.path();
    ok(
        d,
        serde_json::json!({"op": "switch", "branch": "feature", "create": true}),
    );
    assert_eq!(git(d, &["branch", "--show-current"]), "feature\n");
    std::fs::write(d.join("feature.txt"), "f\n").unwrap();
    std::fs::write(d.join("a.txt"), "on feature\n").unwrap();
    ok(d, serde_json::json!({"op": "add", "paths": ["."]}));
    ok(
        d,
        serde_json::json!({"op": "commit", "message": "feature work"}),
    );

    let back = ok(d, serde_json::json!({"op": "switch", "branch": "main"}));
    assert!(back.contains("2 file(s) changed"), "{back}");
    assert_eq!(git(d, &["branch", "--show-current"]), "main\n");
    assert!(!d.join("feature.txt").exists());
    assert_eq!(
        std::fs::read_to_string(d.join("a.txt")).unwrap(),
        "one\n2\nthree\n"
    );
    assert_eq!(
        git(d, &["status", "--porcelain"]),
        "",
        "git sees a clean switch"
    );

    std::fs::write(d.join("a.txt"), "dirty\n").unwrap();
    let refused = run(d, serde_json::json!({"op": "switch", "branch": "feature"})).unwrap_err();
    assert!(refused.to_string().contains("would be lost"), "{refused}");
    assert_eq!(std::fs::read_to_string(d.join("a.txt")).unwrap(), "dirty\n");
    let bad = run(
        d,
        serde_json::json!({"op": "switch", "branch": "../evil", "create": true}),
    );
    assert!(
        bad.unwrap_err()
            .to_string()
            .contains("not a valid branch name")
    );
}

#[test]
fn stash_push_and_pop_round_trip_and_git_sees_the_stash() {
    let repo = scratch();
    let d = repo.path();
    std::fs::write(d.join("a.txt"), "work in progress\n").unwrap();
    std::fs::write(d.join("src/lib.rs"), "staged change\n").unwrap();
    git(d, &["add", "src/lib.rs"]);
    let pushed = ok(d, serde_json::json!({"op": "stash"}));
    assert!(pushed.contains("stash@{0}"), "{pushed}");
    assert_eq!(git(d, &["status", "--porcelain"]), "");
    assert!(
        git(d, &["stash", "list"]).contains("WIP on main"),
        "git lists the stash"
    );
    git(d, &["stash", "show", "-p", "stash@{0}"]);

    let popped = ok(d, serde_json::json!({"op": "stash", "pop": true}));
    assert!(popped.contains("dropped"), "{popped}");
    assert_eq!(
        std::fs::read_to_string(d.join("a.txt")).unwrap(),
        "work in progress\n"
    );
    assert_eq!(
        git(d, &["status", "--porcelain"]),
        " M a.txt\nM  src/lib.rs\n"
    );
    assert_eq!(git(d, &["stash", "list"]), "");
    let none = run(d, serde_json::json!({"op": "stash", "pop": true})).unwrap_err();
    assert!(none.to_string().contains("no stash"), "{none}");
}

#[test]
fn restore_undoes_work_tree_and_staged_changes() {
    let repo = scratch();
    let d = repo.path();
    std::fs::write(d.join("a.txt"), "oops\n").unwrap();
    std::fs::remove_file(d.join("src/lib.rs")).unwrap();
    let out = ok(
        d,
        serde_json::json!({"op": "restore", "paths": ["a.txt", "src"]}),
    );
    assert!(
        out.contains("restored a.txt") && out.contains("restored src/lib.rs"),
        "{out}"
    );
    assert_eq!(git(d, &["status", "--porcelain"]), "");

    std::fs::write(d.join("a.txt"), "staged\n").unwrap();
    std::fs::write(d.join("b.txt"), "new\n").unwrap();
    git(d, &["add", "."]);
    ok(
        d,
        serde_json::json!({"op": "restore", "paths": ["."], "staged": true}),
    );
    assert_eq!(git(d, &["status", "--porcelain"]), " M a.txt\n?? b.txt\n");
}

#[test]
fn writes_need_the_write_grant_and_stay_in_the_workspace() {
    let repo = scratch();
    let d = repo.path();
    let request: Request =
        serde_json::from_value(serde_json::json!({"op": "commit", "message": "x"})).unwrap();
    let err = rawko_git::run(d, request, &opts(false)).unwrap_err();
    assert!(matches!(err, GitError::Denied(_)), "{err}");
    assert!(err.to_string().contains("may only read"), "{err}");
    for path in ["../outside", "/etc/passwd", ".git/config"] {
        let err = run(d, serde_json::json!({"op": "add", "paths": [path]})).unwrap_err();
        assert!(
            matches!(err, GitError::Invalid(_) | GitError::Denied(_)),
            "{path}: {err}"
        );
    }
}

#[test]
fn unknown_fields_and_ops_are_refused_by_the_request_type() {
    for bad in [
        serde_json::json!({"op": "push"}),
        serde_json::json!({"op": "status", "force": true}),
        serde_json::json!({"op": "log", "max_count": "many"}),
        serde_json::json!({"paths": ["."]}),
    ] {
        assert!(
            serde_json::from_value::<Request>(bad.clone()).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_repository_is_told_apart_by_its_root_commit_and_its_remote_without_credentials() {
    let dir = scratch();
    let d = dir.path();
    let root = git(d, &["rev-list", "--max-parents=0", "HEAD"])
        .trim()
        .to_string();
    git(
        d,
        &[
            "remote",
            "add",
            "origin",
            "https://someone:s3cret@example.com/team/repo.git",
        ],
    );
    let id = rawko_git::repository_id(d);
    assert_eq!(id.root.as_deref(), Some(root.as_str()));
    assert_eq!(
        id.remote.as_deref(),
        Some("https://example.com/team/repo.git")
    );

    // A workspace inside a repository, or no repository at all, has no identity of its own.
    assert_eq!(rawko_git::repository_id(&d.join("src")), Default::default());
    let plain = tempfile::tempdir().unwrap();
    assert_eq!(rawko_git::repository_id(plain.path()), Default::default());
}
