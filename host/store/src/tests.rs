//! The SQLite store's own tests.

use super::*;

fn store() -> (tempfile::TempDir, TaskStore) {
    let dir = tempfile::tempdir().unwrap();
    let s = TaskStore::open(&dir.path().join(FILE_NAME)).unwrap();
    (dir, s)
}

/// A task's stamp moves with every commit of its records, by another connection (another
/// process's run) or by this one, and not otherwise.
#[test]
fn a_stamp_moves_with_each_commit_from_any_connection() {
    let (dir, viewer) = store();
    let writer = TaskStore::open(&dir.path().join(FILE_NAME)).unwrap();
    let task = writer
        .create_task("p", "worker", &serde_json::json!({}))
        .unwrap();
    let first = viewer.stamp(&task).unwrap();
    assert_eq!(viewer.stamp(&task).unwrap(), first);
    let turn = writer.start_turn(&task, "worker", None).unwrap();
    let second = viewer.stamp(&task).unwrap();
    assert_ne!(second, first, "another connection's commit");
    writer
        .append_message(turn, "user", &serde_json::json!({"text": "hi"}))
        .unwrap();
    let third = viewer.stamp(&task).unwrap();
    assert_ne!(third, second);
    viewer
        .append_message(turn, "user", &serde_json::json!({"text": "again"}))
        .unwrap();
    assert_ne!(viewer.stamp(&task).unwrap(), third, "its own commit");
}

#[test]
fn every_workspaces_store_is_found_under_the_state_directory() {
    let state = tempfile::tempdir().unwrap();
    assert!(stores_in(state.path()).is_empty());
    let mut made: Vec<PathBuf> = ["/work/a", "/work/b"]
        .iter()
        .map(|w| path_for(state.path(), Path::new(w)))
        .collect();
    for p in &made {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        TaskStore::open(p).unwrap();
    }
    // A workspace folder without a store is not one.
    std::fs::create_dir_all(state.path().join("workspaces/empty")).unwrap();
    made.sort();
    assert_eq!(stores_in(state.path()), made);
}

/// A store this rawko made, then changed with `sql` by someone else.
fn tampered(sql: &str) -> (tempfile::TempDir, Result<TaskStore>) {
    let (dir, s) = store();
    drop(s);
    let path = dir.path().join(FILE_NAME);
    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    let opened = TaskStore::open(&path);
    (dir, opened)
}

#[test]
fn one_runner_holds_a_task_until_its_lease_goes_stale_or_it_dies() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert_eq!(
        s.acquire_lease(&id).unwrap(),
        Ok(()),
        "our own lease is ours again"
    );
    // A lease as an older rawko took it, saying nothing of when its process started.
    let hold = |pid: i64, age_ms: i64| {
        s.conn
            .execute(
                "UPDATE tasks SET lease_pid = ?2, lease_host = ?3, lease_at = ?4,
                     lease_start = NULL WHERE id = ?1",
                params![id, pid, host_name(), now_ms() - age_ms],
            )
            .unwrap();
    };
    // A live runner (pid 1 always exists) with a fresh heartbeat keeps it.
    hold(1, 1000);
    let holder = s.acquire_lease(&id).unwrap().unwrap_err();
    assert_eq!((holder.pid, holder.host), (1, host_name()));
    // A stale heartbeat, or a dead runner, gives it up.
    hold(1, LEASE_STALE.as_millis() as i64 + 1000);
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    hold(i32::MAX as i64, 0);
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert!(s.renew_lease(&id).unwrap());
    s.release_lease(&id).unwrap();
    assert!(!s.renew_lease(&id).unwrap());
}

/// Hold `task`'s lease as `pid` on `host`, `age_ms` after its last heartbeat, its process
/// started as `start`.
fn hold(s: &TaskStore, task: &str, pid: i64, host: &str, age_ms: i64, start: Option<&str>) {
    s.conn
        .execute(
            concat!(
                "UPDATE tasks SET lease_pid = ?2, lease_host = ?3, lease_at = ",
                store_now!(),
                " - ?4, lease_start = ?5 WHERE id = ?1"
            ),
            params![task, pid, host, age_ms, start],
        )
        .unwrap();
}

