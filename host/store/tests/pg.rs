//! The PostgreSQL store against a real server: `RAWKO_TEST_PG_URL` names a throw-away one (its
//! user may create databases, and is asked for a password). Each test works in a database of
//! its own, made for it and dropped after. Without the variable the tests say they were skipped,
//! except under CI, where that is a failure.

use std::time::Duration;

use rawko_store::pg::{Listener, PgConfig, PgErrorKind, PgStore, SCHEMA_VERSION};
use rawko_store::{
    AuditEntry, Edits, Holder, LEASE_STALE, ModelCall, Reply, StoreError, TaskStatus, ToolCall,
    Transition, Usage, WorkspaceId,
};
use serde_json::json;
use tokio_postgres::NoTls;

/// The test server's URL; None (the test then returns) when there is none, outside CI.
fn server() -> Option<String> {
    match std::env::var("RAWKO_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("RAWKO_TEST_PG_URL is not set, and CI must run the PostgreSQL tests")
        }
        _ => {
            println!("skipped: RAWKO_TEST_PG_URL is not set");
            None
        }
    }
}

/// A database made for one test, dropped when it ends (however it ends).
struct Db {
    server: PgConfig,
    name: String,
}

impl Db {
    async fn new(url: &str) -> Db {
        let server = PgConfig::from_url(url).expect("RAWKO_TEST_PG_URL");
        let name = format!("rawko_test_{:016x}", fastrand_u64());
        admin(&server)
            .await
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .unwrap();
        Db { server, name }
    }

    fn config(&self) -> PgConfig {
        self.server.clone().with_dbname(&self.name)
    }

    async fn store(&self) -> PgStore {
        PgStore::open(&self.config()).await.unwrap()
    }

    /// A connection of its own to the test's database, for what a test does behind the store.
    async fn sql(&self) -> tokio_postgres::Client {
        admin(&self.config()).await
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let server = self.server.clone();
        let name = self.name.clone();
        // The test's runtime may be the one dropping: drop the database from a thread and a
        // runtime of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                admin(&server)
                    .await
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
            })
        })
        .join();
    }
}

fn fastrand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    );
    h.finish()
}

async fn admin(config: &PgConfig) -> tokio_postgres::Client {
    let mut config = config.tokio_config().clone();
    config.application_name("rawko-test");
    let (client, conn) = config.connect(NoTls).await.unwrap();
    tokio::spawn(conn);
    client
}

