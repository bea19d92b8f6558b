//! Agents written for other tools, through the real binary: Claude Code's `.claude/agents/`
//! found in the workspace, an agent's own model sent to its provider (through the instance's
//! aliases), files named the way their own tools name them (kodelet's recipes, Copilot and
//! opencode agents), and DocLoom parameters as DocLoom's examples write them.

use crate::support::model_server::{ModelServer, anthropic, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko, run};

/// A Claude Code subagent with `model: haiku` asks its provider for the model the alias table
/// maps `haiku` to, not the instance's model; an agent without a model gets the instance's.
#[test]
fn a_claude_agents_model_alias_is_sent_mapped() {
    let ws = Workspace::new();
    ws.write(
        ".claude/agents/quick.md",
        "---\nname: quick\ndescription: Answers quickly.\ntools: Read\nmodel: haiku\n---\nYou answer in one line.\n",
    );
    let server = ModelServer::start();
    server.push(anthropic::tool_use(
        "t1",
        "finish",
        &serde_json::json!({"status": "success", "summary": "done"}),
    ));
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("config.yaml"),
        format!(
            "adapters:\n  anthropic:\n    plugin: anthropic\n    model: claude-instance-model\n    \
             base_url: {}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n\
             model_aliases:\n  haiku: claude-haiku-from-config\ndefaults:\n  adapter: anthropic\n",
            server.base_url()
        ),
    )
    .unwrap();
    // The workspace's Claude agents are the workspace's: trusted here, as the user would.
    let r = run(&ws, &["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args([
                "run",
                "--json",
                "--no-stream",
                "--agent",
                "quick",
                "Say hi.",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let sent = server.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["model"], "claude-haiku-from-config");
}

/// `.claude/agents/` (and its subfolders) are agents of the workspace, listed below
/// `.rawko/agents/`; a name in both is taken from `.rawko/agents/` with a warning.
#[test]
fn claude_agents_directories_are_discovered_below_rawkos_own() {
    let ws = Workspace::new();
    ws.write(
        ".claude/agents/review/security.md",
        "---\nname: security\ndescription: Finds vulnerabilities.\ntools: Read, Grep\n---\nYou audit code.\n",
    );
    ws.write(
        ".claude/agents/helper.md",
        "---\nname: helper\ndescription: Helps.\n---\nYou help.\n",
    );
    ws.write(
        ".rawko/agents/helper.yaml",
        "name: helper\nwhenToUse: Helps.\nsystemPrompt: You help.\ntransitions: {onSuccess: done}\n",
    );
    let r = run(&ws, &["agents", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    let find = |name: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} not listed: {list}"))
    };
    assert_eq!(
        find("security")["file"],
        ".claude/agents/review/security.md"
    );
    assert_eq!(find("security")["origin"], "workspace");
    assert_eq!(find("helper")["file"], ".rawko/agents/helper.yaml");
    let v = run(&ws, &["agents", "validate"]);
    assert_eq!(v.code, 0, "a name defined twice is not an error: {v:?}");
    assert!(
        v.stdout
            .contains("agent 'helper' is also defined in .rawko/agents/helper.yaml")
            || v.stderr
                .contains("agent 'helper' is also defined in .rawko/agents/helper.yaml"),
        "{v:?}"
    );
}

