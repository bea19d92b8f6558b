//! Agents written for other tools, through the real binary: Claude Code's `.claude/agents/`
//! found in the workspace, and an agent's own model sent to its provider.

use crate::support::model_server::{ModelServer, anthropic};
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
