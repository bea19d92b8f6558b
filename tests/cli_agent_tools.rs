//! `rawko tools list --agent` and `rawko tool call --agent`: the tools as a run offers them to
//! one agent, with that agent's capabilities, through the real binary.

use crate::support::{Workspace, run};

fn names(ws: &Workspace, agent: &str) -> Vec<String> {
    let r = run(ws, &["tools", "list", "--agent", agent, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn each_agent_is_offered_only_its_own_tools() {
    let ws = Workspace::new();
    let planner = names(&ws, "planner");
    for t in ["Read", "Glob", "Grep", "LS"] {
        assert!(planner.contains(&t.to_string()), "{planner:?}");
    }
    for t in ["Write", "Edit", "Bash"] {
        assert!(!planner.contains(&t.to_string()), "{planner:?}");
    }
    let developer = names(&ws, "developer");
    for t in ["Write", "Edit", "Bash"] {
        assert!(developer.contains(&t.to_string()), "{developer:?}");
    }
    let r = run(&ws, &["tools", "list", "--agent", "nobody"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no agent named 'nobody'"), "{r:?}");
}

#[test]
fn a_tool_call_gets_exactly_the_agents_capabilities() {
    let ws = Workspace::new();
    let write = r#"{"path": "out.txt", "content": "hi"}"#;
    // The planner may not write: refused before anything runs.
    let r = run(
        &ws,
        &[
            "tool", "call", "Write", "--agent", "planner", "--input", write,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("not available to the planner agent"),
        "{r:?}"
    );
    assert!(!ws.path().join("out.txt").exists());
    // The developer may.
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Write",
            "--agent",
            "developer",
            "--input",
            write,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("out.txt"), "hi");
    // The tester's bash policy allows `cargo test *`, not `rm`.
    ws.write("keep/file", "x");
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Bash",
            "--agent",
            "tester",
            "--json",
            "--input",
            r#"{"command": "rm -rf keep"}"#,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.json()["verdict"].as_str().unwrap().starts_with("denied"),
        "{r:?}"
    );
    assert!(ws.path().join("keep/file").exists());
    // Flags that would widen the agent's grants are refused.
    let r = run(
        &ws,
        &[
            "tool", "call", "Read", "--agent", "planner", "--write", ".", "--input", "{}",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn a_workspace_agent_is_read_only_until_the_workspace_is_trusted() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/helper.yaml",
        "name: helper\nwhenToUse: Helps.\nsystemPrompt: You help.\ntools:\n  allowed: [Read, Write]\n\
         transitions:\n  onSuccess: done\n",
    );
    assert_eq!(names(&ws, "helper"), ["Read"]);
    let write = r#"{"path": "planted.txt", "content": "x"}"#;
    let r = run(
        &ws,
        &[
            "tool", "call", "Write", "--agent", "helper", "--input", write,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("not trusted"), "{r:?}");
    assert!(!ws.path().join("planted.txt").exists());

    let r = run(&ws, &["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(names(&ws, "helper"), ["Read", "Write"]);
    let r = run(
        &ws,
        &[
            "tool", "call", "Write", "--agent", "helper", "--input", write,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(ws.read("planted.txt"), "x");
}

/// An agent that may not write gets the workspace read-only in the sandbox itself: a tool it
/// is allowed that tries to write anyway (a hostile plugin's raw `std::fs::write`) is refused
/// there, whatever the tool's own code does.
#[test]
fn a_read_only_agents_tools_cannot_write_even_when_they_try() {
    let ws = Workspace::new();
    ws.write(
        ".test-config/rawko/agents/looker.yaml",
        "name: looker\nwhenToUse: Looks.\nsystemPrompt: You look.\ntools:\n  allowed: [Read, RawWrite]\n\
         transitions:\n  onSuccess: done\n",
    );
    let target = ws.path().join("planted.txt");
    let input = serde_json::json!({"path": target, "content": "x"}).to_string();
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "RawWrite",
            "--agent",
            "looker",
            "--plugin",
            rawko_test_artifacts::HOSTILE_TOOL,
            "--json",
            "--input",
            &input,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["ok"], false, "{r:?}");
    assert!(
        !target.exists(),
        "a read-only agent's tool wrote {}",
        target.display()
    );
    // The same tool for an agent that may write (it is allowed Write) does write: the refusal
    // above is the agent's grant, not a broken tool.
    ws.write(
        ".test-config/rawko/agents/writer.yaml",
        "name: writer\nwhenToUse: Writes.\nsystemPrompt: You write.\ntools:\n  allowed: [Write, RawWrite]\n\
         transitions:\n  onSuccess: done\n",
    );
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "RawWrite",
            "--agent",
            "writer",
            "--plugin",
            rawko_test_artifacts::HOSTILE_TOOL,
            "--input",
            &input,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
}