/// A file modelled on those other tools' users write, from `tests/fixtures/foreign/`.
fn foreign(rel: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/foreign")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `rawko agents list --json`'s entry for `name`.
fn listed(ws: &Workspace, name: &str) -> serde_json::Value {
    let r = run(ws, &["agents", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} not listed: {list:#}"))
}

/// kodelet calls a recipe by its file name and shows its `name` as a title ("GitHub Issue
/// Resolver"); rawko refused such files for their names.
#[test]
fn kodelet_recipes_are_named_by_their_file_and_titled_by_their_name() {
    let ws = Workspace::new();
    for f in ["github-issue-resolver.md", "intro.md", "pr-reviewer.md"] {
        ws.write(
            &format!(".rawko/agents/{f}"),
            foreign(&format!("kodelet/{f}")),
        );
    }
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 0, "{r:?}");
    for (name, title) in [
        ("github-issue-resolver", "GitHub Issue Resolver"),
        ("intro", "Personal Introduction"),
        ("pr-reviewer", "PR Reviewer"),
    ] {
        let e = listed(&ws, name);
        assert_eq!(e["dialect"], "kodelet", "{e:#}");
        assert_eq!(e["status"], "ok", "{e:#}");
        assert_eq!(e["display_name"], title, "{e:#}");
        let v = run(&ws, &["agents", "show", name, "--json"]).json();
        assert_eq!(v["agent"]["display_name"], title, "{v:#}");
    }
    let r = run(&ws, &["agents", "show", "github-issue-resolver"]);
    assert!(
        r.stdout
            .contains("\ndisplay name:  GitHub Issue Resolver\n"),
        "{r:?}"
    );

    // In kodelet's own folder a recipe is one even with no field only kodelet has.
    ws.write(
        ".kodelet/recipes/release-note.md",
        "---\nname: Release Note Writer\ndescription: Writes the release note\n---\n\
         Write the release note for the changes since the last tag.\n",
    );
    let r = run(&ws, &["agents", "validate", ".kodelet/recipes", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["errors"], 0, "{r:?}");
}

/// Copilot names an agent by its file (`backend-developer.agent.md`), and so does opencode; a
/// `name` such as "Backend Developer (后端开发者)" is a title, not a name to mangle.
#[test]
fn copilot_and_opencode_agents_are_named_by_their_file_and_titled_by_their_name() {
    let ws = Workspace::new();
    ws.write(
        ".github/agents/backend-developer.agent.md",
        foreign("copilot/backend-developer.agent.md"),
    );
    ws.write(
        ".opencode/agent/docs-writer.md",
        foreign("opencode/docs-writer.md"),
    );
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("agent name"), "{r:?}");
    for (name, dialect, title) in [
        (
            "backend-developer",
            "copilot",
            "Backend Developer (后端开发者)",
        ),
        ("docs-writer", "opencode", "Docs Writer"),
    ] {
        let e = listed(&ws, name);
        assert_eq!(e["dialect"], dialect, "{e:#}");
        assert_eq!(e["status"], "ok", "{e:#}");
        assert_eq!(e["display_name"], title, "{e:#}");
    }
}

/// The user's config with one Anthropic instance (`anthropic`, the model server) and one
/// OpenAI-compatible one (`local`), `default` the default, and `extra` appended.
fn two_adapters(ws: &Workspace, server: &ModelServer, default: &str, extra: &str) {
    let user = ws.config_home().join("rawko");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("config.yaml"),
        format!(
            "adapters:\n  anthropic:\n    plugin: anthropic\n    model: claude-instance-model\n    \
             base_url: {url}\n    api_key_env: TEST_KEY\n    allow_private_network: true\n  \
             local:\n    plugin: openai\n    model: local-model\n    base_url: {url}\n    \
             allow_private_network: true\ndefaults:\n  adapter: {default}\n{extra}",
            url = server.base_url()
        ),
    )
    .unwrap();
}

/// Claude Code's `model: haiku` means Anthropic's current Haiku without any alias in the
/// user's config, and `agents show` says which model the agent gets from which instance.
#[test]
fn a_claude_agents_haiku_needs_no_alias_in_config() {
    let ws = Workspace::new();
    ws.write(
        ".test-config/rawko/agents/quick.md",
        "---\nname: quick\ndescription: Answers quickly.\ntools: Read\nmodel: haiku\n---\nYou answer in one line.\n",
    );
    ws.write(
        ".test-config/rawko/agents/same.md",
        "---\nname: same\ndescription: Whatever the caller uses.\ntools: Read\nmodel: inherit\n---\nYou help.\n",
    );
    let server = ModelServer::start();
    two_adapters(&ws, &server, "local", "");

    let v = run(&ws, &["agents", "show", "quick", "--json"]).json();
    assert_eq!(
        v["model_effective"],
        serde_json::json!({"adapter": "anthropic", "model": "claude-haiku-4-5"}),
        "{v:#}"
    );
    let r = run(&ws, &["agents", "show", "quick"]);
    assert!(
        r.stdout
            .contains("\nmodel used:    claude-haiku-4-5 (adapter anthropic)\n"),
        "{r:?}"
    );
    // `inherit`: the default instance and its own model.
    let v = run(&ws, &["agents", "show", "same", "--json"]).json();
    assert_eq!(
        v["model_effective"],
        serde_json::json!({"adapter": "local", "model": "local-model"}),
        "{v:#}"
    );

    server.push(anthropic::tool_use(
        "t1",
        "finish",
        &serde_json::json!({"status": "success", "summary": "done"}),
    ));
    let r = Run::of(
        rawko(&ws)
            .env("TEST_KEY", TEST_KEY)
            .args([
                "run",
                "--json",
                "--no-stream",
                "--agent",
                "quick",
                "Say hi.",
            ])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let sent = server.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["model"], "claude-haiku-4-5");

    // The user's own alias wins over rawko's.
    two_adapters(
        &ws,
        &server,
        "local",
        "model_aliases:\n  haiku: claude-haiku-pinned\n",
    );
    let v = run(&ws, &["agents", "show", "quick", "--json"]).json();
    assert_eq!(
        v["model_effective"]["model"], "claude-haiku-pinned",
        "{v:#}"
    );
}

/// rawko's Claude aliases belong to its Anthropic adapter: an agent whose model is `sonnet`
/// on an OpenAI-compatible instance keeps the name (that server may know it; it does not know
/// Anthropic's ids).
#[test]
fn claude_aliases_apply_only_on_anthropic_instances() {
    let ws = Workspace::new();
    ws.write(
        ".github/agents/writer.agent.md",
        "---\ndescription: Writes.\nmodel: sonnet\n---\nYou write.\n",
    );
    ws.write(
        ".test-config/rawko/agents/drafter.md",
        "---\ndescription: Drafts.\nprovider: openai\nmodel: sonnet\n---\nYou draft.\n",
    );
    let server = ModelServer::start();
    two_adapters(&ws, &server, "local", "");
    let v = run(&ws, &["agents", "show", "writer", "--json"]).json();
    assert_eq!(
        v["model_effective"],
        serde_json::json!({"adapter": "local", "model": "sonnet"}),
        "{v:#}"
    );
    // kodelet's `provider: openai` is the built-in `openai` instance.
    let v = run(&ws, &["agents", "show", "drafter", "--json"]).json();
    assert_eq!(
        v["model_effective"],
        serde_json::json!({"adapter": "openai", "model": "sonnet"}),
        "{v:#}"
    );

    // And a run asks that instance for the name as written.
    let r = run(&ws, &["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    server.push(openai::tool_call(
        "c1",
        "finish",
        &serde_json::json!({"status": "success", "summary": "done"}),
    ));
    let r = run(
        &ws,
        &[
            "run",
            "--json",
            "--no-stream",
            "--agent",
            "writer",
            "Write.",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let sent = server.received();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].json()["model"], "sonnet");
}

/// DocLoom's own examples leave a parameter's `type` out; it is a string, with a warning.
#[test]
fn a_docloom_parameter_without_a_type_is_a_string() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/spell-check/agent.agent.yaml",
        foreign("docloom/spell-check/agent.agent.yaml"),
    );
    let r = run(&ws, &["agents", "validate"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(
            ".rawko/agents/spell-check/agent.agent.yaml:16:7: warning: parameter 'IGNORE' has no \
             'type'; it is a string"
        ),
        "{r:?}"
    );
    let v = run(&ws, &["agents", "show", "spell-check", "--json"]).json();
    assert_eq!(v["status"], "ok", "{v:#}");
    let params = &v["agent"]["parameters"];
    assert_eq!(params[0]["name"], "IGNORE", "{v:#}");
    assert_eq!(params[0]["type"], "string", "{v:#}");
    assert_eq!(params[1]["type"], "int", "{v:#}");
}