#[tokio::test]
async fn pg_every_record_kind_round_trips() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    s.set_workspace(WorkspaceId {
        root: Some("abc123".into()),
        remote: Some("https://example.com/r.git".into()),
        path: "/work/r".into(),
    });
    let id = s
        .create_task("fix it", "planner", &json!({"max": 3}))
        .await
        .unwrap();
    let t = s.task(&id).await.unwrap();
    assert_eq!((t.prompt.as_str(), t.state.as_str()), ("fix it", "planner"));
    assert_eq!(t.status, TaskStatus::Running);
    assert_eq!(t.options, json!({"max": 3}));
    assert_eq!(
        t.workspace.as_ref().unwrap().root.as_deref(),
        Some("abc123")
    );
    assert_eq!(
        s.task(&id[..id.len() - 2]).await.unwrap().id,
        id,
        "by prefix"
    );
    assert!(matches!(
        s.task("nope").await,
        Err(StoreError::NoSuchTask(_))
    ));
    assert_eq!(s.tasks().await.unwrap().len(), 1);
    assert_eq!(s.tasks_in("/work/r").await.unwrap().len(), 1);
    assert_eq!(s.tasks_in("/elsewhere").await.unwrap().len(), 0);

    let turn = s.start_turn(&id, "planner", None).await.unwrap();
    let child = s.start_turn(&id, "helper", Some(turn)).await.unwrap();
    assert_eq!(s.bump_iterations(turn).await.unwrap(), 1);
    assert_eq!(s.bump_iterations(turn).await.unwrap(), 2);
    assert_eq!(s.open_turn(&id, "planner").await.unwrap().unwrap().id, turn);
    assert_eq!(
        s.open_child_turn(turn, "helper").await.unwrap().unwrap().id,
        child
    );
    let m = s
        .append_message(turn, "user", &json!({"text": "hi"}))
        .await
        .unwrap();
    let usage = Usage {
        input_tokens: 10,
        output_tokens: 5,
        cache_read: 2,
        cache_write: 1,
    };
    let r = s
        .append_reply(turn, &json!({"text": "ok"}), "main", "m1", &usage)
        .await
        .unwrap();
    assert!(r > m);
    let msgs = s.messages(turn).await.unwrap();
    assert_eq!(msgs.len(), 2);
    assert_eq!(msgs[1].role, "assistant");
    assert_eq!(msgs[0].content, json!({"text": "hi"}));
    s.record_usage(child, "main", "m1", &usage).await.unwrap();
    assert_eq!(s.completions(&id, "main").await.unwrap(), 2);
    let total = s.task_usage(&id).await.unwrap();
    assert_eq!((total.input_tokens, total.cache_write), (20, 2));

    let call = ToolCall {
        turn_id: turn,
        call_id: "c1".into(),
        tool: "Read".into(),
        input: "{}".into(),
        output: "text".into(),
        is_error: false,
        verdict: "allowed".into(),
        duration_us: 42,
        at: 7,
    };
    assert!(s.record_tool_call(&call).await.unwrap());
    let again = ToolCall {
        output: "other".into(),
        ..call.clone()
    };
    assert!(
        !s.record_tool_call(&again).await.unwrap(),
        "a call runs once"
    );
    let got = s.tool_call(turn, "c1").await.unwrap().unwrap();
    assert_eq!((got.output.as_str(), got.duration_us), ("text", 42));
    assert_eq!(s.tool_calls(&id).await.unwrap().len(), 1);
    assert!(s.tool_call(turn, "c2").await.unwrap().is_none());

    s.record_decision(
        &id,
        &AuditEntry::new("planner", "fs.read", "a.txt", "allow", "ok").in_turn(turn),
    )
    .await
    .unwrap();
    let d = s.decisions(&id).await.unwrap();
    assert_eq!(
        (d[0].turn_id, d[0].capability.as_str()),
        (Some(turn), "fs.read")
    );

    let mc = ModelCall {
        turn_id: turn,
        adapter: "main".into(),
        model: "m1".into(),
        response_model: Some("m1-2026".into()),
        finish_reason: Some("stop".into()),
        attempt: 1,
        outcome: "ok".into(),
        started_at: 1,
        ended_at: 2,
    };
    s.record_model_call(&mc).await.unwrap();
    assert_eq!(s.model_calls(&id).await.unwrap(), vec![mc]);

    let run = s.start_run(&id, Some("00-trace-01")).await.unwrap();
    s.end_run(&id, run, "done").await.unwrap();
    let runs = s.runs(&id).await.unwrap();
    assert_eq!((runs[0].id, runs[0].status.as_deref()), (run, Some("done")));
    assert_eq!(s.set_trace(&id, "first").await.unwrap(), "first");
    assert_eq!(s.set_trace(&id, "second").await.unwrap(), "first");

    s.end_turn(child, "succeeded", "done", Some(&json!({"a": 1})))
        .await
        .unwrap();
    let turns = s.turns(&id).await.unwrap();
    assert_eq!(turns[1].output, Some(json!({"a": 1})));
    assert_eq!(turns[0].iterations, 2);
    let t = Transition {
        from: Some("planner".into()),
        to: "done".into(),
        event: "succeeded".into(),
        mode: "fixed".into(),
        reason: "r".into(),
        at: 9,
    };
    s.transition_after(
        &id,
        &t,
        TaskStatus::Done,
        Some((turn, "arbiter", "m2", &usage)),
    )
    .await
    .unwrap();
    assert_eq!(s.transitions(&id).await.unwrap()[0].to, "done");
    let task = s.task(&id).await.unwrap();
    assert_eq!((task.status, task.steps), (TaskStatus::Done, 1));
    assert_eq!(s.completions(&id, "arbiter").await.unwrap(), 1);
    s.finish_task(&id, TaskStatus::Cancelled, "stopped")
        .await
        .unwrap();
    assert!(s.reopen(&id).await.unwrap());
    assert_eq!(s.task(&id).await.unwrap().status, TaskStatus::Running);

    // Row ids can be given, as an import keeps them.
    db.sql()
        .await
        .execute(
            "INSERT INTO rawko.turns (id, task_id, agent, started_at) VALUES (1000, $1, 'x', 0)",
            &[&id],
        )
        .await
        .unwrap();
    assert!(s.turns(&id).await.unwrap().iter().any(|t| t.id == 1000));
    s.advance_ids().await.unwrap();
    let next = s.start_turn(&id, "planner", None).await.unwrap();
    assert_eq!(next, 1001, "ids go on past the ones given");
}

