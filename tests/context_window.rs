//! Long tasks stay inside the model's context window, and a task's token budget holds, through
//! the real binary against scripted model servers.

use crate::support::model_server::{ModelServer, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

/// An agent that reads, with room for a long run.
const READER: &str = "name: reader\nwhenToUse: Reads.\nsystemPrompt: You read files.\n\
tools:\n  allowed: [Read]\ntransitions: {onSuccess: done}\nlimits:\n  maxIterations: 400\n  \
timeout: 600000\n";

fn config(ws: &Workspace, main: &ModelServer, extra: &str) {
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(user.join("agents")).unwrap();
    std::fs::write(user.join("agents/reader.yaml"), READER).unwrap();
    std::fs::write(
        user.join("config.yaml"),
        format!(
            "adapters:\n  main:\n    plugin: openai\n    model: m\n    base_url: {}\n    \
             api_key_env: TEST_KEY\n    allow_private_network: true\n    context_window: 16000\n\
             {extra}defaults:\n  adapter: main\n",
            main.base_url()
        ),
    )
    .unwrap();
}

fn run(ws: &Workspace, args: &[&str]) -> Run {
    Run::of(
        rawko(ws)
            .env("TEST_KEY", TEST_KEY)
            .env("NO_COLOR", "1")
            .args(args)
            .output()
            .unwrap(),
    )
}

/// 300 iterations, each reading a 20 KB file, against a 16,000-token window: every request
/// stays inside the window, the older part is summarised by the configured summariser, and the
/// task finishes.
#[test]
fn a_300_step_run_with_20_kb_results_stays_inside_the_window() {
    let ws = Workspace::new();
    let line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLM\n";
    ws.write("big.txt", line.repeat(20_000 / line.len()));
    let main = ModelServer::start();
    for i in 0..300 {
        main.push(openai::tool_call(
            &format!("c{i}"),
            "Read",
            &serde_json::json!({"path": "big.txt"}),
        ));
    }
    main.push(openai::tool_call(
        "done",
        "finish",
        &serde_json::json!({"status": "success", "summary": "Read it 300 times."}),
    ));
    let summariser = ModelServer::start();
    summariser.repeat(openai::text(
        "SUMMARY-MARKER: the agent has been reading big.txt over and over.",
        100,
        20,
    ));
    config(
        &ws,
        &main,
        &format!(
            "  summ:\n    plugin: openai\n    model: s\n    base_url: {}\n    api_key_env: \
             TEST_KEY\n    allow_private_network: true\ncontext:\n  summariser: summ\n",
            summariser.base_url()
        ),
    );
    let r = run(
        &ws,
        &[
            "run",
            "--json",
            "--no-stream",
            "--agent",
            "reader",
            "Read big.txt 300 times.",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");

    let requests = main.received();
    assert_eq!(requests.len(), 301);
    let largest = requests.iter().map(|q| q.body.len()).max().unwrap();
    let summaries = summariser.received().len();
    let with_summary = requests
        .iter()
        .filter(|q| String::from_utf8_lossy(&q.body).contains("SUMMARY-MARKER"))
        .count();
    eprintln!(
        "largest request {largest} bytes (~{} tokens) of a 16000-token window; {summaries} \
         summaries; {with_summary} requests carried one",
        largest / 4
    );
    assert!(
        largest / 4 <= 16_000,
        "a request of {largest} bytes passed the window"
    );
    assert!((1..300).contains(&summaries), "{summaries} summaries");
    assert!(with_summary > 0, "no request carried the summary");
    // The last request (the finish) carries the latest summary and the task.
    let last = String::from_utf8_lossy(&requests.last().unwrap().body).into_owned();
    assert!(last.contains("Read big.txt 300 times.") && last.contains("SUMMARY-MARKER"));

    // The compactions are in the task's audit log; the full history stays in the store.
    let tasks = run(&ws, &["tasks", "list", "--json"]).json();
    let id = tasks[0]["id"].as_str().unwrap().to_string();
    let shown = run(&ws, &["tasks", "show", &id, "--json"]).json();
    let compactions = shown["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["capability"] == "context")
        .count();
    assert_eq!(compactions, summaries, "{shown}");
    let reads = shown["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["tool"] == "Read")
        .count();
    assert_eq!(reads, 300);
}

/// A task's token budget interrupts it (exit 75, resumable) with a message that says what to
/// change; raised, `rawko resume` finishes it.
#[test]
fn the_task_token_budget_interrupts_and_resume_continues() {
    let ws = Workspace::new();
    ws.write("a.txt", "hello\n");
    let main = ModelServer::start();
    for i in 0..6 {
        main.push(openai::tool_call(
            &format!("c{i}"),
            "Read",
            &serde_json::json!({"path": "a.txt"}),
        ));
    }
    main.push(openai::tool_call(
        "done",
        "finish",
        &serde_json::json!({"status": "success", "summary": "Read."}),
    ));
    // Each scripted call reports 30 tokens.
    config(&ws, &main, "");
    let cfg = ws.config_home().join("rawko/config.yaml");
    let base = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, format!("{base}  limits:\n    maxTokens: 100\n")).unwrap();
    let r = run(
        &ws,
        &["run", "--no-stream", "--agent", "reader", "Read a.txt."],
    );
    assert_eq!(r.code, 75, "{r:?}");
    assert!(
        r.stdout.contains("maxTokens") || r.stderr.contains("maxTokens"),
        "{r:?}"
    );
    assert_eq!(
        main.received().len(),
        4,
        "the budget stopped the fifth request"
    );

    std::fs::write(&cfg, format!("{base}  limits:\n    maxTokens: 100000\n")).unwrap();
    let tasks = run(&ws, &["tasks", "list", "--json"]).json();
    let id = tasks[0]["id"].as_str().unwrap().to_string();
    assert_eq!(tasks[0]["status"], "interrupted");
    let r = run(&ws, &["resume", &id, "--no-stream"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(main.received().len(), 7);
}
