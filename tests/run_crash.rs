//! Crash tests: `rawko run` is killed with SIGKILL at several points of a task, then
//! `rawko resume` finishes it. Every tool call appends its own label to `runs.log`, so the test
//! can count how often each really ran: a call the store had committed before the kill must
//! never run again, and the database must pass `PRAGMA integrity_check` after every kill.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::model_server::{ModelServer, Reply, openai};
use crate::support::{
    Run, STEP_AGENT, TEST_KEY, Workspace, first_task_id, rawko, scripted_config, store,
};

/// The model's side: four steps, each a Bash call that logs its label, then `finish`. With
/// `slow_third`, the third step also sleeps, so a kill can land while it runs.
fn replies(slow_third: bool) -> Vec<Reply> {
    let call = |n: usize, command: &str| {
        openai::tool_call(&format!("call_{n}"), "Bash", &json!({ "command": command }))
    };
    vec![
        call(0, "echo one >> runs.log"),
        call(1, "echo two >> runs.log"),
        call(
            2,
            if slow_third {
                "echo three >> runs.log && sleep 2"
            } else {
                "echo three >> runs.log"
            },
        ),
        call(3, "echo four >> runs.log"),
        openai::tool_call(
            "call_4",
            "finish",
            &json!({"status": "success", "summary": "all four steps ran"}),
        ),
    ]
}

fn setup() -> (Workspace, ModelServer) {
    let ws = Workspace::new();
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(user.join("agents")).unwrap();
    std::fs::write(user.join("agents/worker.yaml"), STEP_AGENT).unwrap();
    let server = ModelServer::start();
    std::fs::write(
        user.join("config.yaml"),
        scripted_config(&server.base_url()),
    )
    .unwrap();
    (ws, server)
}