#[tokio::test]
async fn pg_the_engine_reaches_it_through_the_store_trait() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let id = s.create_task("t", "planner", &json!({})).await.unwrap();
    let store: &dyn rawko_store::Store = &s;
    // Its futures can move between threads, as a multi-threaded runtime may move a run.
    fn send<T: Send>(t: T) -> T {
        t
    }
    let turn = send(store.start_turn(&id, "planner", None)).await.unwrap();
    store
        .append_message(turn, "user", &json!("hi"))
        .await
        .unwrap();
    assert_eq!(store.messages(turn).await.unwrap().len(), 1);
    assert_eq!(store.turns(&id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn pg_leases_are_held_by_identity_and_go_stale_by_the_servers_clock() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let id = s.create_task("t", "planner", &json!({})).await.unwrap();
    assert_eq!(s.acquire_lease(&id).await.unwrap(), Ok(()));
    assert_eq!(s.acquire_lease(&id).await.unwrap(), Ok(()), "ours again");
    assert!(s.renew_lease(&id).await.unwrap());
    let sql = db.sql().await;
    // Another runner on another host, its heartbeat `age` ms old by the server's clock.
    let other = |age: i64| {
        let sql = &sql;
        let id = id.clone();
        async move {
            sql.execute(
                "UPDATE rawko.tasks SET lease_pid = 1, lease_host = 'elsewhere',
                 lease_token = 'theirs', lease_start = NULL,
                 lease_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint - $2 WHERE id = $1",
                &[&id, &age],
            )
            .await
            .unwrap();
        }
    };
    other(1000).await;
    let holder = s.acquire_lease(&id).await.unwrap().unwrap_err();
    assert_eq!((holder.pid, holder.host.as_str()), (1, "elsewhere"));
    assert!(!s.renew_lease(&id).await.unwrap(), "not ours to renew");
    // Our fence: the task is someone else's now, so nothing of ours is written.
    let err = s.start_turn(&id, "planner", None).await.unwrap_err();
    assert!(err.is_taken_over(), "{err}");
    s.release_lease(&id).await.unwrap();
    let still: i64 = sql
        .query_one("SELECT lease_pid FROM rawko.tasks WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    assert_eq!(still, 1, "releasing leaves another's lease");
    // A heartbeat older than the staleness: the task reads interrupted, and is taken over with
    // an audit entry saying why.
    other(LEASE_STALE.as_millis() as i64 + 5000).await;
    assert_eq!(s.task(&id).await.unwrap().status, TaskStatus::Interrupted);
    assert_eq!(s.acquire_lease(&id).await.unwrap(), Ok(()));
    let d = s.decisions(&id).await.unwrap();
    assert_eq!(
        (d[0].capability.as_str(), d[0].decision.as_str()),
        ("lease", "interrupted")
    );
    let me = Holder::this_process();
    let row = sql
        .query_one(
            "SELECT lease_pid, lease_host, lease_token FROM rawko.tasks WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), me.pid as i64);
    assert_eq!(row.get::<_, String>(1), me.host);
    assert_eq!(row.get::<_, String>(2), me.token);
    s.start_turn(&id, "planner", None).await.unwrap();
    s.release_lease(&id).await.unwrap();
    assert!(!s.renew_lease(&id).await.unwrap());
}

#[tokio::test]
async fn pg_an_empty_database_is_migrated_once_and_reopens() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    // Two rawkos opening a new database at once: the advisory lock lets one migrate it.
    let config = db.config();
    let (a, b) = tokio::join!(PgStore::open(&config), PgStore::open(&config));
    a.unwrap();
    b.unwrap();
    let sql = db.sql().await;
    let v: i64 = sql
        .query_one("SELECT version FROM rawko.schema_version", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(v, SCHEMA_VERSION as i64);
    let s = db.store().await;
    let id = s.create_task("t", "planner", &json!({})).await.unwrap();
    drop(s);
    let s = db.store().await;
    assert_eq!(s.task(&id).await.unwrap().id, id);
    // Nothing in `public`: every table is in rawko's schema.
    let public: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = 'public'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(public, 0);
    let sync: String = sql
        .query_one("SHOW synchronous_commit", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(sync, "on");
}

/// A store this rawko made, changed with `sql` by someone else, then opened again: what the
/// refusal says.
async fn tampered(url: &str, sql: &str) -> String {
    let db = Db::new(url).await;
    drop(db.store().await);
    db.sql().await.batch_execute(sql).await.unwrap();
    let err = PgStore::open(&db.config()).await.unwrap_err();
    let StoreError::Pg(pg) = &err else {
        panic!("{err}")
    };
    assert!(
        matches!(
            pg.kind,
            PgErrorKind::Foreign { .. } | PgErrorKind::TooNew { .. }
        ),
        "{err}"
    );
    assert!(err.to_string().contains(&db.name), "{err}");
    err.to_string()
}

#[tokio::test]
async fn pg_refuses_a_trigger_it_did_not_create() {
    let Some(url) = server() else { return };
    let e = tampered(
        &url,
        "CREATE FUNCTION public.evil() RETURNS trigger LANGUAGE plpgsql AS
           $$BEGIN RETURN NEW; END$$;
         CREATE TRIGGER sneaky BEFORE INSERT ON rawko.tool_calls
           FOR EACH ROW EXECUTE FUNCTION public.evil();",
    )
    .await;
    assert!(e.contains("trigger `tool_calls.sneaky`"), "{e}");
}

#[tokio::test]
async fn pg_refuses_a_function_it_did_not_create() {
    let Some(url) = server() else { return };
    let e = tampered(
        &url,
        "CREATE FUNCTION rawko.lower(text) RETURNS text LANGUAGE sql AS $$SELECT 'x'$$;",
    )
    .await;
    assert!(e.contains("function `lower(text)`"), "{e}");
}

#[tokio::test]
async fn pg_refuses_a_column_it_did_not_create_or_a_changed_one() {
    let Some(url) = server() else { return };
    let e = tampered(&url, "ALTER TABLE rawko.tasks ADD COLUMN extra TEXT;").await;
    assert!(e.contains("column `tasks.extra`"), "{e}");
    let e = tampered(
        &url,
        "ALTER TABLE rawko.turns ALTER COLUMN agent DROP NOT NULL;",
    )
    .await;
    assert!(e.contains("changed column `turns.agent`"), "{e}");
    let e = tampered(
        &url,
        "ALTER TABLE rawko.tasks ENABLE ROW LEVEL SECURITY;
         CREATE POLICY p ON rawko.tasks USING (true);",
    )
    .await;
    assert!(
        e.contains("policy `tasks.p`") || e.contains("changed table `tasks`"),
        "{e}"
    );
    let e = tampered(&url, "CREATE VIEW rawko.v AS SELECT 1 AS one;").await;
    assert!(
        e.contains("view `v`") || e.contains("rule `v._RETURN`"),
        "{e}"
    );
}

#[tokio::test]
async fn pg_refuses_a_store_of_a_newer_rawko() {
    let Some(url) = server() else { return };
    let e = tampered(
        &url,
        "UPDATE rawko.schema_version SET version = version + 1;",
    )
    .await;
    assert!(e.contains("newer rawko"), "{e}");
    assert!(
        e.contains(&format!("schema version {}", SCHEMA_VERSION + 1)),
        "{e}"
    );
}

#[tokio::test]
async fn pg_a_wrong_password_names_the_store_without_the_password() {
    let Some(url) = server() else { return };
    let wrong = "wr0ng-Passw0rd";
    let config = PgConfig::from_url(&url).unwrap().with_password(wrong);
    let err = PgStore::open(&config).await.unwrap_err();
    let text = err.to_string();
    assert!(!text.contains(wrong), "{text}");
    let StoreError::Pg(pg) = &err else {
        panic!("{err}")
    };
    assert!(matches!(pg.kind, PgErrorKind::Auth(_)), "{err}");
    assert!(text.contains(&config.label()), "{text}");
    assert!(!text.contains(':') || !text.contains(&format!(":{wrong}")));
    // The test server's own password does not show either.
    if let Some(pw) = PgConfig::from_url(&url)
        .unwrap()
        .tokio_config()
        .get_password()
    {
        assert!(!text.contains(std::str::from_utf8(pw).unwrap()), "{text}");
    }
    assert!(!err.is_connection_lost());
}

#[tokio::test]
async fn pg_an_unreachable_port_says_so() {
    if server().is_none() {
        return;
    }
    // A port nothing listens on: bind one, note it, and let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("postgres://rawko:s3cret@127.0.0.1:{port}/rawko");
    let err = PgStore::open(&PgConfig::from_url(&url).unwrap())
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&format!("127.0.0.1:{port}")), "{text}");
    assert!(!text.contains("s3cret"), "{text}");
    let StoreError::Pg(pg) = &err else {
        panic!("{err}")
    };
    assert!(matches!(pg.kind, PgErrorKind::Unreachable(_)), "{err}");
}

#[tokio::test]
async fn pg_a_connection_killed_mid_operation_is_a_lost_connection() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let id = s.create_task("t", "planner", &json!({})).await.unwrap();
    // Hold the tasks table so that the store's next read waits on it, then end the waiting
    // backend from another connection.
    let mut locker = db.sql().await;
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE rawko.tasks IN ACCESS EXCLUSIVE MODE")
        .await
        .unwrap();
    let read = tokio::spawn({
        let id = id.clone();
        async move {
            let r = s.task(&id).await;
            (s, r)
        }
    });
    let killer = db.sql().await;
    let mut killed = false;
    for _ in 0..200 {
        let n = killer
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'
                   AND application_name = 'rawko'",
                &[],
            )
            .await
            .unwrap()
            .len();
        if n > 0 {
            killed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(killed, "the store's read never waited on the lock");
    let (s, r) = read.await.unwrap();
    let err = r.unwrap_err();
    assert!(err.is_connection_lost(), "{err}");
    assert!(
        err.to_string()
            .contains("connection to the server was lost"),
        "{err}"
    );
    tx.rollback().await.unwrap();
    // The pool drops the dead connection: the store works again.
    assert_eq!(s.task(&id).await.unwrap().id, id);
}

/// A listener (what `rawko ui` follows a task with) hears each committed write by the task it
/// changed, whichever record it wrote; a write that was refused is not heard.
#[tokio::test]
async fn pg_a_listener_hears_each_committed_write_by_its_task() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let mut heard = Listener::start(&db.config()).await.unwrap();
    let next = async |heard: &mut Listener| {
        tokio::time::timeout(Duration::from_secs(5), heard.next())
            .await
            .expect("no notice within 5 s")
            .expect("the listener's connection ended")
    };
    let a = s.create_task("a", "worker", &json!({})).await.unwrap();
    let b = s.create_task("b", "worker", &json!({})).await.unwrap();
    let turn = s.start_turn(&a, "worker", None).await.unwrap();
    assert_eq!(next(&mut heard).await, a);
    s.append_message(turn, "user", &json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(next(&mut heard).await, a);
    let other = s.start_turn(&b, "worker", None).await.unwrap();
    assert_eq!(next(&mut heard).await, b);
    s.record_tool_call(&ToolCall {
        turn_id: other,
        call_id: "c1".into(),
        tool: "Read".into(),
        input: "{}".into(),
        output: "x".into(),
        is_error: false,
        verdict: "allowed".into(),
        duration_us: 10,
        at: 1,
    })
    .await
    .unwrap();
    assert_eq!(next(&mut heard).await, b);
    s.end_turn(turn, "success", "done", None).await.unwrap();
    assert_eq!(next(&mut heard).await, a);
    s.finish_task(&a, TaskStatus::Done, "done").await.unwrap();
    assert_eq!(next(&mut heard).await, a);

    // A write that fails is rolled back, and so is its notice: a message for a turn that
    // does not exist breaks its foreign key.
    assert!(s.append_message(999_999, "user", &json!({})).await.is_err());
    s.end_turn(other, "success", "done", None).await.unwrap();
    assert_eq!(next(&mut heard).await, b, "the failed write was heard");
}

/// Every write of a step is sent in one round trip with its lease fence among its statements:
/// once another runner holds the task, each is refused as taken over, writes nothing, and
/// leaves its connection usable (its transaction rolled back, not left open).
#[tokio::test]
async fn pg_every_write_of_a_step_is_fenced_and_writes_nothing_once_taken_over() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let id = s.create_task("t", "planner", &json!({})).await.unwrap();
    assert_eq!(s.acquire_lease(&id).await.unwrap(), Ok(()));
    let turn = s.start_turn(&id, "planner", None).await.unwrap();
    let run = s.start_run(&id, None).await.unwrap();
    // Held: the writes go through, each committed.
    assert_eq!(s.bump_iterations(turn).await.unwrap(), 1);
    let usage = Usage {
        input_tokens: 3,
        ..Usage::default()
    };
    s.append_reply(turn, &json!("r"), "a", "m", &usage)
        .await
        .unwrap();
    let call = |n: &str| ToolCall {
        turn_id: turn,
        call_id: n.into(),
        tool: "LS".into(),
        input: "{}".into(),
        output: "o".into(),
        is_error: false,
        verdict: "allow".into(),
        duration_us: 1,
        at: 0,
    };
    assert!(s.record_tool_call(&call("c1")).await.unwrap());
    assert!(
        !s.record_tool_call(&call("c1")).await.unwrap(),
        "recorded once"
    );
    let sql = db.sql().await;
    let count = |table: &'static str| {
        let sql = &sql;
        async move {
            sql.query_one(&format!("SELECT count(*) FROM rawko.{table}"), &[])
                .await
                .unwrap()
                .get::<_, i64>(0)
        }
    };
    let tables = [
        "messages",
        "usage",
        "tool_calls",
        "decisions",
        "model_calls",
        "transitions",
        "turns",
        "runs",
    ];
    let task_before = s.task(&id).await.unwrap();
    let mut before = Vec::new();
    for t in tables {
        before.push(count(t).await);
    }
    sql.execute(
        "UPDATE rawko.tasks SET lease_pid = 1, lease_host = 'elsewhere', lease_token = 'theirs',
         lease_at = (EXTRACT(EPOCH FROM now()) * 1000)::bigint WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    let refused = |r: Result<(), StoreError>, what: &str| {
        let e = r.expect_err(what);
        assert!(e.is_taken_over(), "{what}: {e}");
        assert!(e.to_string().contains("pid 1 on elsewhere"), "{what}: {e}");
    };
    refused(s.bump_iterations(turn).await.map(drop), "bump_iterations");
    refused(
        s.append_message(turn, "user", &json!("late"))
            .await
            .map(drop),
        "append_message",
    );
    refused(
        s.append_reply(turn, &json!("late"), "a", "m", &usage)
            .await
            .map(drop),
        "append_reply",
    );
    refused(s.record_usage(turn, "a", "m", &usage).await, "record_usage");
    refused(
        s.record_tool_call(&call("c2")).await.map(drop),
        "record_tool_call",
    );
    let model_call = ModelCall {
        turn_id: turn,
        adapter: "a".into(),
        model: "m".into(),
        response_model: None,
        finish_reason: None,
        attempt: 0,
        outcome: "ok".into(),
        started_at: 0,
        ended_at: 1,
    };
    refused(s.record_model_call(&model_call).await, "record_model_call");
    let decision = AuditEntry {
        turn_id: Some(turn),
        subject: "LS".into(),
        capability: "tool".into(),
        detail: "{}".into(),
        decision: "allow".into(),
        reason: "late".into(),
        at: 0,
    };
    refused(s.record_decision(&id, &decision).await, "record_decision");
    let t = Transition {
        from: Some("planner".into()),
        to: "developer".into(),
        event: "onSuccess".into(),
        mode: "table".into(),
        reason: "late".into(),
        at: 0,
    };
    refused(
        s.transition_after(&id, &t, TaskStatus::Running, Some((turn, "a", "m", &usage)))
            .await,
        "transition_after",
    );
    refused(
        s.record_answer(&id, turn, 2, &model_call, None, &[])
            .await
            .map(drop),
        "record_answer",
    );
    let content = json!("late");
    refused(
        s.record_answer(
            &id,
            turn,
            2,
            &model_call,
            Some(Reply {
                content: &content,
                adapter: "a",
                model: "m",
                usage: &usage,
            }),
            std::slice::from_ref(&decision),
        )
        .await
        .map(drop),
        "record_answer with a reply",
    );
    refused(
        s.record_results(
            &id,
            turn,
            Some(&call("c3")),
            std::slice::from_ref(&decision),
            &content,
        )
        .await
        .map(drop),
        "record_results",
    );
    refused(
        s.start_turn(&id, "developer", None).await.map(drop),
        "start_turn",
    );
    refused(s.end_turn(turn, "success", "late", None).await, "end_turn");
    refused(s.start_run(&id, None).await.map(drop), "start_run");
    refused(s.end_run(&id, run, "done").await, "end_run");
    refused(
        s.finish_task(&id, TaskStatus::Done, "late").await,
        "finish_task",
    );
    let task = s.task(&id).await.unwrap();
    assert_eq!(
        (task.status, task.summary),
        (task_before.status, task_before.summary)
    );
    assert_eq!(s.turns(&id).await.unwrap()[0].ended_at, None);
    assert_eq!(s.runs(&id).await.unwrap()[0].ended_at, None);
    for (t, n) in tables.iter().zip(&before) {
        assert_eq!(count(t).await, *n, "{t} changed after the takeover");
    }
    let iterations: i64 = sql
        .query_one("SELECT iterations FROM rawko.turns WHERE id = $1", &[&turn])
        .await
        .unwrap()
        .get(0);
    assert_eq!(iterations, 1);
    // The pool's connections are in no transaction: a task this runner holds no lease on is
    // written and read on them as usual.
    let other = s.create_task("u", "planner", &json!({})).await.unwrap();
    let other_turn = s.start_turn(&other, "planner", None).await.unwrap();
    for _ in 0..8 {
        s.append_message(other_turn, "user", &json!("x"))
            .await
            .unwrap();
    }
    assert_eq!(s.messages(other_turn).await.unwrap().len(), 8);
}

#[tokio::test]
async fn pg_blobs_are_kept_by_hash_and_checked_when_read() {
    let Some(url) = server() else { return };
    let db = Db::new(&url).await;
    let s = db.store().await;
    let data = b"GIT binary patch\n\0\xff".to_vec();
    let hash = s.put_blob(&data).await.unwrap();
    assert_eq!(hash, rawko_store::blob_hash(&data));
    assert_eq!(s.put_blob(&data).await.unwrap(), hash);
    assert_eq!(s.blob(&hash).await.unwrap(), Some(data));
    assert_eq!(s.blob("sha256:00").await.unwrap(), None);
    let task = s.create_task("p", "developer", &json!({})).await.unwrap();
    let later = s.put_blob(b"later").await.unwrap();
    s.set_edits(&task, 3, &later).await.unwrap();
    s.set_edits(&task, 2, &hash).await.unwrap();
    assert_eq!(
        s.edits(&task).await.unwrap(),
        Some(Edits {
            steps: 3,
            patch: later.clone()
        })
    );
    db.sql()
        .await
        .execute(
            "UPDATE rawko.blobs SET data = '\\x00' WHERE hash = $1",
            &[&later],
        )
        .await
        .unwrap();
    let err = s.blob(&later).await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err}");
}
