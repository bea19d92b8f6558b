//! `rawko init` and `rawko agents list | show | validate` through the real binary.

use crate::support::{Workspace, agent_fixtures, copy_dir, run};

/// A workspace whose `.rawko/agents/` holds the reference example of every dialect.
fn with_fixtures() -> Workspace {
    let ws = Workspace::new();
    copy_dir(&agent_fixtures(), &ws.path().join(".rawko/agents"));
    ws
}

#[test]
fn init_creates_config_and_agents_then_refuses_to_overwrite() {
    let ws = Workspace::new();
    let r = run(&ws, &["init"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("created .rawko/config.yaml"), "{r:?}");
    assert!(
        r.stdout.contains("created .rawko/agents/planner.yaml"),
        "{r:?}"
    );
    for f in ["planner", "developer", "tester", "reviewer", "debugger"] {
        let text = ws.read(&format!(".rawko/agents/{f}.yaml"));
        assert!(
            text.starts_with("# yaml-language-server: $schema=schema/rawko-agent.schema.json\n")
        );
    }
    // The schema the agents point at is there too, so editors find it.
    let schema: serde_json::Value =
        serde_json::from_str(&ws.read(".rawko/agents/schema/rawko-agent.schema.json")).unwrap();
    assert_eq!(schema["title"], "rawko agent");
    let config = ws.read(".rawko/config.yaml");
    rawko_config::Config::parse(std::path::Path::new("c"), &config).unwrap();

    // The copies now win over the built-ins.
    let r = run(&ws, &["agents", "list", "-v"]);
    assert_eq!(r.code, 0, "{r:?}");
    let planner = r
        .stdout
        .lines()
        .find(|l| l.starts_with("planner "))
        .unwrap();
    assert!(
        planner.contains("workspace") && planner.contains(".rawko/agents/planner.yaml"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("shadows <builtin>/planner.yaml (builtin)"),
        "{r:?}"
    );

    // A second init changes nothing without --force.
    ws.write(".rawko/agents/planner.yaml", "# mine\n");
    let r = run(&ws, &["init"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains(".rawko/config.yaml"), "{r:?}");
    assert!(r.stderr.contains("use --force to overwrite"), "{r:?}");
    assert_eq!(ws.read(".rawko/agents/planner.yaml"), "# mine\n");

    let r = run(&ws, &["init", "--force"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("replaced .rawko/agents/planner.yaml"),
        "{r:?}"
    );
    assert_ne!(ws.read(".rawko/agents/planner.yaml"), "# mine\n");
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn list_shows_every_dialect_and_json() {
    let ws = with_fixtures();
    let r = run(&ws, &["agents", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    let by_name = |n: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|e| e["name"] == n)
            .unwrap_or_else(|| panic!("{n} missing: {list:#}"))
            .clone()
    };
    for (name, dialect) in [
        ("planner", "rawko-yaml"),
        ("developer", "rawko-markdown"),
        ("pr_review_agent", "kodelet"),
        ("csharp-analyzer", "docloom"),
        ("code-finder", "claude-code"),
        ("tester", "rawko-yaml"),
    ] {
        let e = by_name(name);
        assert_eq!(e["dialect"], dialect, "{e:#}");
        assert_eq!(e["status"], "ok", "{e:#}");
    }
    assert_eq!(by_name("planner")["origin"], "workspace");
    assert_eq!(by_name("planner")["can_write"], false);
    assert_eq!(by_name("planner")["shadows"][0]["origin"], "builtin");
    assert_eq!(by_name("reviewer")["origin"], "builtin");
    assert_eq!(
        by_name("csharp-analyzer")["file"],
        ".rawko/agents/csharp-analyzer/agent.agent.yaml"
    );
}

#[test]
fn user_agents_sit_between_workspace_and_builtins() {
    let ws = Workspace::new();
    ws.write(
        ".test-config/rawko/agents/tester.md",
        "---\nname: tester\ndescription: The user's own tester.\ntools: Read, Bash\n---\nTest it.\n",
    );
    let r = run(&ws, &["agents", "show", "tester", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["file"]["origin"], "user");
    assert_eq!(v["shadows"][0]["file"], "<builtin>/tester.yaml");
    assert_eq!(v["agent"]["description"], "The user's own tester.");
}

#[test]
fn show_reports_the_detected_dialect_and_the_model() {
    let ws = with_fixtures();
    let r = run(&ws, &["agents", "show", "pr_review_agent"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("dialect:       kodelet"), "{r:?}");
    assert!(
        r.stdout.contains(
            "model:         provider openai, model o3, max_tokens 16000, reasoning_effort high"
        ),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("bash allows:   git * | npm test | make lint"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("You are a meticulous pull request reviewer."),
        "{r:?}"
    );

    let r = run(&ws, &["agents", "show", "csharp-analyzer", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v = r.json();
    assert_eq!(v["agent"]["source"]["dialect"], "docloom");
    assert_eq!(v["agent"]["command_tools"].as_array().unwrap().len(), 5);
    assert_eq!(v["agent"]["command_tools"][0]["args"][1], "${SOURCE_PATH}");
    assert_eq!(v["agent"]["parameters"][0]["type"], "string");

    let r = run(&ws, &["agents", "show", "planer"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("no agent named 'planer' (did you mean 'planner'?)"),
        "{r:?}"
    );
}

#[test]
fn show_gives_the_sandbox_mode_and_network_the_agent_gets() {
    let ws = Workspace::new();
    let r = run(&ws, &["agents", "show", "developer"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("\nsandbox:       workspace-write\n"),
        "{r:?}"
    );
    assert!(r.stdout.contains("\nnetwork:       off\n"), "{r:?}");
    let r = run(&ws, &["agents", "show", "planner", "--json"]);
    let v = r.json();
    assert_eq!(v["sandbox"], "read-only");
    assert_eq!(v["network"], false);
    assert_eq!(v["agent"]["sandbox"], "read-only");

    // The user's own agent may run without the kernel sandbox, and show says so.
    ws.write(
        ".test-config/rawko/agents/free.yaml",
        "name: free\nsystemPrompt: p\ntransitions: {onSuccess: done}\nsandbox: full\nnetwork: on\n",
    );
    let r = run(&ws, &["agents", "show", "free"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("\nsandbox:       full (no kernel sandbox)\n"),
        "{r:?}"
    );
    assert!(r.stdout.contains("\nnetwork:       on\n"), "{r:?}");
    let v = run(&ws, &["agents", "show", "free", "--json"]).json();
    assert_eq!(
        (&v["sandbox"], &v["network"]),
        (&"full".into(), &true.into())
    );
}

/// The attacker's case: a repository brings an agent asking for no sandbox and the network.
#[test]
fn a_workspace_agent_asking_for_full_is_warned_and_held_to_the_workspace_trust() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/greedy.yaml",
        "name: greedy\nsystemPrompt: p\ntools:\n  allowed: [Read, Bash]\ntransitions: {onSuccess: done}\nsandbox: full\nnetwork: on\n",
    );
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 0, "a warning is not a failure: {r:?}");
    assert!(
        r.stdout.contains(
            ".rawko/agents/greedy.yaml:6:10: warning: a workspace agent cannot have 'sandbox: full': it will run in workspace-write"
        ),
        "{r:?}"
    );

    let r = run(&ws, &["agents", "show", "greedy"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout
            .contains("\nsandbox:       read-only (asks for full; the workspace is not trusted)\n"),
        "{r:?}"
    );
    assert!(
        r.stdout
            .contains("\nnetwork:       off (asks for on; the workspace is not trusted)\n"),
        "{r:?}"
    );
    let v = run(&ws, &["agents", "show", "greedy", "--json"]).json();
    assert_eq!(v["sandbox"], "read-only");
    assert_eq!(v["network"], false);

    let r = run(&ws, &["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&ws, &["agents", "show", "greedy"]);
    assert!(
        r.stdout.contains(
            "\nsandbox:       workspace-write (asks for full; full is only for your own agents)\n"
        ),
        "{r:?}"
    );
    assert!(r.stdout.contains("\nnetwork:       on\n"), "{r:?}");
    let v = run(&ws, &["agents", "show", "greedy", "--json"]).json();
    assert_eq!(v["sandbox"], "workspace-write");
    assert_eq!(v["network"], true);
}

#[test]
fn validate_reports_every_problem_with_its_line_and_fails() {
    let ws = Workspace::new();
    ws.write(
        "agents/planner.yaml",
        "name: planner\nsystemPrompt: |\n  Plan.\ntools:\n  allowed: [Read]\ntransitions:\n  onSuccess: developr\nlimits:\n  maxIterations: 0\n\n\n    \ntool: [Grep]\n",
    );
    ws.write(
        "agents/ok.md",
        "---\nname: ok\ndescription: fine\n---\nFine.\n",
    );
    let r = run(&ws, &["agents", "validate", "agents"]);
    assert_eq!(r.code, 1, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert!(
        lines.contains(&"agents/planner.yaml:13:1: unknown field 'tool' (did you mean 'tools'?)"),
        "{r:?}"
    );
    assert!(
        lines.contains(&"agents/planner.yaml:9:18: 'maxIterations' must be a whole number from 1 to 10000, found 0"),
        "{r:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("agents/planner.yaml:7:14:")
                && l.contains("did you mean 'developer'?")),
        "{r:?}"
    );
    assert_eq!(
        lines.last(),
        Some(&"2 agent file(s) checked: 3 error(s), 0 warning(s)"),
        "{r:?}"
    );

    let r = run(&ws, &["agents", "validate", "agents/ok.md", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["ok"], true);

    // The transition to a built-in agent is fine once the typo is fixed.
    ws.write(
        "agents/planner.yaml",
        "name: planner\nsystemPrompt: Plan.\ntransitions:\n  onSuccess: developer\n",
    );
    let r = run(&ws, &["agents", "validate", "agents"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.ends_with("2 agent file(s) checked: all valid\n"),
        "{r:?}"
    );
}

#[test]
fn validate_survives_hostile_files() {
    let ws = Workspace::new();
    let line = "# padding padding padding padding padding padding padding padding\n";
    ws.write("h/huge.yaml", line.repeat(10 * 1024 * 1024 / line.len()));
    let mut bomb = String::from(
        "name: bomb\nsystemPrompt: p\ntransitions: {onSuccess: done}\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n",
    );
    for i in 1..12 {
        let p = i - 1;
        bomb.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    ws.write("h/bomb.yaml", bomb);
    ws.write("h/deep.yaml", format!("x: {}", "[".repeat(100_000)));
    ws.write(
        "h/garbage.md",
        (0..=255u8).cycle().take(50_000).collect::<Vec<u8>>(),
    );
    ws.write("h/tabs.yaml", "name: t\ntools:\n\tallowed: [Read]\n");
    ws.write("h/unclosed.md", "---\nname: u\ndescription: never closed\n");
    ws.write("h/empty.yaml", "");
    ws.write(
        "h/path.yaml",
        "name: ../../escape\nsystemPrompt: p\ntransitions: {onSuccess: done}\n",
    );
    ws.write(
        "h/dup.yaml",
        "name: a\nname: b\nsystemPrompt: p\ntransitions: {onSuccess: done}\n",
    );
    let r = run(&ws, &["agents", "validate", "h", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let v = r.json();
    let diags = v["diagnostics"].as_array().unwrap();
    let about = |file: &str, want: &str| {
        assert!(
            diags.iter().any(|d| d["file"] == format!("h/{file}")
                && d["message"].as_str().unwrap().contains(want)),
            "no {want:?} for {file}: {v:#}"
        );
    };
    about("huge.yaml", "an agent definition may be at most");
    about("bomb.yaml", "expands to more than");
    about("deep.yaml", "nested too deeply");
    about("garbage.md", "not a text file");
    about("tabs.yaml", "invalid YAML");
    about("unclosed.md", "never closed");
    about("empty.yaml", "the file is empty");
    about("path.yaml", "contains a path separator");
    about("dup.yaml", "duplicate key 'name'");
    assert_eq!(v["files"].as_array().unwrap().len(), 9);
}

#[test]
fn a_broken_workspace_agent_is_listed_as_invalid_not_replaced() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/planner.yaml",
        "name: planner\nsystemPrompt: [\n",
    );
    let r = run(&ws, &["agents", "list"]);
    assert_eq!(r.code, 0, "{r:?}");
    let planner = r
        .stdout
        .lines()
        .find(|l| l.starts_with("planner "))
        .unwrap();
    assert!(
        planner.contains("invalid") && planner.contains("workspace"),
        "{r:?}"
    );
    assert!(r.stderr.contains("run `rawko agents validate`"), "{r:?}");
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stdout.contains(".rawko/agents/planner.yaml:"), "{r:?}");
}

#[test]
fn validating_a_file_on_the_search_path_reports_it_once() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/bad.yaml",
        "name: bad\nsystemPrompt: p\ntransitions: {onSuccess: done}\ncolour: red\n",
    );
    let r = run(&ws, &["agents", "validate", ".rawko/agents/bad.yaml"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(
        r.stdout,
        ".rawko/agents/bad.yaml:4:1: unknown field 'colour' (the agent takes: name, displayName, whenToUse, systemPrompt, adapter, tools, transitions, limits, sandbox, network, outputSchema, acp, cli)\n1 agent file(s) checked: 1 error(s), 0 warning(s)\n"
    );
}

#[test]
fn escape_sequences_in_agent_files_never_reach_the_terminal() {
    let ws = Workspace::new();
    // A double-quoted YAML string may hold any control character.
    ws.write(
        ".rawko/agents/evil.yaml",
        "name: \"evil\\e]0;owned\\a\"\nsystemPrompt: \"Hi\\e[2J\"\ntransitions: {onSuccess: done}\n",
    );
    ws.write(
        ".rawko/agents/sly.md",
        "---\nname: sly\ndescription: \"clear\\e[2J\"\n---\nHello \u{1b}[31mred\n",
    );
    for args in [
        &["agents", "list", "-v"][..],
        &["agents", "validate"],
        &["agents", "show", "sly"],
    ] {
        let r = run(&ws, args);
        for (what, text) in [("stdout", &r.stdout), ("stderr", &r.stderr)] {
            assert!(
                !text.contains('\u{1b}') && !text.contains('\u{7}'),
                "{args:?} {what}: {text:?}"
            );
        }
    }
    let r = run(&ws, &["agents", "show", "sly"]);
    assert!(r.stdout.contains("Hello \\u{1b}[31mred"), "{r:?}");
}

/// An agent allowed every tool is shown with the tools a run offers it, the same list
/// `rawko tools list --agent` gives, not `["*"]`.
#[test]
fn agents_show_lists_the_tools_of_an_agent_allowed_every_tool() {
    let ws = Workspace::new();
    ws.write(
        ".test-config/rawko/agents/anything.md",
        "---\nname: anything\ndescription: Does anything.\n---\nDo what is asked.\n",
    );
    let r = run(&ws, &["tools", "list", "--agent", "anything", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let offered: Vec<serde_json::Value> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].clone())
        .collect();
    for t in ["Read", "Write", "Bash", "Git"] {
        assert!(offered.contains(&t.into()), "{offered:?}");
    }
    let v = run(&ws, &["agents", "show", "anything", "--json"]).json();
    assert_eq!(
        v["tools_effective"],
        serde_json::Value::Array(offered),
        "{v:#}"
    );
}