/// A runner whose task was taken over changes it no more: not its status, not its state,
/// whether the runner that took it over still holds it or has finished with it. A runner
/// that never held the task's lease (`mcp serve --agents`) is not fenced.
#[test]
fn a_runner_whose_task_was_taken_over_changes_it_no_more() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    let t = Transition {
        from: Some("planner".into()),
        to: "developer".into(),
        event: "onSuccess".into(),
        mode: "table".into(),
        reason: "r".into(),
        at: now_ms(),
    };
    s.transition(&id, &t, TaskStatus::Running).unwrap();
    // Another runner, on another host, takes it over.
    hold(&s, &id, 7, "elsewhere", 0, None);
    let e = s
        .finish_task(&id, TaskStatus::Cancelled, "late")
        .unwrap_err();
    assert!(e.is_taken_over(), "{e}");
    assert!(e.to_string().contains("pid 7 on elsewhere"), "{e}");
    assert!(
        s.transition(&id, &t, TaskStatus::Running)
            .unwrap_err()
            .is_taken_over()
    );
    assert_eq!(s.task(&id).unwrap().steps, 1);
    // Nor its turns: no message, reply, tool call, audit row or new turn.
    let other = TaskStore::open(s.path()).unwrap();
    let turn = other.start_turn(&id, "developer", None).unwrap();
    let json = serde_json::json!({"text": "late"});
    let taken = |r: Result<()>| r.unwrap_err().is_taken_over();
    assert!(taken(s.append_message(turn, "user", &json).map(drop)));
    let usage = Usage::default();
    assert!(taken(
        s.append_reply(turn, &json, "a", "m", &usage).map(drop)
    ));
    assert!(taken(s.record_usage(turn, "a", "m", &usage)));
    assert!(taken(s.bump_iterations(turn).map(drop)));
    assert!(taken(s.end_turn(turn, "success", "late", None)));
    assert!(taken(s.start_turn(&id, "developer", None).map(drop)));
    let call = ToolCall {
        turn_id: turn,
        call_id: "c".into(),
        tool: "Read".into(),
        input: "{}".into(),
        output: "o".into(),
        is_error: false,
        verdict: "allow".into(),
        duration_us: 1,
        at: 0,
    };
    assert!(taken(s.record_tool_call(&call).map(drop)));
    let tool_call = call;
    let decision = AuditEntry {
        turn_id: Some(turn),
        subject: "s".into(),
        capability: "fs.read".into(),
        detail: ".".into(),
        decision: "allow".into(),
        reason: "r".into(),
        at: 0,
    };
    assert!(taken(s.record_decision(&id, &decision)));
    assert!(taken(s.start_run(&id, None).map(drop)));
    let call = ModelCall {
        turn_id: turn,
        adapter: "a".into(),
        model: "m".into(),
        response_model: None,
        finish_reason: None,
        attempt: 0,
        outcome: "ok".into(),
        started_at: 0,
        ended_at: 0,
    };
    assert!(taken(s.record_model_call(&call)));
    let reply = Reply {
        content: &json,
        adapter: "a",
        model: "m",
        usage: &usage,
    };
    let decided = std::slice::from_ref(&decision);
    assert!(taken(
        s.record_answer(&id, turn, 1, &call, Some(reply), decided)
            .map(drop)
    ));
    assert!(taken(
        s.record_results(&id, turn, Some(&tool_call), decided, &json)
            .map(drop)
    ));
    assert!(other.messages(turn).unwrap().is_empty());
    assert!(other.model_calls(&id).unwrap().is_empty());
    assert!(other.tool_calls(&id).unwrap().is_empty());
    assert!(other.decisions(&id).unwrap().is_empty());
    assert_eq!(other.turns(&id).unwrap().len(), 1);
    // It finished and let go of the lease: still not this runner's to change.
    other
        .finish_task(&id, TaskStatus::Done, "done there")
        .unwrap();
    s.conn
        .execute(
            "UPDATE tasks SET lease_pid = NULL, lease_host = NULL, lease_at = NULL WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert!(
        s.finish_task(&id, TaskStatus::Cancelled, "late")
            .unwrap_err()
            .is_taken_over()
    );
    assert_eq!(read(&s, &id), (TaskStatus::Done, Some("done there".into())));
    // Given up on purpose, the lease fences nothing.
    let id2 = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    s.acquire_lease(&id2).unwrap().unwrap();
    s.release_lease(&id2).unwrap();
    s.finish_task(&id2, TaskStatus::Cancelled, "stopped")
        .unwrap();
}

