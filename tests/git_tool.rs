//! The `Git` tool through the real binary, from the attacker's side: a repository whose own
//! `.git/config` names programs for every hook git has (fsmonitor, hooks, pager, external diff,
//! textconv, filter drivers) must not get one of them run by any Git tool operation; and the
//! tool's grants: read-only callers cannot write, and nothing leaves the repository.

use std::path::Path;
use std::process::Command;

use crate::support::{Run, Workspace, run};

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

fn call(ws: &Workspace, grant: &str, input: &str) -> Run {
    run(ws, &["tool", "call", "Git", grant, ".", "--input", input])
}

/// A repository with two commits and a second branch, then a config that names a program for
/// everything git can be made to run.
fn hostile_repo(ws: &Workspace, markers: &Path) {
    let d = ws.path();
    git(d, &["init", "-q", "-b", "main"]);
    ws.write(".gitattributes", "*.txt filter=evil diff=evil\n");
    ws.write("a.txt", "one\ntwo\n");
    ws.write("src/lib.rs", "fn main() {}\n");
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "first"]);
    ws.write("a.txt", "one\n2\n");
    git(d, &["commit", "-q", "-am", "second"]);
    git(d, &["branch", "other", "HEAD~1"]);

    let evil = ws.write(
        "evil.sh",
        format!("#!/bin/sh\ntouch '{}'/\"$1\"\ncat\n", markers.display()),
    );
    std::fs::set_permissions(&evil, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let hooks = d.join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    for hook in [
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "reference-transaction",
        "post-index-change",
        "pre-auto-gc",
    ] {
        let h = hooks.join(hook);
        std::fs::write(&h, format!("#!/bin/sh\n'{}' hook-{hook}\n", evil.display())).unwrap();
        std::fs::set_permissions(&h, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    }
    let e = evil.display();
    let config = format!(
        "[core]\n\tfsmonitor = {e} fsmonitor\n\thooksPath = {}\n\tpager = {e} pager\n\
         \teditor = {e} editor\n\tsshCommand = {e} ssh\n\
         [diff]\n\texternal = {e} external\n\
         [diff \"evil\"]\n\ttextconv = {e} textconv\n\tcommand = {e} diffcmd\n\
         [filter \"evil\"]\n\tclean = {e} clean\n\tsmudge = {e} smudge\n\trequired = true\n\
         [merge \"evil\"]\n\tdriver = {e} merge\n\
         [gc]\n\tauto = 1\n",
        hooks.display()
    );
    let path = d.join(".git/config");
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&config);
    std::fs::write(path, text).unwrap();
}

fn markers(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn no_git_tool_operation_runs_a_program_the_repository_names() {
    let ws = Workspace::new();
    let marks = tempfile::tempdir().unwrap();
    hostile_repo(&ws, marks.path());
    // Changes for every operation to work on: modified, new and deleted files.
    ws.write("a.txt", "changed in the work tree\n");
    ws.write("b.txt", "new\n");
    std::fs::remove_file(ws.path().join("src/lib.rs")).unwrap();

    let ops = [
        r#"{"op":"status"}"#,
        r#"{"op":"diff"}"#,
        r#"{"op":"diff","staged":true}"#,
        r#"{"op":"diff","rev":"HEAD~1"}"#,
        r#"{"op":"diff","rev":"other..main"}"#,
        r#"{"op":"log","paths":["a.txt"]}"#,
        r#"{"op":"show","rev":"HEAD"}"#,
        r#"{"op":"show","rev":"HEAD:a.txt"}"#,
        r#"{"op":"blame","path":"a.txt"}"#,
        r#"{"op":"branch"}"#,
        r#"{"op":"stash"}"#,
        r#"{"op":"switch","branch":"other"}"#,
        r#"{"op":"switch","branch":"main"}"#,
        r#"{"op":"stash","pop":true}"#,
        r#"{"op":"add","paths":["."]}"#,
        r#"{"op":"restore","paths":["b.txt"],"staged":true}"#,
        r#"{"op":"commit","message":"agent commit"}"#,
        r#"{"op":"switch","branch":"feature","create":true}"#,
        r#"{"op":"restore","paths":["."]}"#,
    ];
    for op in ops {
        let r = call(&ws, "--write", op);
        assert_eq!(r.code, 0, "{op}: {r:?}");
    }
    assert_eq!(
        markers(marks.path()),
        Vec::<String>::new(),
        "a program named by the repository ran"
    );
    // What the tool did is what git sees.
    assert_eq!(
        git(ws.path(), &["log", "-1", "--format=%s"]),
        "agent commit\n"
    );
    assert_eq!(git(ws.path(), &["branch", "--show-current"]), "feature\n");

    // The same repository through git itself: its config is live, and git runs what it names.
    git(ws.path(), &["status", "--porcelain"]);
    ws.write("a.txt", "again\n");
    git(ws.path(), &["add", "a.txt"]);
    let ran = markers(marks.path());
    assert!(
        ran.contains(&"fsmonitor".to_string()) && ran.contains(&"clean".to_string()),
        "the hostile config was not live, so the test proves nothing: {ran:?}"
    );
}

#[test]
fn a_read_only_caller_cannot_write_and_paths_stay_in_the_repository() {
    let ws = Workspace::new();
    let marks = tempfile::tempdir().unwrap();
    hostile_repo(&ws, marks.path());
    ws.write("a.txt", "changed\n");
    let index = std::fs::read(ws.path().join(".git/index")).unwrap();

    let r = call(&ws, "--read", r#"{"op":"add","paths":["."]}"#);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("may only read"), "{r:?}");
    assert_eq!(std::fs::read(ws.path().join(".git/index")).unwrap(), index);
    let r = call(&ws, "--read", r#"{"op":"diff"}"#);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("+changed"), "{r:?}");

    for input in [
        r#"{"op":"add","paths":["../../etc"]}"#,
        r#"{"op":"add","paths":[".git/hooks"]}"#,
        r#"{"op":"show","rev":"HEAD:../../etc/passwd"}"#,
        r#"{"op":"push"}"#,
        r#"{"op":"status","remote":"origin"}"#,
    ] {
        let r = call(&ws, "--write", input);
        assert_ne!(r.code, 0, "{input}: {r:?}");
    }
    assert_eq!(markers(marks.path()), Vec::<String>::new());
}

#[test]
fn a_planted_dot_git_file_or_worktree_elsewhere_is_refused() {
    // A repository the user owns elsewhere, which a stranger's tree points at.
    let victim = Workspace::new();
    git(victim.path(), &["init", "-q", "-b", "main"]);
    victim.write("secret.txt", "the user's secret\n");
    git(victim.path(), &["add", "."]);
    git(victim.path(), &["commit", "-q", "-m", "secret"]);

    let ws = Workspace::new();
    ws.write(
        ".git",
        format!("gitdir: {}\n", victim.path().join(".git").display()),
    );
    let r = call(&ws, "--read", r#"{"op":"show","rev":"HEAD:secret.txt"}"#);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("secret"), "{r:?}");
    assert!(r.stderr.contains("linked worktree"), "{r:?}");

    let ws = Workspace::new();
    git(ws.path(), &["init", "-q", "-b", "main"]);
    let cfg = ws.path().join(".git/config");
    let mut text = std::fs::read_to_string(&cfg).unwrap();
    text.push_str(&format!(
        "[core]\n\tworktree = {}\n",
        victim.path().display()
    ));
    std::fs::write(&cfg, text).unwrap();
    let r = call(&ws, "--read", r#"{"op":"status"}"#);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("secret"), "{r:?}");
    assert!(r.stderr.contains("core.worktree"), "{r:?}");
}
