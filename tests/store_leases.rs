//! The task store between machines: a task's lease is held by one runner's identity (host, pid
//! and a token of its process), judged stale by the store's clock after the user's `staleMs`;
//! and `rawko tasks list --all` shows the tasks of every workspace with their workspace and host.

use std::process::Child;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::model_server::{Reply, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko, scripted_worker, start_worker, store};

fn finish(summary: &str) -> Reply {
    openai::tool_call(
        "c1",
        "finish",
        &json!({"status": "success", "summary": summary}),
    )
}

/// `rawko run` on host `host`, and the task's id from its first event.
fn start(ws: &Workspace, host: &str) -> (Child, String) {
    let mut cmd = rawko(ws);
    cmd.env("RAWKO_HOST_ID", host);
    start_worker(cmd, &["--max-steps", "1", "Look around."])
}

fn resume(ws: &Workspace, host: &str, id: &str) -> Run {
    Run::of(
        rawko(ws)
            .env("TEST_KEY", TEST_KEY)
            .env("RAWKO_HOST_ID", host)
            .args(["resume", "--json", id])
            .output()
            .unwrap(),
    )
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The lease columns of task `id`: pid, host, heartbeat.
fn lease(ws: &Workspace, id: &str) -> (Option<i64>, Option<String>, Option<i64>) {
    let row = &store::query(
        ws,
        &format!(
            "SELECT CAST(lease_pid AS TEXT), lease_host, CAST(lease_at AS TEXT) FROM tasks \
             WHERE id = '{id}'"
        ),
    )[0];
    let int = |v: &Option<String>| v.as_ref().map(|n| n.parse::<i64>().unwrap());
    (int(&row[0]), row[1].clone(), int(&row[2]))
}

/// A runner on another machine (another `RAWKO_HOST_ID`) cannot take a task over while its
/// runner's heartbeat is fresh; once the heartbeat is older than `staleMs` (the runner stopped,
/// its machine unreachable), `rawko resume` takes it over and finishes it.
#[test]
fn another_host_takes_a_task_over_only_once_its_heartbeat_is_stale() {
    let (ws, server) =
        scripted_worker("store:\n  lease:\n    heartbeatMs: 200\n    staleMs: 1500\n");
    server.push(finish("first").delay(Duration::from_secs(30)));
    for _ in 0..6 {
        server.push(finish("taken over"));
    }
    let (mut first, id) = start(&ws, "host-a");
    wait_for("the lease", || lease(&ws, &id).1.is_some());
    assert_eq!(lease(&ws, &id).1.as_deref(), Some("host-a"));

    // Fresh for longer than `staleMs`: the heartbeat keeps it so.
    std::thread::sleep(Duration::from_millis(2000));
    let refused = resume(&ws, "host-b", &id);
    assert_eq!(refused.code, 2, "{refused:?}");
    assert!(
        refused.stderr.contains("is being run by rawko (pid") && refused.stderr.contains("host-a"),
        "{refused:?}"
    );

    // Its machine stops answering: no more heartbeats.
    unsafe { libc::kill(first.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(2500));
    let taken = resume(&ws, "host-b", &id);
    unsafe { libc::kill(first.id() as i32, libc::SIGKILL) };
    let _ = first.wait();
    assert_eq!(taken.code, 0, "{taken:?}");
    let shown = Run::of(
        rawko(&ws)
            .args(["tasks", "show", "--json", &id])
            .output()
            .unwrap(),
    );
    let shown = shown.json();
    assert_eq!(shown["task"]["status"], "done", "{shown}");
    let takeover = shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["capability"] == "lease")
        .unwrap_or_else(|| panic!("no take-over recorded: {shown}"))
        .clone();
    assert!(
        takeover["detail"].as_str().unwrap().ends_with("on host-b"),
        "{takeover}"
    );
    assert!(
        takeover["reason"]
            .as_str()
            .unwrap()
            .contains("has not renewed its lease"),
        "{takeover}"
    );
}

/// A runner stalled past the staleness (a paused VM, a machine cut off) whose task another host
/// took over and finished stops when it wakes: at its next heartbeat, without waiting for its
/// model call, exit 75, and the task stays as the other runner left it.
#[test]
fn a_runner_whose_task_was_taken_over_stops_when_it_wakes() {
    // A heartbeat a second apart: the runner is rarely stopped inside a write, which would keep
    // SQLite's write lock from the other runner.
    let (ws, server) =
        scripted_worker("store:\n  lease:\n    heartbeatMs: 1000\n    staleMs: 1500\n");
    server.push(finish("first").delay(Duration::from_secs(30)));
    for _ in 0..6 {
        server.push(finish("taken over"));
    }
    let (first, id) = start(&ws, "host-a");
    // Stalled while its model answers.
    wait_for("the first model call", || !server.received().is_empty());
    unsafe { libc::kill(first.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(2500));
    let taken = resume(&ws, "host-b", &id);
    assert_eq!(taken.code, 0, "{taken:?}");
    let show = || {
        Run::of(
            rawko(&ws)
                .args(["tasks", "show", "--json", &id])
                .output()
                .unwrap(),
        )
        .stdout
    };
    let before = show();

    let woke = Instant::now();
    unsafe { libc::kill(first.id() as i32, libc::SIGCONT) };
    let out = first.wait_with_output().unwrap();
    let out = Run::of(out);
    assert!(
        woke.elapsed() < Duration::from_secs(10),
        "it waited for its model call: {out:?}"
    );
    assert_eq!(out.code, 75, "{out:?}");
    assert!(
        out.stderr
            .contains(&format!("task {id} was taken over by ")),
        "{out:?}"
    );
    assert_eq!(show(), before, "the stalled runner changed the task");
}

/// Two rawko processes with the same pid (two containers, one pid namespace each) are two
/// runners: a lease row with this process's pid and host but another process's token is not
/// this process's to renew or give up.
#[test]
fn a_lease_with_the_same_pid_but_another_token_is_not_ours() {
    let (ws, server) =
        scripted_worker("store:\n  lease:\n    heartbeatMs: 100\n    staleMs: 5000\n");
    server.push(finish("done").delay(Duration::from_secs(3)));
    let (first, id) = start(&ws, "box");
    wait_for("the lease", || lease(&ws, &id).1.is_some());
    let (pid, host, _) = lease(&ws, &id);
    assert_eq!(pid, Some(first.id() as i64));

    // The same pid and host, another process's token and heartbeat.
    let now = if ws.pg().is_some() {
        "CAST(EXTRACT(EPOCH FROM now()) * 1000 AS BIGINT)"
    } else {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    };
    let marker: i64 = store::query(&ws, &format!("SELECT CAST({now} - 7 AS TEXT)"))[0][0]
        .as_ref()
        .unwrap()
        .parse()
        .unwrap();
    store::execute(
        &ws,
        &format!(
            "UPDATE tasks SET lease_token = 'another-process', lease_at = {marker} \
             WHERE id = '{id}'"
        ),
    );

    // Many heartbeats later, the other runner's heartbeat stands.
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(lease(&ws, &id), (pid, host.clone(), Some(marker)));

    // Ending, the process gives up only its own lease: the other runner's stays.
    let out = first.wait_with_output().unwrap();
    assert!(out.status.code().is_some(), "{out:?}");
    assert_eq!(lease(&ws, &id), (pid, host, Some(marker)));
}

/// A repository of one commit, with a remote whose URL holds credentials.
fn repository(dir: &std::path::Path, remote: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", dir)
            .env("GIT_AUTHOR_DATE", "2020-01-01T00:00:00Z")
            .env("GIT_COMMITTER_DATE", "2020-01-01T00:00:00Z")
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["remote", "add", "origin", remote]);
    std::fs::write(dir.join("README"), dir.display().to_string()).unwrap();
    git(&["add", "README"]);
    git(&[
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@example.com",
        "commit",
        "-q",
        "-m",
        "root",
    ]);
}

/// `rawko tasks list` shows this workspace's tasks; `--all` those of every workspace whose store
/// is in the state directory, with the workspace (its repository's remote, credentials
/// stripped) and the host each was made on.
#[test]
fn tasks_list_all_shows_the_tasks_of_every_workspace() {
    let (ws, server) = scripted_worker("");
    let (a, b) = (ws.path().join("alpha"), ws.path().join("beta"));
    repository(&a, "https://user:s3cret@example.com/team/alpha.git");
    repository(&b, "git@example.com:team/beta.git");
    for (dir, host, prompt) in [
        (&a, "host-a", "Task in alpha."),
        (&b, "host-b", "Task in beta."),
    ] {
        for _ in 0..6 {
            server.push(finish("done"));
        }
        let r = Run::of(
            rawko(&ws)
                .env("TEST_KEY", TEST_KEY)
                .env("RAWKO_HOST_ID", host)
                .arg("--workspace")
                .arg(dir)
                .args([
                    "run",
                    "--agent",
                    "worker",
                    "--quiet",
                    "--max-steps",
                    "1",
                    prompt,
                ])
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{r:?}");
    }
    let list = |dir: &std::path::Path, args: &[&str]| {
        Run::of(
            rawko(&ws)
                .arg("--workspace")
                .arg(dir)
                .args(["tasks", "list"])
                .args(args)
                .output()
                .unwrap(),
        )
    };
    let here = list(&a, &["--json"]).json();
    let here = here.as_array().unwrap();
    assert_eq!(here.len(), 1, "{here:?}");
    assert_eq!(here[0]["prompt"], "Task in alpha.");
    assert_eq!(here[0]["host"], "host-a");
    assert_eq!(
        here[0]["workspace"]["remote"],
        "https://example.com/team/alpha.git"
    );
    assert_eq!(here[0]["workspace"]["path"], a.display().to_string());
    assert_eq!(
        here[0]["workspace"]["root"].as_str().map(str::len),
        Some(40),
        "{here:?}"
    );

    let all = list(&a, &["--all", "--json"]).json();
    let prompts: Vec<&str> = all
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["prompt"].as_str().unwrap())
        .collect();
    assert_eq!(prompts, ["Task in beta.", "Task in alpha."]);

    let table = list(&a, &["--all"]);
    assert_eq!(table.code, 0, "{table:?}");
    assert!(!table.stdout.contains("s3cret"), "{table:?}");
    let mut s = insta::Settings::clone_current();
    s.add_filter(&regex_literal(&ws.path().display().to_string()), "[WS]");
    s.add_filter(r"\b[0-9a-z]{10}\b", "[ID]");
    s.add_filter(r"(?m)[ \t]+$", "");
    s.bind(|| insta::assert_snapshot!("tasks_list_all", table.stdout));
}

fn regex_literal(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}