/// The task's status and summary as `task` and `tasks` give them (which must agree).
fn read(s: &TaskStore, id: &str) -> (TaskStatus, Option<String>) {
    let one = s.task(id).unwrap();
    let all = s.tasks().unwrap();
    let listed = all.iter().find(|t| t.id == id).unwrap();
    assert_eq!((one.status, &one.summary), (listed.status, &listed.summary));
    (one.status, one.summary)
}

#[test]
fn a_task_whose_runner_is_gone_reads_interrupted_with_why() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    let here = host_name();
    assert_eq!(read(&s, &id), (TaskStatus::Running, None), "no lease yet");
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert_eq!(read(&s, &id), (TaskStatus::Running, None), "our own lease");

    // This machine, a pid no process has.
    hold(&s, &id, i32::MAX as i64, &here, 0, Some("boot/1"));
    let (status, why) = read(&s, &id);
    assert_eq!(status, TaskStatus::Interrupted);
    assert_eq!(
        why.unwrap(),
        format!("its runner (pid {} on {here}) is gone", i32::MAX)
    );
    // The store itself still says running: it is the reading that knows better.
    let stored: String = s
        .conn
        .query_row("SELECT status FROM tasks WHERE id = ?1", [&id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(stored, "running");

    // Another machine: its heartbeat decides.
    hold(&s, &id, i32::MAX as i64, "elsewhere", 1000, Some("boot/1"));
    assert_eq!(read(&s, &id), (TaskStatus::Running, None));
    hold(&s, &id, 7, "elsewhere", 95_000, None);
    let (status, why) = read(&s, &id);
    assert_eq!(status, TaskStatus::Interrupted);
    assert_eq!(
        why.unwrap(),
        "its runner (pid 7 on elsewhere) has not renewed its lease for 95 s"
    );

    // A task that ended reads as it ended, whatever its lease says. (Ended by a runner
    // that never held it: this one may no longer change it, another runner holding it.)
    TaskStore::open(s.path())
        .unwrap()
        .finish_task(&id, TaskStatus::Failed, "broke")
        .unwrap();
    assert_eq!(read(&s, &id), (TaskStatus::Failed, Some("broke".into())));
}

#[test]
fn a_lease_is_held_by_the_whole_identity_and_the_stores_clock() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    let me = Holder::this_process();
    // This process's pid and host, another process's token: not ours to renew or release,
    // nor to take while its process (this one's pid and start) is there.
    let other = |age_ms: i64| {
        s.conn
            .execute(
                "UPDATE tasks SET lease_pid = ?2, lease_host = ?3, lease_at = ?4,
                     lease_start = ?5, lease_token = 'another' WHERE id = ?1",
                params![
                    id,
                    me.pid as i64,
                    me.host,
                    now_ms() - age_ms,
                    process_start(me.pid)
                ],
            )
            .unwrap();
    };
    other(0);
    assert!(!s.renew_lease(&id).unwrap());
    s.release_lease(&id).unwrap();
    let token: Option<String> = s
        .conn
        .query_row("SELECT lease_token FROM tasks WHERE id = ?1", [&id], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(token.as_deref(), Some("another"));
    assert!(s.acquire_lease(&id).unwrap().is_err());
    // A heartbeat in the future (a runner whose clock runs ahead) is judged by the store's
    // clock; a heartbeat is written by the store's clock, whatever the runner's says.
    s.conn
        .execute(
            "UPDATE tasks SET lease_pid = NULL, lease_host = NULL, lease_at = NULL,
                 lease_token = NULL WHERE id = ?1",
            [&id],
        )
        .unwrap();
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    let skew: i64 = s
        .conn
        .query_row(
            concat!(
                "SELECT abs(lease_at - ",
                store_now!(),
                ") FROM tasks WHERE id = ?1"
            ),
            [&id],
            |r| r.get(0),
        )
        .unwrap();
    assert!(skew < 5_000, "{skew}");
    // From another host, staleness is the store's settings': 200 ms here.
    s.set_lease_settings(LeaseSettings::from_millis(Some(50), Some(200)).unwrap());
    hold(&s, &id, 7, "elsewhere", 100, None);
    assert!(s.acquire_lease(&id).unwrap().is_err());
    hold(&s, &id, 7, "elsewhere", 300, None);
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert!(LeaseSettings::from_millis(Some(1000), Some(1000)).is_err());
    assert_eq!(
        LeaseSettings::from_millis(None, None).unwrap(),
        LeaseSettings::default()
    );
}

#[test]
fn a_store_of_schema_version_3_migrates_and_keeps_its_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    {
        let c = Connection::open(&path).unwrap();
        for sql in &MIGRATIONS[..3] {
            c.execute_batch(sql).unwrap();
        }
        c.pragma_update(None, "user_version", 3).unwrap();
        c.execute(
            "INSERT INTO tasks (id, prompt, status, state, options, created_at, updated_at,
                                    lease_pid, lease_host, lease_at, lease_start)
                 VALUES ('old1', 'old task', 'running', 'planner', '{}', 1, 1, 7, 'elsewhere',
                         1, NULL)",
            [],
        )
        .unwrap();
    }
    let s = TaskStore::open(&path).unwrap();
    let version: i64 = s
        .conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap();
    assert_eq!(version as usize, MIGRATIONS.len());
    let t = s.task("old1").unwrap();
    assert_eq!((t.workspace, t.host), (None, None));
    // Its old runner's heartbeat is long stale: the task reads interrupted and is taken.
    assert_eq!(t.status, TaskStatus::Interrupted);
    assert_eq!(s.tasks_in("/anywhere").unwrap().len(), 1);
    assert_eq!(s.acquire_lease("old1").unwrap(), Ok(()));
    // New tasks say where they were made.
    s.set_workspace(WorkspaceId {
        root: None,
        remote: None,
        path: "/w".into(),
    });
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    let t = s.task(&id).unwrap();
    assert_eq!(t.workspace.unwrap().path, "/w");
    assert_eq!(t.host, Some(host_id()));
    assert_eq!(s.tasks_in("/other").unwrap().len(), 1);
    assert_eq!(s.tasks_in("/w").unwrap().len(), 2);
}