fn spawn(ws: &Workspace, args: &[&str]) -> Child {
    rawko(ws)
        .env("TEST_KEY", TEST_KEY)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn log_lines(ws: &Workspace) -> Vec<String> {
    std::fs::read_to_string(ws.path().join("runs.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The labels of the tool calls the store has committed.
fn committed(ws: &Workspace) -> Vec<String> {
    if ws.pg().is_none() {
        let conn = rusqlite::Connection::open(crate::support::store_path(ws)).unwrap();
        let ok: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(ok, "ok", "the store is damaged after the kill");
        // Killed while the store was being created: its schema comes in one transaction, so
        // it is all there or none of it is.
        let tables: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM sqlite_master WHERE name = 'tool_calls'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if tables == 0 {
            return Vec::new();
        }
    } else if store::query(ws, "SELECT CAST(to_regclass('rawko.tool_calls') AS TEXT)")[0][0]
        .is_none()
    {
        return Vec::new();
    }
    store::query(ws, "SELECT input FROM tool_calls ORDER BY id")
        .into_iter()
        .filter_map(|row| {
            // `finish` is a committed call too, with no label.
            let input = row[0].clone().unwrap_or_default();
            ["one", "two", "three", "four"]
                .into_iter()
                .find(|l| input.contains(&format!("echo {l} ")))
                .map(str::to_string)
        })
        .collect()
}

fn resume(ws: &Workspace, id: &str) -> Run {
    Run::of(
        rawko(ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["resume", id, "--json"])
            .output()
            .unwrap(),
    )
}

fn task_id(ws: &Workspace) -> String {
    let r = Run::of(
        rawko(ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    r.json()[0]["id"].as_str().unwrap().to_string()
}

/// Kill the run at `point`, resume, and check that nothing committed ran twice.
fn crash_and_resume(point: Point) {
    let (ws, server) = setup();
    let all = replies(matches!(point, Point::InTool));
    // The replies before the kill point; at `Thinking(n)` the n-th is held back long enough
    // for the kill to land while the model "thinks".
    match point {
        Point::Thinking(n) => {
            for r in all.iter().take(n).cloned() {
                server.push(r);
            }
            server.push(all[n].clone().delay(Duration::from_secs(30)));
        }
        Point::InTool => {
            for r in all.iter().take(3).cloned() {
                server.push(r);
            }
        }
    }
    let mut child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    match point {
        Point::Thinking(n) => wait_for("the model request", || server.hits() > n),
        Point::InTool => wait_for("the sleeping command", || {
            log_lines(&ws).iter().any(|l| l == "three")
        }),
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let before = committed(&ws);
    let expected_before = match point {
        Point::Thinking(n) => n.min(4),
        Point::InTool => 2,
    };
    assert_eq!(
        before.len(),
        expected_before,
        "{point:?}: calls committed at the kill: {before:?}"
    );
    // The model answers the rest again (the killed process took a reply in flight with it;
    // a reply already committed is never asked for again).
    let resume_from = match point {
        Point::Thinking(n) => n,
        Point::InTool => 3,
    };
    for r in all.iter().skip(resume_from).cloned() {
        server.push(r);
    }
    let id = task_id(&ws);
    let r = resume(&ws, &id);
    let lines = log_lines(&ws);
    assert_eq!(r.code, 0, "{point:?}: {r:?}\nlog: {lines:?}");
    for label in &before {
        let runs = lines.iter().filter(|l| *l == label).count();
        assert_eq!(
            runs, 1,
            "{point:?}: `{label}` was committed before the kill but ran {runs} times: {lines:?}"
        );
    }
    for label in ["one", "two", "three", "four"] {
        assert!(
            lines.iter().any(|l| l == label),
            "{point:?}: `{label}` never ran: {lines:?}"
        );
    }
    let after = committed(&ws);
    assert_eq!(
        after.len(),
        4,
        "{point:?}: one committed call per step: {after:?}"
    );
}

#[derive(Debug, Clone, Copy)]
enum Point {
    /// While the model works on request `n` (0-based): `n` tool calls are committed.
    Thinking(usize),
    /// While the third step's command runs: its call is not committed yet.
    InTool,
}

#[test]
fn killed_before_the_first_reply_resumes() {
    crash_and_resume(Point::Thinking(0));
}

#[test]
fn killed_while_the_model_thinks_resumes_without_repeating_calls() {
    crash_and_resume(Point::Thinking(2));
}

#[test]
fn killed_before_finish_resumes_without_repeating_calls() {
    crash_and_resume(Point::Thinking(4));
}

#[test]
fn killed_during_a_tool_call_resumes() {
    crash_and_resume(Point::InTool);
}

/// Ctrl-C (SIGINT), or SIGTERM, while the model thinks: the model call is abandoned at once, the
/// task is marked cancelled with exit status 130, and `rawko resume` completes it.
#[test]
fn ctrl_c_cancels_cleanly_and_resume_continues() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        cancel_then_resume(signal);
    }
}

fn cancel_then_resume(signal: libc::c_int) {
    let (ws, server) = setup();
    let all = replies(false);
    server.push(all[0].clone());
    server.push(all[1].clone().delay(Duration::from_millis(1500)));
    let child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    wait_for("the second model request", || server.hits() > 1);
    // SAFETY: kill(2) on our own child's pid.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    assert_eq!(sent, 0);
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = signalled.elapsed();
    println!("signal {signal} to exit with a model call in flight: {took:?}");
    // The reply was 1.5 s away: it was not waited for.
    assert!(took < Duration::from_millis(1200), "{took:?}");
    let r = Run::of(out);
    assert_eq!(r.code, 130, "{r:?}");
    let finished = r
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["type"] == "task_finished")
        .unwrap_or_else(|| panic!("no task_finished event: {r:?}"));
    assert_eq!(finished["status"], "cancelled");
    // The model call in flight was abandoned at once; the step before it is kept.
    assert_eq!(committed(&ws), ["one"], "{r:?}");

    for r in all.iter().skip(1).cloned() {
        server.push(r);
    }
    let id = task_id(&ws);
    let before = server.hits();
    let r = resume(&ws, &id);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
    // Resume continued the interrupted turn, with its history: the model was not asked to start
    // the state over.
    let first = String::from_utf8_lossy(&server.received()[before].body).into_owned();
    assert!(
        first.contains("echo one >> runs.log"),
        "resume started the state again: {first}"
    );
}

/// `rawko tasks list|show --json` in `ws`, as JSON.
fn tasks_json(ws: &Workspace, args: &[&str]) -> serde_json::Value {
    let r = Run::of(rawko(ws).arg("tasks").args(args).output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    r.json()
}

/// SIGKILL while the llm arbiter's model decides: the task's lease names a runner that is gone,
/// so the task reads `interrupted`, with why, wherever its status is shown (never `running`
/// for ever); while its runner lives it reads `running`. `rawko resume` takes the lease over,
/// finishes the task and keeps the interruption on record.
#[test]
fn a_task_whose_runner_was_killed_reads_interrupted_not_running() {
    let (ws, server) = setup();
    let config = ws.config_home().join("rawko/config.yaml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str("arbiter:\n  mode: llm\n  adapter: scripted\n");
    std::fs::write(&config, text).unwrap();
    let choose = || {
        openai::tool_call(
            "a1",
            "choose",
            &json!({"next": "done", "reason": "the work is done"}),
        )
    };
    server.push(openai::tool_call(
        "c1",
        "finish",
        &json!({"status": "success", "summary": "worked"}),
    ));
    server.push(choose().delay(Duration::from_secs(30)));
    let mut child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    wait_for("the arbiter's request", || server.hits() > 1);
    let pid = child.id();
    // Its runner is alive and holds the lease: running.
    let listed = tasks_json(&ws, &["list", "--json"]);
    assert_eq!(listed[0]["status"], "running", "{listed:#}");
    let id = listed[0]["id"].as_str().unwrap().to_string();

    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let why = format!("its runner (pid {pid} on ");
    let listed = tasks_json(&ws, &["list", "--json"]);
    assert_eq!(listed[0]["status"], "interrupted", "{listed:#}");
    let summary = listed[0]["summary"].as_str().unwrap_or_default();
    assert!(
        summary.contains(&why) && summary.contains("is gone"),
        "{listed:#}"
    );
    let shown = tasks_json(&ws, &["show", &id, "--json"]);
    assert_eq!(shown["task"]["status"], "interrupted", "{shown:#}");
    assert_eq!(shown["task"]["summary"], listed[0]["summary"], "{shown:#}");
    let text = Run::of(rawko(&ws).args(["tasks", "show", &id]).output().unwrap());
    assert!(
        text.stdout.contains("interrupted") && text.stdout.contains(&why),
        "{text:?}"
    );
    let table = Run::of(rawko(&ws).args(["tasks", "list"]).output().unwrap());
    assert!(table.stdout.contains("interrupted"), "{table:?}");

    // Resume takes the dead runner's lease over and finishes the task; the store says so.
    server.push(choose());
    let r = resume(&ws, &id);
    assert_eq!(r.code, 0, "{r:?}");
    let stored = store::query(&ws, &format!("SELECT status FROM tasks WHERE id = '{id}'"));
    assert_eq!(stored, [[Some("done".to_string())]]);
    let shown = tasks_json(&ws, &["show", &id, "--json"]);
    assert_eq!(shown["task"]["status"], "done", "{shown:#}");
    let taken_over = shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["capability"] == "lease")
        .unwrap_or_else(|| panic!("no record of the interruption: {shown:#}"));
    assert!(
        taken_over["reason"].as_str().unwrap().contains(&why),
        "{taken_over:#}"
    );
}

/// Two `rawko run` started at once in a workspace with no task store yet both get their task:
/// the store is created and migrated once, under SQLite's write lock.
#[test]
fn two_runs_at_once_in_a_fresh_workspace_both_start() {
    for round in 0..4 {
        let (ws, server) = setup();
        server.repeat(openai::tool_call(
            "c1",
            "finish",
            &json!({"status": "success", "summary": "done"}),
        ));
        let args = ["run", "--json", "--max-steps", "1", "Look around."];
        let (a, b) = (spawn(&ws, &args), spawn(&ws, &args));
        for child in [a, b] {
            let r = Run::of(child.wait_with_output().unwrap());
            assert!(
                !r.stderr.contains("already exists") && !r.stderr.contains("locked"),
                "round {round}: {r:?}"
            );
            assert!(r.stdout.contains("task_started"), "round {round}: {r:?}");
        }
    }
}

/// A task has one runner: `rawko resume` of a task another rawko is running refuses, naming it,
/// instead of running its steps a second time.
#[test]
fn a_task_being_run_is_not_run_twice() {
    let (ws, server) = setup();
    // The first model call takes a while: the task is being run meanwhile.
    server.push(
        openai::tool_call(
            "c1",
            "finish",
            &json!({"status": "success", "summary": "done"}),
        )
        .delay(Duration::from_secs(4)),
    );
    let mut first = rawko(&ws)
        .env("TEST_KEY", TEST_KEY)
        .args([
            "run",
            "--json",
            "--no-stream",
            "--max-steps",
            "1",
            "Look around.",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = first_task_id(&mut first);
    std::thread::sleep(Duration::from_millis(500));
    let second = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["resume", "--json", &id])
            .output()
            .unwrap(),
    );
    assert_eq!(second.code, 2, "{second:?}");
    assert!(
        second.stderr.contains("is being run by rawko (pid"),
        "{second:?}"
    );
    let first = first.wait_with_output().unwrap();
    assert!(first.status.code().is_some(), "{first:?}");
    // Its lease is given up when it ends: the task can be taken up again.
    let third = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["resume", "--json", &id])
            .output()
            .unwrap(),
    );
    assert!(!third.stderr.contains("is being run"), "{third:?}");
}

/// Two Ctrl-C (or `timeout -s INT`, which signals twice): rawko stops at once and the task is
/// left cancelled, not `running`, and resumes.
#[test]
fn a_second_ctrl_c_stops_at_once_and_leaves_the_task_resumable() {
    let (ws, server) = setup();
    let all = replies(false);
    server.push(all[0].clone());
    server.push(all[1].clone().delay(Duration::from_secs(20)));
    let child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    wait_for("the second model request", || server.hits() > 1);
    for _ in 0..2 {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
            0
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let started = Instant::now();
    let r = Run::of(child.wait_with_output().unwrap());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "it waited for the model"
    );
    assert_eq!(r.code, 130, "{r:?}");
    let list = Run::of(
        rawko(&ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(list.json()[0]["status"], "cancelled", "{list:?}");
    for r in all.iter().skip(1).cloned() {
        server.push(r);
    }
    let id = task_id(&ws);
    let r = resume(&ws, &id);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
}

/// The model unreachable after every retry: the task is interrupted (exit 75), not failed, and
/// `rawko resume` finishes it once the model is back.
#[test]
fn an_outage_interrupts_the_task_and_resume_finishes_it() {
    let (ws, server) = setup();
    // One attempt and three retries, each answered "unavailable, try now".
    for _ in 0..4 {
        server.push(Reply::status(503).header("retry-after", "0"));
    }
    let r = Run::of(
        spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"])
            .wait_with_output()
            .unwrap(),
    );
    assert_eq!(r.code, 75, "{r:?}");
    let list = Run::of(
        rawko(&ws)
            .args(["tasks", "list", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(list.json()[0]["status"], "interrupted", "{list:?}");
    for r in replies(false) {
        server.push(r);
    }
    let r = resume(&ws, &task_id(&ws));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
}

/// An answer that breaks off (a body cut short, a connection closed mid-response) is asked for
/// again in place, with a warning; the task goes on without being interrupted.
#[test]
fn an_answer_that_breaks_off_is_asked_again_in_place() {
    let (ws, server) = setup();
    server.push(Reply::bytes(
        200,
        "application/json",
        br#"{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"mess"#.to_vec(),
    ));
    for r in replies(false) {
        server.push(r);
    }
    let r = Run::of(
        spawn(
            &ws,
            &[
                "run",
                "--json",
                "--no-stream",
                "--agent",
                "worker",
                "do the steps",
            ],
        )
        .wait_with_output()
        .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("asking again in 1 s (1 of 2)"), "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
}

/// Ctrl-C while the model hangs: rawko waits a few seconds for the answer, not the adapter's
/// whole timeout, and leaves the task cancelled and resumable.
#[test]
fn ctrl_c_during_a_hung_model_call_does_not_wait_for_the_timeout() {
    let (ws, server) = setup();
    let all = replies(false);
    server.push(all[0].clone());
    server.push(all[1].clone().delay(Duration::from_secs(40)));
    let child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    wait_for("the second model request", || server.hits() > 1);
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let started = Instant::now();
    let r = Run::of(child.wait_with_output().unwrap());
    let took = started.elapsed();
    println!("Ctrl-C to exit with a hung model call: {took:?}");
    assert!(
        took < Duration::from_millis(1200),
        "it waited for the model: {took:?}"
    );
    assert_eq!(r.code, 130, "{r:?}");
    for r in all.iter().skip(1).cloned() {
        server.push(r);
    }
    let r = resume(&ws, &task_id(&ws));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
}

/// The model's side as a function of the conversation: the reply for step `n` once `n` tool
/// results are in the request, whether the run was killed before or not.
fn by_progress(server: &ModelServer) {
    let all = replies(false);
    server.respond_with(move |req| {
        let body = req.json();
        let done = body["messages"]
            .as_array()
            .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
            .unwrap_or(0);
        all[done.min(all.len() - 1)].clone()
    });
}

/// Rounds of the kill test, each SIGKILLing `rawko run` at a random instant.
const KILL_ROUNDS: u64 = 30;

/// SIGKILL at random instants (while the model answers, while a command runs, while a step
/// commits, before the first request or after the last), then `rawko resume`: whatever the
/// instant, no committed call runs again, none is lost, every step runs, and the store passes
/// its integrity check. The seed is printed; `RAWKO_KILL_SEED` replays a run.
#[test]
fn killed_at_random_instants_nothing_committed_repeats_or_is_lost() {
    let seed = std::env::var("RAWKO_KILL_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("RAWKO_KILL_SEED={seed}");
    let mut rng = fastrand::Rng::with_seed(seed);
    // How long an undisturbed run takes here, so the kills spread over all of it.
    let (ws, server) = setup();
    by_progress(&server);
    let started = Instant::now();
    let r = Run::of(
        spawn(&ws, &["run", "--agent", "worker", "do the steps"])
            .wait_with_output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let span = started.elapsed();
    let mut killed_mid_run = 0;
    // Rounds by how many calls were committed at the kill (0 to 4, then the finish).
    let mut at_step = [0u32; 6];
    for round in 0..KILL_ROUNDS {
        let (ws, server) = setup();
        by_progress(&server);
        let mut child = spawn(&ws, &["run", "--agent", "worker", "do the steps"]);
        // Half the rounds anywhere in the run's span; half a few milliseconds after a random
        // model request, where the steps (answer, command, commit) happen.
        let started = Instant::now();
        if rng.bool() {
            std::thread::sleep(span.mul_f64(rng.f64() * 1.1));
        } else {
            let k = rng.usize(0..=4);
            let deadline = started + Duration::from_secs(30);
            while server.hits() <= k
                && Instant::now() < deadline
                && child.try_wait().unwrap().is_none()
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_micros(rng.u64(0..20_000)));
        }
        let at = started.elapsed();
        let finished = child.try_wait().unwrap().is_some();
        child.kill().unwrap();
        child.wait().unwrap();
        let before = if store::exists(&ws) {
            committed(&ws)
        } else {
            Vec::new()
        };
        let what =
            format!("round {round} (seed {seed}), killed after {at:?}: committed {before:?}");
        if !finished {
            killed_mid_run += 1;
            at_step[before.len().min(5)] += 1;
        }
        let tasks = Run::of(
            rawko(&ws)
                .args(["tasks", "list", "--json"])
                .output()
                .unwrap(),
        );
        let listed = tasks.json();
        let task = listed.as_array().and_then(|a| a.first()).cloned();
        match &task {
            // Killed before the task was even recorded: nothing ran.
            None => {
                assert!(log_lines(&ws).is_empty(), "{what}");
                continue;
            }
            Some(t) if t["status"] == "succeeded" => {}
            Some(t) => {
                let r = resume(&ws, t["id"].as_str().unwrap());
                assert_eq!(r.code, 0, "{what}: {r:?}");
            }
        }
        let lines = log_lines(&ws);
        for label in &before {
            let runs = lines.iter().filter(|l| *l == label).count();
            assert_eq!(runs, 1, "{what}: `{label}` ran {runs} times: {lines:?}");
        }
        for label in ["one", "two", "three", "four"] {
            assert!(
                lines.iter().any(|l| l == label),
                "{what}: `{label}` never ran: {lines:?}"
            );
        }
        assert_eq!(
            committed(&ws).len(),
            4,
            "{what}: one committed call per step"
        );
    }
    println!(
        "{KILL_ROUNDS} rounds, {killed_mid_run} killed mid-run (by calls committed: {at_step:?}), over a run of {span:?}"
    );
    assert!(
        killed_mid_run >= KILL_ROUNDS / 2,
        "too few kills landed mid-run: {killed_mid_run}"
    );
}

/// Ctrl-C while a command runs: the command is killed with everything it started (not waited
/// for), the task is cancelled, and resume finishes it.
#[test]
fn ctrl_c_during_a_command_kills_it_at_once() {
    let (ws, server) = setup();
    let call = |n: usize, command: &str| {
        openai::tool_call(&format!("call_{n}"), "Bash", &json!({ "command": command }))
    };
    server.push(call(0, "echo one >> runs.log && sleep 31.75"));
    let child = spawn(&ws, &["run", "--json", "--agent", "worker", "do the steps"]);
    wait_for("the command", || log_lines(&ws).iter().any(|l| l == "one"));
    let sleeping = || -> Vec<String> {
        crate::support::processes_with("sleep 31.75")
            .into_iter()
            .filter(|p| !p.contains("rawko"))
            .collect()
    };
    wait_for("the sleep", || !sleeping().is_empty());
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) },
        0
    );
    let signalled = Instant::now();
    let r = Run::of(child.wait_with_output().unwrap());
    let took = signalled.elapsed();
    println!("Ctrl-C to exit with a command running: {took:?}");
    assert!(
        took < Duration::from_secs(3),
        "it waited for the command: {took:?}"
    );
    assert_eq!(r.code, 130, "{r:?}");
    assert!(sleeping().is_empty(), "{:?}", sleeping());
    // The stopped call is on record as stopped; the model goes on from there on resume.
    let all = replies(false);
    for r in all.iter().skip(1).cloned() {
        server.push(r);
    }
    let r = resume(&ws, &task_id(&ws));
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(log_lines(&ws), ["one", "two", "three", "four"]);
    let output = store::query(&ws, "SELECT output FROM tool_calls ORDER BY id LIMIT 1")[0][0]
        .clone()
        .unwrap();
    assert!(
        output.contains("stopped because rawko was interrupted"),
        "{output}"
    );
}
