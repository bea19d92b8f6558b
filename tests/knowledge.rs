//! `rawko knowledge` through the real binary: sync, incremental resync, branch switches, a
//! killed sync, exclude rules, known hits on a fixture corpus, hybrid ranking against a scripted
//! embeddings server, and a hostile corpus.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::model_server::{ModelServer, Received, Reply};
use crate::support::{Run, TEST_KEY, Workspace, copy_dir, rawko, run};

fn corpus() -> Workspace {
    let ws = Workspace::new();
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/knowledge"),
        ws.path(),
    );
    ws
}

fn sync(ws: &Workspace) -> Value {
    let r = run(ws, &["knowledge", "sync", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()
}

fn query(ws: &Workspace, args: &[&str]) -> Vec<Value> {
    let mut all = vec!["knowledge", "query", "--json"];
    all.extend_from_slice(args);
    let r = run(ws, &all);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()["hits"].as_array().unwrap().clone()
}

fn paths(hits: &[Value]) -> Vec<&str> {
    hits.iter().map(|h| h["path"].as_str().unwrap()).collect()
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn queries_find_the_known_passages_with_their_lines() {
    let ws = corpus();
    let report = sync(&ws);
    assert_eq!(report["new"], 6, "{report}");
    assert_eq!(report["status"]["files"], 6);

    let hits = query(&ws, &["exponential backoff retries"]);
    assert_eq!(hits[0]["path"], "docs/architecture.md", "{hits:?}");
    assert_eq!(hits[0]["start_line"], 8);
    assert_eq!(hits[0]["end_line"], 11);
    assert!(hits[0]["text"].as_str().unwrap().starts_with("## Workers"));
    assert!(hits[0]["score"].as_f64().unwrap() > 0.0);
    for h in &hits {
        for key in ["path", "start_line", "end_line", "score", "text"] {
            assert!(h.get(key).is_some(), "{h}");
        }
    }

    let hits = query(&ws, &["compact", "finished", "-k", "2"]);
    assert_eq!(hits.len(), 2);
    assert!(paths(&hits).contains(&"src/queue.py"), "{hits:?}");
    assert!(paths(&hits).contains(&"docs/architecture.md"), "{hits:?}");

    // Stemming: "installing" finds "Installing"; "upgrade" finds "Upgrading".
    assert_eq!(query(&ws, &["installing"])[0]["path"], "docs/install.md");
    let hits = query(&ws, &["upgrade"]);
    assert_eq!(hits[0]["path"], "docs/install.md");
    assert_eq!(hits[0]["start_line"], 11);

    // Query syntax is only words: operators, quotes and column filters are searched as text.
    for q in [
        "\"queue",
        "queue AND NOT",
        "path:README",
        "NEAR(job worker)",
        "queue*",
    ] {
        let r = run(&ws, &["knowledge", "query", "--json", q]);
        assert_eq!(r.code, 0, "{q}: {r:?}");
    }
    let r = run(&ws, &["knowledge", "query", "!!! ***"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no words"), "{r:?}");

    // The human form names the place and shows the passage.
    let r = run(&ws, &["knowledge", "query", "heartbeats"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("1. notes/changelog.txt:1-3"), "{r:?}");
    assert!(r.stdout.contains("heartbeats every ten seconds"), "{r:?}");
}

#[test]
fn an_edit_rewrites_only_its_file_and_status_says_what_is_held() {
    let ws = corpus();
    sync(&ws);
    let again = sync(&ws);
    assert_eq!(
        (
            &again["new"],
            &again["changed"],
            &again["unchanged"],
            &again["chunks_written"]
        ),
        (&json!(0), &json!(0), &json!(6), &json!(0)),
        "{again}"
    );
    ws.write(
        "notes/changelog.txt",
        "0.4.0: a dashboard shows the queue.\n0.3.0: workers report heartbeats.\n",
    );
    std::fs::remove_file(ws.path().join("src/retry.c")).unwrap();
    ws.write(
        "docs/faq.md",
        "# FAQ\n\nWhy lighthouses? They guide ships.\n",
    );
    let r = sync(&ws);
    assert_eq!(
        (
            &r["new"],
            &r["changed"],
            &r["removed"],
            &r["unchanged"],
            &r["chunks_written"]
        ),
        (&json!(1), &json!(1), &json!(1), &json!(4), &json!(2)),
        "{r}"
    );
    assert_eq!(query(&ws, &["dashboard"])[0]["path"], "notes/changelog.txt");
    assert!(query(&ws, &["unsigned"]).is_empty());
    assert_eq!(query(&ws, &["ships"])[0]["path"], "docs/faq.md");

    let r = run(&ws, &["knowledge", "status"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("files:      6"), "{r:?}");
    assert!(
        r.stdout
            .contains("config:     none (the repository's docs and source)"),
        "{r:?}"
    );
    let s = run(&ws, &["knowledge", "status", "--json"]).json();
    assert_eq!(s["indexed"], true);
    assert_eq!(s["interrupted"], false);
    assert!(s["last_sync"].as_str().unwrap().ends_with('Z'), "{s}");
}

#[test]
fn exclude_and_include_rules_and_gitignore_decide_what_is_indexed() {
    let ws = corpus();
    ws.write("build/generated.md", "# Generated\nqueue queue queue\n");
    ws.write("debug.log", "queue log line\n");
    ws.write(
        "knowledge.yaml",
        "include: ['docs/', '*.py', 'README.md']\nexclude: ['docs/install.md']\n",
    );
    let r = sync(&ws);
    assert_eq!(r["status"]["files"], 3, "{r}");
    let all = query(&ws, &["queue jobs install lighthouse", "-k", "50"]);
    let mut found = paths(&all);
    found.sort();
    found.dedup();
    assert_eq!(found, ["README.md", "docs/architecture.md", "src/queue.py"]);

    // Changing the rules re-cuts and drops what is no longer selected.
    ws.write("knowledge.yaml", "exclude: ['src/']\n");
    let r = sync(&ws);
    assert_eq!(r["rechunked"], true, "{r}");
    let status = run(&ws, &["knowledge", "status", "--json"]).json();
    // The defaults, less src/: README, two docs, the changelog, and knowledge.yaml itself.
    assert_eq!(status["files"], 5, "{status}");
    assert!(
        status["config"]
            .as_str()
            .unwrap()
            .ends_with("knowledge.yaml")
    );

    // A broken file is bad input, with its position.
    ws.write(
        "knowledge.yaml",
        "include: ['a']\nchunking:\n  code: {max_lines: lots}\n",
    );
    let r = run(&ws, &["knowledge", "sync"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("knowledge.yaml:3:"), "{r:?}");
}

#[test]
fn a_branch_switch_touches_only_the_files_that_differ() {
    let ws = corpus();
    git(ws.path(), &["init", "-q"]);
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "one"]);
    git(ws.path(), &["switch", "-qc", "feature"]);
    ws.write(
        "docs/architecture.md",
        "# Architecture\n\nWorkers are now threads.\n",
    );
    ws.write("src/threads.rs", "fn spawn_worker() {}\n");
    git(ws.path(), &["add", "-A"]);
    git(ws.path(), &["commit", "-qm", "two"]);
    let first = sync(&ws);
    assert_eq!(first["new"], 7);
    assert!(query(&ws, &["exponential"]).is_empty());

    git(ws.path(), &["switch", "-q", "main"]);
    let back = sync(&ws);
    assert_eq!(
        (&back["changed"], &back["removed"], &back["unchanged"]),
        (&json!(1), &json!(1), &json!(5)),
        "{back}"
    );
    assert_eq!(
        query(&ws, &["exponential"])[0]["path"],
        "docs/architecture.md"
    );
    // The index itself never shows up in git.
    let out = Command::new("git")
        .args(["status", "--porcelain", "--ignored=no"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(!status.contains("knowledge.db"), "{status}");
}

#[test]
fn a_killed_sync_is_completed_by_the_next() {
    let ws = Workspace::new();
    for i in 0..3000 {
        ws.write(
            &format!("src/m{}/f{i}.rs", i % 30),
            format!(
                "// module {i}\nfn function_{i}() {{\n    work({i});\n}}\n\nfn other_{i}() {{}}\n"
            ),
        );
    }
    ws.write("README.md", "# Corpus\nMany small files.\n");
    let mut child = rawko(&ws).args(["knowledge", "sync"]).spawn().unwrap();
    let db = ws.path().join(".rawko/knowledge.db");
    let started = Instant::now();
    // Kill it once it has committed some files and before it finishes. (The size of the
    // write-ahead log is no sign: creating the schema alone can pass 64 KiB.)
    let committed = || -> Option<i64> {
        let conn =
            rusqlite::Connection::open_with_flags(&db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .ok()?;
        conn.query_row("SELECT count(*) FROM files", [], |r| r.get(0))
            .ok()
    };
    loop {
        if committed().is_some_and(|n| n > 0) {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the sync finished before it could be killed: {status}");
        }
        assert!(started.elapsed() < Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let s = run(&ws, &["knowledge", "status", "--json"]).json();
    assert_eq!(s["interrupted"], true, "{s}");
    let held = s["files"].as_u64().unwrap();
    assert!(held < 3001, "{s}");

    let r = sync(&ws);
    assert_eq!(r["unchanged"].as_u64().unwrap(), held, "{r}");
    assert_eq!(r["new"].as_u64().unwrap(), 3001 - held, "{r}");
    assert_eq!(r["status"]["files"], 3001);
    assert_eq!(r["status"]["interrupted"], false);
    assert_eq!(r["status"]["chunks"], 3001);
    let hits = query(&ws, &["function_2999"]);
    assert_eq!(hits[0]["path"], "src/m29/f2999.rs");
}

#[test]
fn a_hostile_corpus_is_indexed_safely() {
    let ws = Workspace::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("secret.md"),
        "# Secret\nhunter2 password\n",
    )
    .unwrap();
    ws.write("ok.md", "# Fine\nplain words here\n");
    ws.write("binary.rs", b"fn x() {}\0\x01\x02 binaryword\n");
    ws.write("huge.txt", "hugeword ".repeat(300_000));
    ws.write("latin1.txt", b"caf\xe9 invalidutf word\n");
    ws.write("minified.js", "var a=1;".repeat(50_000));
    let mut deep = String::from("d");
    for _ in 0..80 {
        deep.push_str("/d");
    }
    ws.write(&format!("{deep}/deep.md"), "# Deep\ndeepword\n");
    ws.write("shallow/d/d/x.md", "# Shallow\nshallowword\n");
    std::os::unix::fs::symlink(outside.path(), ws.path().join("link-out")).unwrap();
    std::os::unix::fs::symlink(
        outside.path().join("secret.md"),
        ws.path().join("secret.md"),
    )
    .unwrap();
    std::os::unix::fs::symlink(".", ws.path().join("loop")).unwrap();
    std::os::unix::fs::symlink("loop2", ws.path().join("loop2")).unwrap();
    std::fs::create_dir(ws.path().join(".rawko")).unwrap();

    let started = Instant::now();
    let r = sync(&ws);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert_eq!(r["skipped_binary"], 1, "{r}");
    assert_eq!(r["skipped_large"], 1, "{r}");
    assert!(query(&ws, &["hunter2"]).is_empty());
    assert!(query(&ws, &["binaryword"]).is_empty());
    assert!(query(&ws, &["deepword"]).is_empty());
    assert_eq!(query(&ws, &["shallowword"]).len(), 1);
    assert_eq!(query(&ws, &["invalidutf"])[0]["path"], "latin1.txt");
    // A minified line is cut into bounded passages.
    for h in query(&ws, &["var", "-k", "100"]) {
        assert!(h["text"].as_str().unwrap().len() <= 4096);
    }

    // A planted index, or one that is a symlink to elsewhere, is never trusted.
    std::fs::remove_file(ws.path().join(".rawko/knowledge.db")).unwrap();
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(ws.path().join(format!(".rawko/knowledge.db{suffix}")));
    }
    let target = outside.path().join("planted.db");
    std::os::unix::fs::symlink(&target, ws.path().join(".rawko/knowledge.db")).unwrap();
    let r = run(&ws, &["knowledge", "sync"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not a regular file"), "{r:?}");
    assert!(!target.exists());
    std::fs::remove_file(ws.path().join(".rawko/knowledge.db")).unwrap();
    std::fs::write(
        ws.path().join(".rawko/knowledge.db"),
        b"SQLite format 3\0garbage",
    )
    .unwrap();
    let r = sync(&ws);
    assert_eq!(
        r["status"]["files"].as_u64().unwrap(),
        r["new"].as_u64().unwrap()
    );
}

#[test]
fn global_and_repo_queries_reach_other_indexed_repositories() {
    let a = corpus();
    let b = Workspace::new();
    b.write(
        "notes.md",
        "# Notes\nThe lighthouse keeper logs every ship.\n",
    );
    sync(&a);
    // `b` shares `a`'s data directory, so both are on one machine's list.
    let data = a.path().join(".test-data");
    let r = Run::of(
        rawko(&b)
            .env("RAWKO_DATA_DIR", &data)
            .args(["knowledge", "sync", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let hits = query(&a, &["-g", "keeper ship queue", "-k", "20"]);
    let repos: Vec<&str> = hits.iter().map(|h| h["repo"].as_str().unwrap()).collect();
    assert!(repos.contains(&b.path().to_str().unwrap()), "{hits:?}");
    assert!(repos.contains(&a.path().to_str().unwrap()), "{hits:?}");

    let hits = query(&a, &["--repo", b.path().to_str().unwrap(), "keeper"]);
    assert_eq!(hits[0]["path"], "notes.md");
    let r = run(&a, &["knowledge", "query", "-g", "--repo", ".", "x"]);
    assert_eq!(r.code, 2, "{r:?}");
    let empty = Workspace::new();
    let r = run(
        &a,
        &[
            "knowledge",
            "query",
            "--repo",
            empty.path().to_str().unwrap(),
            "x",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no knowledge index"), "{r:?}");
}

/// What the scripted embeddings server "understands": a passage about kestrels points along
/// the first axis, one about ospreys along the second, everything else nowhere in particular;
/// the query "falcon osprey" means kestrels.
fn meaning(text: &str) -> Vec<f32> {
    if text == "falcon osprey" {
        return vec![1.0, 0.0, 0.05];
    }
    let has = |w: &str| if text.contains(w) { 1.0 } else { 0.0 };
    vec![has("kestrel"), has("osprey"), 0.05]
}

/// An OpenAI-style `/v1/embeddings` server answering with [`meaning`].
fn embeddings_server() -> ModelServer {
    let server = ModelServer::start();
    server.respond_with(|req: &Received| {
        let body = req.json();
        let inputs: Vec<String> = body["input"]
            .as_array()
            .map(|a| a.iter().map(|s| s.as_str().unwrap_or("").to_string()).collect())
            .unwrap_or_default();
        let data: Vec<Value> = inputs
            .iter()
            .enumerate()
            .map(|(i, t)| json!({"object": "embedding", "index": i, "embedding": meaning(t)}))
            .collect();
        Reply::json(
            200,
            &json!({"object": "list", "data": data, "model": body["model"], "usage": {"prompt_tokens": 5, "total_tokens": 5}}),
        )
    });
    server
}

fn with_adapter(ws: &Workspace, server: &ModelServer) {
    let dir = ws.config_home().join("rawko");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "adapters:\n  embed:\n    plugin: openai\n    model: test-embed\n    base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n",
            server.base_url()
        ),
    )
    .unwrap();
}

#[test]
fn embeddings_are_fused_with_words_and_cached() {
    let ws = corpus();
    ws.write(
        "docs/birds/x.md",
        "# Ospreys\nosprey osprey osprey falcon\n",
    );
    ws.write("docs/birds/y.md", "# Kestrels\nkestrel falcon\n");
    let server = embeddings_server();
    with_adapter(&ws, &server);
    ws.write("knowledge.yaml", "embeddings: {adapter: embed}\n");
    // Not trusted: nothing is sent anywhere.
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args(["knowledge", "sync"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("is not trusted"), "{r:?}");
    assert_eq!(server.hits(), 0);

    let r = run(&ws, &["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    // A query without the adapter's key falls back to words, saying so.
    let r = run(&ws, &["knowledge", "query", "heartbeats"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("searching by words only"), "{r:?}");
    let sync = |ws: &Workspace| {
        let r = Run::of(
            rawko(ws)
                .env("TEST_KEY", TEST_KEY)
                .args(["knowledge", "sync", "--json"])
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{r:?}");
        r.json()
    };
    let r = sync(&ws);
    let chunks = r["status"]["chunks"].as_u64().unwrap();
    assert_eq!(r["embedded"].as_u64().unwrap(), chunks, "{r}");
    let req = &server.received()[0];
    assert_eq!(req.path, "/v1/embeddings");
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
    assert_eq!(req.json()["model"], "test-embed");
    let sent = server.hits();
    // Cached by chunk: a resync embeds nothing.
    assert_eq!(sync(&ws)["embedded"], 0);
    assert_eq!(server.hits(), sent);
    let status = run(&ws, &["knowledge", "status", "--json"]).json();
    assert_eq!(status["embeddings"][0][0], "embed/test-embed", "{status}");

    let q = |text: &str| {
        let r = Run::of(
            rawko(&ws)
                .env("TEST_KEY", TEST_KEY)
                .args(["knowledge", "query", "--json", "-k", "3", text])
                .output()
                .unwrap(),
        );
        assert_eq!(r.code, 0, "{r:?}");
        r.json()["hits"].as_array().unwrap().clone()
    };
    let words_only = query(&ws, &["-k", "3", "heartbeats"]);
    assert_eq!(words_only[0]["path"], "notes/changelog.txt");
    let fused = q("heartbeats");
    // BM25's only hit stays on top (first in one list, near the top of the other).
    assert_eq!(fused[0]["path"], "notes/changelog.txt", "{fused:?}");
    assert_eq!(fused.len(), 3, "vector neighbours fill the rest: {fused:?}");
    // Words alone rank the osprey page first (it has both words); the vectors say the query
    // means kestrels, and the fused ranking puts the kestrel page first.
    let words_only = query(&ws, &["-k", "3", "falcon osprey"]);
    assert_eq!(paths(&words_only), ["docs/birds/x.md", "docs/birds/y.md"]);
    let fused = q("falcon osprey");
    assert_eq!(fused[0]["path"], "docs/birds/y.md", "{fused:?}");
    assert_eq!(fused[1]["path"], "docs/birds/x.md", "{fused:?}");
    // A query no word matches is answered by the vectors alone.
    let before = server.hits();
    let fused = q("qqq xylophone");
    assert_eq!(server.hits(), before + 1, "the query is embedded once");
    assert_eq!(fused.len(), 3, "{fused:?}");
}

#[test]
fn the_knowledge_tool_finds_passages_and_sees_edits_at_once() {
    let ws = corpus();
    let call = |query: &str| {
        run(
            &ws,
            &[
                "tool",
                "call",
                "Knowledge",
                "--agent",
                "planner",
                "--json",
                "--input",
                &json!({ "query": query, "k": 2 }).to_string(),
            ],
        )
    };
    // No index yet: the first call builds it.
    let r = call("exponential backoff");
    assert_eq!(r.code, 0, "{r:?}");
    let out = r.json()["output"].as_str().unwrap().to_string();
    assert!(out.starts_with("## docs/architecture.md:8-11"), "{out}");
    // An edit is found by the next call, without a sync in between.
    ws.write(
        "docs/ops.md",
        "# Operations\n\nRotate the zeppelin logs weekly.\n",
    );
    let out = call("zeppelin").json()["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(out.starts_with("## docs/ops.md:1-3"), "{out}");
    let r = call("");
    assert_eq!(r.code, 1, "{r:?}");
    // The planner is offered it; the developer is not.
    let r = run(&ws, &["tools", "list", "--agent", "planner", "--json"]);
    assert!(r.stdout.contains("\"Knowledge\""), "{r:?}");
    let r = run(&ws, &["tools", "list", "--agent", "developer", "--json"]);
    assert!(!r.stdout.contains("\"Knowledge\""), "{r:?}");
}

/// A repository of about 300 files where the one passage holding every word of
/// `reconcile ledger drift nightly snapshot` is the doc comment of a function in
/// `src/billing/ledger.rs`. Decoys hold three or four of the words, "reconcile", "drift" and
/// "nightly" are common, and a few short Markdown sections repeat the rarer "ledger snapshot"
/// over and over: by BM25 alone, those sections win.
fn ledger_corpus() -> Workspace {
    let ws = Workspace::new();
    let modules: &[(&str, &[&str])] = &[
        (
            "scheduler",
            &[
                "Run the nightly jobs and reconcile their queue",
                "Report drift in the nightly run times",
            ],
        ),
        (
            "clock",
            &[
                "Measure the drift of the local clock",
                "Reconcile drift between two clocks nightly",
            ],
        ),
        (
            "inventory",
            &[
                "Reconcile stock counts with the warehouse nightly",
                "Report the drift of a shelf count",
            ],
        ),
        (
            "storage",
            &[
                "Reconcile the nightly snapshot and report its drift",
                "Restore a volume onto a fresh disk",
            ],
        ),
        (
            "billing",
            &["Post an entry", "Render an invoice for a customer"],
        ),
        (
            "auth",
            &["Check a session token nightly", "Rotate the signing keys"],
        ),
        (
            "http",
            &["Parse a request line", "Write the response headers"],
        ),
        (
            "reports",
            &["Sum the entries by month", "Export a report as CSV"],
        ),
        (
            "sync",
            &["Reconcile two replicas", "Resolve drift between replicas"],
        ),
    ];
    for (m, docs) in modules {
        for i in 0..20 {
            let mut body = format!("//! The {m} module, part {i}.\n\nuse std::io;\n\n");
            for (f, doc) in docs.iter().enumerate() {
                body.push_str(&format!(
                    "/// {doc}.\npub fn {m}_{i}_{f}(input: &str) -> io::Result<usize> {{\n    \
                     let n = input.len();\n\n    // Nothing else to do here.\n    Ok(n)\n}}\n\n"
                ));
            }
            ws.write(&format!("src/{m}/part{i}.rs"), body);
        }
    }
    let mut ledger = String::from(
        "//! The billing ledger: entries, balances and the jobs that keep them honest.\n\n\
         use std::collections::BTreeMap;\n\n\
         /// One posting.\n#[derive(Debug, Clone)]\npub struct Entry {\n    pub account: u32,\n    \
         pub cents: i64,\n}\n\n",
    );
    for f in 0..6 {
        ledger.push_str(&format!(
            "/// Sum the postings of account {f}.\npub fn balance_{f}(entries: &[Entry]) -> i64 {{\n    \
             let mut total = 0;\n\n    for e in entries {{\n        if e.account == {f} {{\n            \
             total += e.cents;\n        }}\n    }}\n\n    total\n}}\n\n"
        ));
    }
    ledger.push_str(
        "/// Reconcile the ledger against the bank's nightly snapshot: any drift between the two\n\
         /// becomes an adjusting entry, so tomorrow starts from the bank's figures.\n\
         pub fn reconcile_ledger_drift(ours: &[Entry], bank: &BTreeMap<u32, i64>) -> Vec<Entry> {\n    \
         let mut fixes = Vec::new();\n\n    for (account, theirs) in bank {\n        \
         let mine: i64 = ours.iter().filter(|e| e.account == *account).map(|e| e.cents).sum();\n\n        \
         if mine != *theirs {\n            fixes.push(Entry { account: *account, cents: theirs - mine });\n        \
         }\n    }\n\n    fixes\n}\n",
    );
    ws.write("src/billing/ledger.rs", ledger);
    // A few pages of short sections saying "ledger snapshot" again and again.
    for i in 0..8 {
        let mut page = format!("# Ledger snapshots, part {i}\n\n");
        for s in 0..4 {
            page.push_str(&format!(
                "## Ledger snapshot {s}\n\nThe ledger snapshot is a copy of the ledger. Each ledger \
                 snapshot names the ledger it came from; a ledger snapshot is kept for {s} days.\n\n"
            ));
        }
        ws.write(&format!("docs/ledger/snapshots{i}.md"), page);
    }
    for i in 0..60 {
        ws.write(
            &format!("docs/guide/page{i}.md"),
            format!(
                "# Guide {i}\n\n## Setup\n\nInstall the tools and run the nightly build.\n\n\
                 ## Operations\n\nWatch the dashboards for drift; reconcile the alerts weekly.\n"
            ),
        );
    }
    // Other languages, as decoys.
    for i in 0..25 {
        ws.write(
            &format!("tools/py/job{i}.py"),
            format!(
                "def run_{i}(queue):\n    \"\"\"Print the nightly queue.\"\"\"\n    print(queue)\n"
            ),
        );
        ws.write(
            &format!("web/src/view{i}.ts"),
            format!(
                "/** Show the list of replicas. */\nexport function view{i}() {{\n  return [];\n}}\n"
            ),
        );
    }
    ws.write("README.md", "# Books\n\nA small accounting system.\n");
    ws
}

#[test]
fn a_chunk_holding_every_query_word_outranks_chunks_repeating_two() {
    let ws = ledger_corpus();
    let files = sync(&ws)["status"]["files"].as_u64().unwrap();
    assert!((290..=320).contains(&files), "{files}");
    let query_text = "reconcile ledger drift nightly snapshot";
    let hits = query(&ws, &["-k", "3", query_text]);
    assert_eq!(
        hits[0]["path"],
        "src/billing/ledger.rs",
        "{:?}",
        paths(&hits)
    );
    // The passage is the function with its doc comment, cut at item boundaries.
    let text = hits[0]["text"].as_str().unwrap();
    assert!(text.contains("/// Reconcile the ledger"), "{text}");
    assert!(text.contains("pub fn reconcile_ledger_drift("), "{text}");
    let first = text.lines().next().unwrap().trim_start();
    assert!(
        ["///", "//!", "#[", "pub ", "use "]
            .iter()
            .any(|p| first.starts_with(p)),
        "a chunk starts at an item: {text}"
    );
    // The planner's tool ranks the same way.
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Knowledge",
            "--agent",
            "planner",
            "--json",
            "--input",
            &json!({ "query": query_text, "k": 3 }).to_string(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let out = r.json()["output"].as_str().unwrap().to_string();
    assert!(out.starts_with("## src/billing/ledger.rs:"), "{out}");
}

#[test]
fn identifiers_are_searched_by_their_words() {
    let ws = Workspace::new();
    ws.write(
        "web/src/books.ts",
        "export function reconcileLedgerDrift(books: Book[]): number {\n  return books.length;\n}\n",
    );
    ws.write(
        "tools/books.py",
        "def reconcile_ledger_drift(books):\n    return len(books)\n",
    );
    ws.write(
        "src/Books.java",
        "class Books {\n  int parseHTTPLedgerDrift2() { return 0; }\n}\n",
    );
    ws.write("docs/other.md", "# Other\n\nNothing about books here.\n");
    sync(&ws);
    let mut found = paths(&query(&ws, &["ledger drift"]))
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    found.sort();
    assert_eq!(
        found,
        ["src/Books.java", "tools/books.py", "web/src/books.ts"]
    );
    // The whole identifier is still a word of its own.
    assert_eq!(
        query(&ws, &["reconcileLedgerDrift"])[0]["path"],
        "web/src/books.ts"
    );
    assert_eq!(query(&ws, &["http"])[0]["path"], "src/Books.java");
}

/// Set the modification time of `rel` an hour back, as if it were written long before a sync.
fn age(ws: &Workspace, rel: &str) {
    let f = std::fs::File::options()
        .write(true)
        .open(ws.path().join(rel))
        .unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

#[test]
fn a_query_sees_edits_additions_and_deletions_without_a_sync() {
    let ws = corpus();
    age(&ws, "notes/changelog.txt");
    sync(&ws);
    // Once the tree has settled (its stamps older than the file system's clock granularity), a
    // query stats the files it knows and reads no directory unless one moved.
    std::thread::sleep(Duration::from_millis(2200));
    assert!(query(&ws, &["zeppelin"]).is_empty());

    // An edit that keeps the size, just after the index saw the file.
    let before = ws.read("README.md");
    let after = before.replace("small job runner", "small zeppelin00");
    assert_eq!(before.len(), after.len());
    ws.write("README.md", &after);
    assert_eq!(paths(&query(&ws, &["zeppelin00"])), ["README.md"]);

    // An edit that keeps the size and the modification time of a file synced long ago (as a
    // coarse clock would): its change time still differs.
    let path = ws.path().join("notes/changelog.txt");
    let old = std::fs::metadata(&path).unwrap().modified().unwrap();
    let before = ws.read("notes/changelog.txt");
    let after = before.replacen("heartbeats", "zeppelin12", 1);
    assert_eq!(before.len(), after.len());
    ws.write("notes/changelog.txt", &after);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    assert_eq!(paths(&query(&ws, &["zeppelin12"])), ["notes/changelog.txt"]);

    // A file added in a new nested directory, and one added beside old ones.
    ws.write(
        "docs/new/deeper/still/airships.md",
        "# Airships\n\nA zeppelin2 floats.\n",
    );
    ws.write("docs/blimps.md", "# Blimps\n\nA zeppelin3 floats too.\n");
    assert_eq!(
        paths(&query(&ws, &["zeppelin2"])),
        ["docs/new/deeper/still/airships.md"]
    );
    assert_eq!(paths(&query(&ws, &["zeppelin3"])), ["docs/blimps.md"]);

    // Deletions, of a file and of a whole directory.
    std::fs::remove_file(ws.path().join("src/retry.c")).unwrap();
    std::fs::remove_dir_all(ws.path().join("docs/new")).unwrap();
    assert!(query(&ws, &["unsigned"]).is_empty());
    assert!(query(&ws, &["zeppelin2"]).is_empty());
    let s = run(&ws, &["knowledge", "status", "--json"]).json();
    assert_eq!(s["files"], 6, "{s}");
}

/// The first format of `.rawko/knowledge.db`, as rawko wrote it before stat stamps and
/// identifier words.
const FORMAT_1: &str = "
CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE files(path TEXT PRIMARY KEY, hash TEXT NOT NULL, size INTEGER NOT NULL, kind TEXT NOT NULL);
CREATE TABLE chunks(id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
    end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX chunks_by_path ON chunks(path);
CREATE INDEX chunks_by_hash ON chunks(hash);
CREATE VIRTUAL TABLE chunks_fts USING fts5(text, path, content='chunks', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER chunks_added AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts(rowid, text, path) VALUES (new.id, new.text, new.path);
END;
CREATE TRIGGER chunks_removed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_fts(chunks_fts, rowid, text, path) VALUES ('delete', old.id, old.text, old.path);
END;
CREATE TABLE embeddings(hash TEXT NOT NULL, model TEXT NOT NULL, vector BLOB NOT NULL,
    PRIMARY KEY(hash, model)) WITHOUT ROWID;
";

#[test]
fn an_index_of_the_first_format_is_upgraded_saying_so_and_keeps_its_embeddings() {
    let ws = corpus();
    std::fs::create_dir(ws.path().join(".rawko")).unwrap();
    let db = ws.path().join(".rawko/knowledge.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        c.execute_batch(FORMAT_1).unwrap();
        c.pragma_update(None, "user_version", 1).unwrap();
        c.execute_batch(
            "INSERT INTO meta VALUES ('state', 'complete'), ('last_sync', '2026-01-01T00:00:00Z');
             INSERT INTO files VALUES ('old.md', 'h', 9, 'markdown');
             INSERT INTO chunks(path, start_line, end_line, hash, text) VALUES ('old.md', 1, 1, 'h', 'ghostword');
             INSERT INTO embeddings VALUES ('h', 'embed/model', x'0000803f');",
        )
        .unwrap();
    }
    let r = run(&ws, &["knowledge", "query", "--json", "heartbeats"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(
            "knowledge: upgrading .rawko/knowledge.db from format 1 to 2: every file is indexed again (embeddings are kept)"
        ),
        "{r:?}"
    );
    assert_eq!(r.json()["hits"][0]["path"], "notes/changelog.txt", "{r:?}");
    assert!(query(&ws, &["ghostword"]).is_empty());
    let r = run(&ws, &["knowledge", "status", "--json"]);
    assert!(!r.stderr.contains("upgrading"), "{r:?}");
    let s = r.json();
    assert_eq!(s["files"], 6, "{s}");
    assert_eq!(s["embeddings"], json!([["embed/model", 1]]), "{s}");
}