#[test]
fn a_pid_reused_by_another_process_is_not_taken_for_the_runner() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    let here = host_name();
    // Pid 1 always exists; here it is not the process that took the lease.
    let init = process_start(1).expect("pid 1 can be read");
    assert_ne!(process_start(std::process::id()), Some(init.clone()));
    hold(&s, &id, 1, &here, 0, Some("another-boot/12345"));
    let (status, why) = read(&s, &id);
    assert_eq!(status, TaskStatus::Interrupted);
    assert!(why.unwrap().ends_with("is gone"));
    // When it is the process that took it, it runs the task, even with a late heartbeat.
    hold(
        &s,
        &id,
        1,
        &here,
        LEASE_STALE.as_millis() as i64 * 10,
        Some(&init),
    );
    assert_eq!(read(&s, &id), (TaskStatus::Running, None));
    let holder = s.acquire_lease(&id).unwrap().unwrap_err();
    assert_eq!((holder.pid, holder.start), (1, Some(init)));
    // A lease that does not say when its process started: alive and on time, or gone.
    hold(&s, &id, 1, &here, 1000, None);
    assert_eq!(read(&s, &id), (TaskStatus::Running, None));
    hold(
        &s,
        &id,
        1,
        &here,
        LEASE_STALE.as_millis() as i64 + 5000,
        None,
    );
    let (status, why) = read(&s, &id);
    assert_eq!(status, TaskStatus::Interrupted);
    assert!(why.unwrap().contains("has not renewed its lease for"));
}

