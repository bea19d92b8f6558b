//! `rawko demo`: the README's main job, offline and without a key, through the real binary.

use crate::support::{Run, Workspace, rawko};

#[test]
fn the_demo_fixes_the_sample_project_offline() {
    let ws = Workspace::new();
    let r = Run::of(
        rawko(&ws)
            .arg("demo")
            // No key and no network are needed: make sure none is used.
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("HTTPS_PROXY", "http://127.0.0.1:9")
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("is done."), "{r:?}");
    // The run ends with the files the task changed.
    assert!(r.stdout.contains("files changed: src/lib.rs"), "{r:?}");
    // The demo's workspace is gone when it ends: no hint points at its tasks.
    assert!(!r.stdout.contains("tasks show"), "{r:?}");
    assert!(
        r.stdout
            .contains("-    text.split(' ').filter(|w| !w.is_empty()).count()")
            && r.stdout.contains("+    text.split_whitespace().count()"),
        "the diff shows the fix: {r:?}"
    );
    for agent in ["planner", "developer", "tester", "reviewer"] {
        assert!(
            r.stderr.contains(&format!("▶ {agent}")),
            "{agent} ran: {r:?}"
        );
    }
    // A tool's line says what it was about: the file read, the command run.
    assert!(
        r.stderr
            .lines()
            .any(|l| l.contains("✓ Read") && l.ends_with("src/lib.rs"))
            && r.stderr
                .lines()
                .any(|l| l.contains("✓ Bash") && l.contains("cargo test")),
        "{r:?}"
    );
    // A fixed transition says its reason once, not the event twice.
    assert!(
        r.stderr.contains("→ developer (onSuccess after succeeded)")
            && !r.stderr.contains("fixed: onSuccess"),
        "{r:?}"
    );
    assert!(
        r.stderr.contains("Bash"),
        "the tests ran through Bash: {r:?}"
    );
}

#[test]
fn the_demo_emits_json_events() {
    let ws = Workspace::new();
    let r = Run::of(rawko(&ws).args(["demo", "--json"]).output().unwrap());
    assert_eq!(r.code, 0, "{r:?}");
    let events: Vec<serde_json::Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let finished = events.last().unwrap();
    assert_eq!(finished["type"], "task_finished");
    assert_eq!(finished["status"], "done");
    let results: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_result" && e["tool"] == "Bash")
        .collect();
    assert_eq!(results.len(), 2, "developer and tester ran the tests");
    assert!(results.iter().all(|e| e["ok"] == true));
}