#[test]
fn taking_over_from_a_runner_that_is_gone_records_the_interruption() {
    let (_d, s) = store();
    let id = s
        .create_task("t", "planner", &serde_json::json!({}))
        .unwrap();
    let here = host_name();
    hold(&s, &id, i32::MAX as i64, &here, 0, Some("boot/1"));
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert_eq!(read(&s, &id), (TaskStatus::Running, None));
    let recorded: Vec<_> = s
        .decisions(&id)
        .unwrap()
        .into_iter()
        .filter(|d| d.capability == "lease")
        .collect();
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(recorded[0].decision, "interrupted");
    assert_eq!(
        recorded[0].reason,
        format!("its runner (pid {} on {here}) is gone", i32::MAX)
    );
    assert_eq!(
        recorded[0].detail,
        format!("taken over by pid {} on {here}", std::process::id())
    );
    // Our own lease again, or a lease left on a task that had stopped: nothing to record.
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    s.finish_task(&id, TaskStatus::Cancelled, "Ctrl-C").unwrap();
    hold(&s, &id, i32::MAX as i64, &here, 0, Some("boot/1"));
    assert_eq!(s.acquire_lease(&id).unwrap(), Ok(()));
    assert_eq!(s.decisions(&id).unwrap().len(), 1);
}

#[test]
fn schema_objects_rawko_did_not_create_are_refused() {
    for (sql, what) in [
        (
            "CREATE TRIGGER plant AFTER INSERT ON tasks BEGIN DELETE FROM tasks; END;",
            "trigger `plant`",
        ),
        ("CREATE VIEW v AS SELECT * FROM tasks;", "view `v`"),
        ("CREATE TABLE extra (x);", "table `extra`"),
        ("CREATE INDEX i ON tasks(prompt);", "index `i`"),
        (
            "DROP TABLE usage; CREATE TABLE usage (id INTEGER PRIMARY KEY, turn_id INTEGER \
                 DEFAULT (load_extension('x')));",
            "table `usage`",
        ),
    ] {
        let (_d, opened) = tampered(sql);
        let e = opened.expect_err(sql).to_string();
        assert!(e.contains(what) && e.contains("not create"), "{sql}: {e}");
    }
    let (_d, opened) = tampered("DROP INDEX usage_turn;");
    assert!(opened.is_err());
    // Rawko's own store opens again, of course.
    let (dir, s) = store();
    drop(s);
    TaskStore::open(&dir.path().join(FILE_NAME)).unwrap();
}

#[test]
fn stores_are_kept_per_workspace_outside_it() {
    let state = Path::new("/home/u/.local/state/rawko");
    let a = path_for(state, Path::new("/src/app"));
    let b = path_for(state, Path::new("/other/app"));
    assert_ne!(a, b);
    assert_eq!(a, path_for(state, Path::new("/src/app")));
    assert!(a.starts_with(state.join("workspaces")), "{}", a.display());
    let folder = a.parent().unwrap().file_name().unwrap().to_str().unwrap();
    assert!(
        folder.starts_with("app-") && folder.len() == 4 + 16,
        "{folder}"
    );
    let odd = path_for(state, Path::new("/x/a b\n\u{1b}[31m"));
    let folder = odd.parent().unwrap().file_name().unwrap().to_str().unwrap();
    assert!(
        folder
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
        "{folder}"
    );
    assert_eq!(
        path_for(state, Path::new("/"))
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .len(),
        16
    );
}

#[test]
fn a_task_goes_through_its_transitions() {
    let (_d, s) = store();
    let id = s
        .create_task(
            "add a flag",
            "planner",
            &serde_json::json!({"max_steps": 5}),
        )
        .unwrap();
    let t = s.task(&id).unwrap();
    assert_eq!(
        (t.status, t.state.as_str()),
        (TaskStatus::Running, "planner")
    );
    s.transition(
        &id,
        &Transition {
            from: Some("planner".into()),
            to: "done".into(),
            event: "succeeded".into(),
            mode: "fixed".into(),
            reason: "onSuccess".into(),
            at: now_ms(),
        },
        TaskStatus::Done,
    )
    .unwrap();
    let t = s.task(&id).unwrap();
    assert_eq!(
        (t.status, t.state.as_str(), t.steps),
        (TaskStatus::Done, "done", 1)
    );
    assert_eq!(s.transitions(&id).unwrap().len(), 1);
    assert_eq!(s.tasks().unwrap().len(), 1);
}

#[test]
fn tasks_are_found_by_unique_prefix() {
    let (_d, s) = store();
    let id = s
        .create_task("x", "planner", &serde_json::json!({}))
        .unwrap();
    assert_eq!(s.task(&id[..id.len() - 2]).unwrap().id, id);
    assert!(matches!(
        s.task("zzzz-nope"),
        Err(StoreError::NoSuchTask(_))
    ));
    assert!(
        matches!(s.task("%"), Err(StoreError::NoSuchTask(_))),
        "LIKE wildcards are literal"
    );
}

#[test]
fn a_tool_call_is_recorded_once() {
    let (_d, s) = store();
    let id = s
        .create_task("x", "developer", &serde_json::json!({}))
        .unwrap();
    let turn = s.start_turn(&id, "developer", None).unwrap();
    let call = ToolCall {
        turn_id: turn,
        call_id: "c1".into(),
        tool: "Write".into(),
        input: "{}".into(),
        output: "ok".into(),
        is_error: false,
        verdict: "allowed".into(),
        duration_us: 10,
        at: now_ms(),
    };
    assert!(s.record_tool_call(&call).unwrap());
    let again = ToolCall {
        output: "second".into(),
        ..call.clone()
    };
    assert!(!s.record_tool_call(&again).unwrap());
    assert_eq!(s.tool_call(turn, "c1").unwrap().unwrap().output, "ok");
    assert_eq!(s.tool_calls(&id).unwrap().len(), 1);
}

#[test]
fn reopening_keeps_everything_and_checks_integrity() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let s = TaskStore::open(&dir.path().join(FILE_NAME)).unwrap();
        let id = s
            .create_task("x", "planner", &serde_json::json!({}))
            .unwrap();
        let turn = s.start_turn(&id, "planner", None).unwrap();
        s.append_message(turn, "user", &serde_json::json!([{"text": "hi"}]))
            .unwrap();
        s.record_usage(
            turn,
            "default",
            "m",
            &Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Usage::default()
            },
        )
        .unwrap();
        id
    };
    let s = TaskStore::open(&dir.path().join(FILE_NAME)).unwrap();
    let turn = s.open_turn(&id, "planner").unwrap().expect("the open turn");
    assert_eq!(s.messages(turn.id).unwrap().len(), 1);
    assert_eq!(s.task_usage(&id).unwrap().output_tokens, 4);
    assert_eq!(s.integrity_check().unwrap(), Ok(()));
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    {
        let c = Connection::open(&path).unwrap();
        c.pragma_update(None, "user_version", 99).unwrap();
    }
    let e = TaskStore::open(&path).unwrap_err();
    assert!(e.to_string().contains("newer rawko"), "{e}");
}

#[test]
fn ids_sort_by_time() {
    let a = new_task_id();
    assert!(
        a.len() >= 9 && a.chars().all(|c| c.is_ascii_alphanumeric()),
        "{a}"
    );
}

/// Blobs are kept once by their hash and read back only while their bytes still hash to it;
/// a task's edits move forward only.
#[test]
fn blobs_are_kept_by_hash_and_checked_when_read() {
    let (dir, s) = store();
    let data = b"diff --git a/x b/x\n\0binary\xff".to_vec();
    let hash = s.put_blob(&data).unwrap();
    assert_eq!(hash, blob_hash(&data));
    assert_eq!(
        s.put_blob(&data).unwrap(),
        hash,
        "a second put keeps one row"
    );
    assert_eq!(s.blob(&hash).unwrap(), Some(data.clone()));
    assert_eq!(s.blob("sha256:00").unwrap(), None);
    let big = vec![0u8; MAX_BLOB + 1];
    assert!(matches!(s.put_blob(&big), Err(StoreError::TooLarge { .. })));

    let task = s
        .create_task("p", "developer", &serde_json::json!({}))
        .unwrap();
    assert_eq!(s.edits(&task).unwrap(), None);
    let later = s.put_blob(b"later").unwrap();
    s.set_edits(&task, 3, &later).unwrap();
    s.set_edits(&task, 2, &hash).unwrap();
    assert_eq!(
        s.edits(&task).unwrap(),
        Some(Edits {
            steps: 3,
            patch: later.clone()
        }),
        "an older state's edits do not replace a newer one's"
    );

    // Someone changes the bytes behind the store's back: the read refuses them.
    let raw = Connection::open(dir.path().join(FILE_NAME)).unwrap();
    raw.execute(
        "UPDATE blobs SET data = X'00' WHERE hash = ?1",
        [later.as_str()],
    )
    .unwrap();
    let err = s.blob(&later).unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
}
