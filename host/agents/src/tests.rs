//! Every dialect against its reference example, and hostile files against the loader.

use std::path::Path;

use rawko_capability::Mode;
use rawko_config::Trust;

use super::catalogue::catalogue;
use super::model::{
    AgentOrigin, Dialect, FINISH, ParamType, Provider, ReasoningEffort, Target, builtin_tools,
    read_tools, write_tools,
};
use super::{FileInfo, Loaded, load_file, load_text};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/agents");

fn load(rel: &str, text: &str) -> Loaded {
    load_from(AgentOrigin::File, rel, text)
}

fn load_from(origin: AgentOrigin, rel: &str, text: &str) -> Loaded {
    load_text(
        text,
        FileInfo {
            path: Path::new(rel),
            display: rel,
            origin,
        },
    )
}

fn fixture(rel: &str) -> Loaded {
    let path = Path::new(FIXTURES).join(rel);
    load_file(&path, rel, AgentOrigin::File)
}

fn messages(l: &Loaded) -> Vec<String> {
    l.diagnostics.iter().map(|d| d.to_string()).collect()
}

/// The file loads with no problem at all.
fn clean(l: Loaded) -> std::sync::Arc<super::Agent> {
    assert!(l.diagnostics.is_empty(), "{:#?}", messages(&l));
    l.agent.expect("an agent")
}

/// The file does not load, and one message contains `want`; returns all messages.
fn broken(l: &Loaded, want: &str) -> Vec<String> {
    let m = messages(l);
    assert!(l.agent.is_none(), "expected no agent: {m:#?}");
    assert!(l.has_errors(), "{m:#?}");
    assert!(
        m.iter().any(|x| x.contains(want)),
        "no message contains {want:?}: {m:#?}"
    );
    m
}

#[test]
fn rawko_yaml_planner_round_trips() {
    let a = clean(fixture("planner.yaml"));
    assert_eq!(a.source.dialect, Dialect::RawkoYaml);
    assert_eq!(a.name, "planner");
    assert_eq!(a.display_name.as_deref(), Some("Planner"));
    assert_eq!(
        a.when_to_use.as_deref(),
        Some("Use first, to turn the task into a step-by-step plan.")
    );
    assert_eq!(
        a.system_prompt,
        "You are a planner. Read the relevant code and write a numbered plan.\nDo not modify files."
    );
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(&["Read", "Glob", "Grep", "LS"].map(String::from)[..])
    );
    assert_eq!(a.tools.blocked, ["Write", "Edit", "Bash"]);
    assert!(!a.can_write(), "the planner is read-only");
    assert_eq!(a.transitions.on_success, Target::Agent("developer".into()));
    assert_eq!(a.transitions.on_failure, Some(Target::Failed));
    assert_eq!(a.transitions.on_max_iterations, Some(Target::Escalated));
    assert_eq!(a.limits.max_iterations, Some(15));
    assert_eq!(a.limits.timeout_ms, Some(300_000));
    assert_eq!(a.model.adapter, None);
    assert_eq!(a.source.spans.on_success.line, 11);
}

#[test]
fn rawko_markdown_developer_round_trips() {
    let a = clean(fixture("developer.md"));
    assert_eq!(a.source.dialect, Dialect::RawkoMarkdown);
    assert_eq!(a.name, "developer");
    assert_eq!(
        a.system_prompt,
        "You are a developer. Implement the plan, one step at a time.\n\n```sh\n## this is inside a code block, not a heading\ncargo test\n```\n\n### Style\nMatch the surrounding code."
    );
    assert!(a.can_write());
    assert_eq!(
        a.bash.allowed_commands.as_deref(),
        Some(&["cargo build", "cargo test *", "git diff"].map(String::from)[..])
    );
    assert_eq!(a.bash.blocked_patterns, ["rm\\s+-rf", "\\bgit\\s+push\\b"]);
    assert_eq!(a.transitions.on_success, Target::Agent("tester".into()));
    assert_eq!(
        a.transitions.on_failure,
        Some(Target::Agent("debugger".into()))
    );
    assert_eq!(a.transitions.on_max_iterations, None);
    assert_eq!(a.limits.timeout_ms, Some(1_200_000));
    // Positions are file lines, not frontmatter lines.
    assert_eq!(a.source.spans.on_success.line, 11);
}

#[test]
fn kodelet_pr_review_agent_round_trips() {
    let a = clean(fixture("pr_review_agent.md"));
    assert_eq!(a.source.dialect, Dialect::Kodelet);
    // No name in the file: it is named after the file.
    assert_eq!(a.name, "pr_review_agent");
    assert_eq!(
        a.description.as_deref(),
        Some("Reviews pull requests for correctness, style and test coverage.")
    );
    assert_eq!(a.model.provider, Some(Provider::OpenAi));
    assert_eq!(a.model.model.as_deref(), Some("o3"));
    assert_eq!(a.model.reasoning_effort, Some(ReasoningEffort::High));
    assert_eq!(a.model.max_tokens, Some(16000));
    assert_eq!(
        a.model.base_url.as_deref(),
        Some("https://api.openai.com/v1")
    );
    assert_eq!(a.model.api_key_env_var.as_deref(), Some("OPENAI_API_KEY"));
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(&["Read", "Grep", "Glob", "Bash"].map(String::from)[..])
    );
    assert_eq!(
        a.bash.allowed_commands.as_deref(),
        Some(&["git *", "npm test", "make lint"].map(String::from)[..])
    );
    assert!(
        a.system_prompt
            .starts_with("You are a meticulous pull request reviewer.")
    );
    assert_eq!(a.transitions.on_success, Target::Done);
}

#[test]
fn kodelet_commands_may_be_a_yaml_list() {
    let a = clean(load(
        "k.md",
        "---\nname: k\nmax_tokens: 100\nallowed_commands:\n  - git *\n  - npm test\n---\nBody\n",
    ));
    assert_eq!(
        a.bash.allowed_commands.as_deref(),
        Some(&["git *", "npm test"].map(String::from)[..])
    );
    assert_eq!(a.tools.allowed, None, "no allowed_tools means every tool");
}

#[test]
fn docloom_csharp_analyzer_round_trips() {
    let a = clean(fixture("csharp-analyzer/agent.agent.yaml"));
    assert_eq!(a.source.dialect, Dialect::Docloom);
    assert_eq!(a.name, "csharp-analyzer");
    assert_eq!(
        a.description.as_deref(),
        Some("Analyzes C# repositories for architecture and code quality")
    );
    let names: Vec<&str> = a.command_tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "summarize_readme",
            "list_projects",
            "get_dependencies",
            "get_api_surface",
            "get_file_content"
        ]
    );
    for t in &a.command_tools[..4] {
        assert_eq!(t.command, "docloom-agent-csharp");
        assert_eq!(t.args, [t.name.as_str(), "${SOURCE_PATH}"]);
        assert_eq!(t.placeholders(), ["SOURCE_PATH"]);
    }
    assert_eq!(
        a.command_tools[4].args,
        ["get_file_content", "${FILE_PATH}"]
    );
    assert_eq!(a.parameters.len(), 2);
    assert_eq!(a.parameters[0].name, "source_path");
    assert_eq!(a.parameters[0].kind, ParamType::String);
    assert!(a.parameters[0].required);
    assert!(!a.parameters[1].required);
    // The agent may call exactly its command tools.
    assert!(a.may_call("get_api_surface"));
    assert!(!a.may_call("Write"));
    assert!(
        a.system_prompt
            .contains("- list_projects: Lists the .csproj")
    );
}

#[test]
fn docloom_legacy_runner_becomes_analyze_with_a_warning() {
    let l = load(
        "old/agent.agent.yaml",
        "apiVersion: docloom.io/v1alpha1\nkind: Agent\nmetadata:\n  name: old\n  description: d\nspec:\n  runner:\n    command: /opt/agent\n    args: [\"${SOURCE_PATH}\", \"${OUTPUT_PATH}\"]\n",
    );
    let m = messages(&l);
    let a = l.agent.expect("loads");
    assert_eq!(a.command_tools.len(), 1);
    assert_eq!(a.command_tools[0].name, "analyze");
    assert_eq!(
        a.command_tools[0].args,
        ["${SOURCE_PATH}", "${OUTPUT_PATH}"]
    );
    assert_eq!(m.len(), 1);
    assert!(
        m[0].starts_with("old/agent.agent.yaml:7:3: warning: 'spec.runner' is deprecated"),
        "{m:?}"
    );
}

#[test]
fn claude_code_subagent_round_trips() {
    let a = clean(fixture("code-finder.md"));
    assert_eq!(a.source.dialect, Dialect::ClaudeCode);
    assert_eq!(a.name, "code-finder");
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(&["Read", "Grep", "Glob"].map(String::from)[..])
    );
    assert_eq!(a.model.provider, Some(Provider::Anthropic));
    assert_eq!(a.model.model.as_deref(), Some("sonnet"));
    assert!(!a.can_write());
    assert!(a.system_prompt.starts_with("You find code."));
}

#[test]
fn claude_code_bash_permissions_and_inherit() {
    let a = clean(load(
        "c.md",
        "---\nname: c\ndescription: d\ntools: Read, Bash(git diff:*), Bash(npm test)\nmodel: inherit\n---\nBody\n",
    ));
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(&["Read", "Bash"].map(String::from)[..])
    );
    assert_eq!(
        a.bash.allowed_commands.as_deref(),
        Some(&["git diff *", "npm test"].map(String::from)[..])
    );
    assert_eq!(a.model, Default::default());
}

#[test]
fn built_in_agents_are_valid_and_chain_to_done() {
    let files = super::builtin::load();
    assert_eq!(files.len(), 7);
    for f in &files {
        assert!(
            f.diagnostics.is_empty(),
            "{}: {:#?}",
            f.display,
            messages(f)
        );
    }
    let get = |n: &str| {
        files
            .iter()
            .find(|f| f.name == n)
            .unwrap()
            .agent
            .clone()
            .unwrap()
    };
    assert!(!get("planner").can_write());
    for (name, mode) in [
        ("pm", Mode::ReadOnly),
        ("researcher", Mode::ReadOnly),
        ("planner", Mode::ReadOnly),
        ("reviewer", Mode::ReadOnly),
        ("developer", Mode::WorkspaceWrite),
        ("tester", Mode::WorkspaceWrite),
        ("debugger", Mode::WorkspaceWrite),
    ] {
        let a = get(name);
        assert_eq!(a.sandbox, Some(mode), "{name}");
        assert_eq!(a.sandbox_mode(Trust::Untrusted), mode, "{name}");
        assert!(
            !a.network_allowed(Trust::Trusted),
            "{name}: no built-in agent needs the network"
        );
    }
    for writer in ["developer", "debugger"] {
        assert!(get(writer).may_call("Edit"));
    }
    for reader in ["tester", "reviewer"] {
        assert!(!get(reader).may_call("Edit") && !get(reader).may_call("Write"));
    }
    // The read-only roles need no shell: they read the repository through the Git tool.
    for reader in ["pm", "researcher", "planner", "reviewer"] {
        let a = get(reader);
        assert!(!a.can_write(), "{reader}");
        assert!(!a.may_call("Bash"), "{reader} has a shell");
        assert!(a.may_call("Git") && a.may_call("Read"), "{reader}");
    }
    // pm and researcher start a task and hand it to the planner; the debugger is reached from
    // the tester and hands back to the tester (fixed) or the developer (not).
    for start in ["pm", "researcher"] {
        assert_eq!(
            get(start).transitions.on_success,
            Target::Agent("planner".into()),
            "{start}"
        );
    }
    assert_eq!(
        get("debugger").transitions.on_success,
        Target::Agent("tester".into())
    );
    assert_eq!(
        get("debugger").transitions.on_failure,
        Some(Target::Agent("developer".into()))
    );
    let mut at = "planner".to_string();
    let mut path = vec![at.clone()];
    while let Target::Agent(next) = &get(&at).transitions.on_success {
        at = next.clone();
        path.push(at.clone());
    }
    assert_eq!(path, ["planner", "developer", "tester", "reviewer"]);
    assert_eq!(get("reviewer").transitions.on_success, Target::Done);
    assert_eq!(
        get("tester").transitions.on_failure,
        Some(Target::Agent("debugger".into()))
    );
    assert_eq!(
        get("reviewer").transitions.on_failure,
        Some(Target::Agent("developer".into()))
    );
}

// ---- sandbox and network ----

#[test]
fn sandbox_and_network_in_rawko_yaml_and_markdown() {
    let a = clean(load(
        "s.yaml",
        "name: s\nsystemPrompt: p\ntransitions: {onSuccess: done}\nsandbox: read-only\nnetwork: on\n",
    ));
    assert_eq!(a.sandbox, Some(Mode::ReadOnly));
    assert!(a.network);
    assert_eq!(a.source.spans.sandbox.line, 4);
    let a = clean(load(
        "s.md",
        "---\nname: s\nsandbox: workspace-write\nnetwork: off\ntransitions:\n  onSuccess: done\n---\nBody\n",
    ));
    assert_eq!(a.source.dialect, Dialect::RawkoMarkdown);
    assert_eq!(a.sandbox, Some(Mode::WorkspaceWrite));
    assert!(!a.network);
    for (text, want) in [("true", true), ("false", false), ("\"on\"", true)] {
        let a = clean(load(
            "n.yaml",
            &format!(
                "name: n\nsystemPrompt: p\ntransitions: {{onSuccess: done}}\nnetwork: {text}\n"
            ),
        ));
        assert_eq!(a.network, want, "{text}");
    }
    let a = clean(load(
        "u.yaml",
        "name: u\nsystemPrompt: p\ntransitions: {onSuccess: done}\nsandbox: full\n",
    ));
    assert_eq!(a.sandbox, Some(Mode::Full));
    let a = clean(load(
        "d.yaml",
        "name: d\nsystemPrompt: p\ntransitions: {onSuccess: done}\n",
    ));
    assert_eq!((a.sandbox, a.network), (None, false), "unset by default");
}

#[test]
fn unknown_sandbox_and_network_values_are_errors_with_a_hint() {
    let head = "name: s\nsystemPrompt: p\ntransitions: {onSuccess: done}\n";
    let cases = [
        (
            "sandbox: readonly\n",
            "s.yaml:4:10: unknown sandbox mode 'readonly' (did you mean 'read-only'?)",
        ),
        (
            "sandbox: none\n",
            "s.yaml:4:10: unknown sandbox mode 'none' (one of: read-only, workspace-write, full)",
        ),
        (
            "sandbox: true\n",
            "s.yaml:4:10: 'sandbox' must be read-only, workspace-write, full, found true/false",
        ),
        (
            "network: yes\n",
            "s.yaml:4:10: 'network' must be on or off, found 'yes' (write 'network: on' or 'network: off')",
        ),
        (
            "network: 1\n",
            "s.yaml:4:10: 'network' must be on or off, found a number (write 'network: on' or 'network: off')",
        ),
        (
            "sandbox: [full]\n",
            "s.yaml:4:10: 'sandbox' must be read-only, workspace-write, full, found a list",
        ),
    ];
    for (tail, want) in cases {
        let m = broken(&load("s.yaml", &format!("{head}{tail}")), want);
        assert_eq!(m, [want]);
    }
    // In Markdown the position is the file's line, not the frontmatter's.
    let m = broken(
        &load(
            "s.md",
            "---\nname: s\nsandbox: workspace_write\ntransitions:\n  onSuccess: done\n---\nBody\n",
        ),
        "s.md:3:10: unknown sandbox mode 'workspace_write' (did you mean 'workspace-write'?)",
    );
    assert_eq!(m.len(), 1, "{m:#?}");
}

#[test]
fn a_workspace_agent_asking_for_full_is_warned_and_does_not_get_it() {
    let text = "name: w\nsystemPrompt: p\ntools:\n  allowed: [Read, Bash]\ntransitions: {onSuccess: done}\nsandbox: full\nnetwork: on\n";
    let l = load_from(AgentOrigin::Workspace, ".rawko/agents/w.yaml", text);
    let m = messages(&l);
    assert_eq!(
        m,
        [
            ".rawko/agents/w.yaml:6:10: warning: a workspace agent cannot have 'sandbox: full': it will run in workspace-write, and read-only while the workspace is not trusted (full (no kernel sandbox) is only for your own agents, in $XDG_CONFIG_HOME/rawko/agents)"
        ]
    );
    assert!(!l.has_errors());
    let a = l.agent.expect("a warning leaves the agent usable");
    assert_eq!(a.sandbox_mode(Trust::Trusted), Mode::WorkspaceWrite);
    assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::ReadOnly);
    assert!(a.network_allowed(Trust::Trusted));
    assert!(
        !a.network_allowed(Trust::Untrusted),
        "network: on from an untrusted workspace is ignored"
    );

    // One that may not write would run read-only, and says so.
    let ro = text.replace("[Read, Bash]", "[Read]");
    let l = load_from(AgentOrigin::Workspace, ".rawko/agents/w.yaml", &ro);
    assert_eq!(
        messages(&l),
        [
            ".rawko/agents/w.yaml:6:10: warning: a workspace agent cannot have 'sandbox: full': it will run in read-only (full (no kernel sandbox) is only for your own agents, in $XDG_CONFIG_HOME/rawko/agents)"
        ]
    );
    assert_eq!(
        l.agent.unwrap().sandbox_mode(Trust::Trusted),
        Mode::ReadOnly
    );

    // The user's own agent may have it, without a word.
    let a = clean(load_from(AgentOrigin::User, "w.yaml", text));
    assert_eq!(a.sandbox_mode(Trust::Untrusted), Mode::Full);
}

#[test]
fn foreign_dialects_leave_sandbox_and_network_unset() {
    let l = load(
        "c.md",
        "---\nname: c\ndescription: d\nsandbox: full\nnetwork: on\n---\nBody\n",
    );
    let a = l.agent.clone().expect("loads");
    assert_eq!(a.source.dialect, Dialect::ClaudeCode);
    assert_eq!((a.sandbox, a.network), (None, false));
    assert!(
        messages(&l)
            .iter()
            .any(|m| m.contains("warning: unknown field 'sandbox'")),
        "{:#?}",
        messages(&l)
    );
    let l = load(
        "k.md",
        "---\nname: k\nmax_tokens: 10\nsandbox: full\nnetwork: on\n---\nBody\n",
    );
    let a = l.agent.clone().expect("loads");
    assert_eq!(a.source.dialect, Dialect::Kodelet);
    assert_eq!((a.sandbox, a.network), (None, false));
    for rel in [
        "pr_review_agent.md",
        "code-finder.md",
        "csharp-analyzer/agent.agent.yaml",
    ] {
        let a = clean(fixture(rel));
        assert_eq!((a.sandbox, a.network), (None, false), "{rel}");
    }
}

// ---- hostile and broken files ----

#[test]
fn invalid_yaml_points_at_the_spot() {
    let l = load(
        "bad.yaml",
        "name: a\nsystemPrompt: [unclosed\ntransitions: {}\n",
    );
    let m = broken(&l, "invalid YAML");
    assert!(m[0].starts_with("bad.yaml:"), "{m:?}");
}

#[test]
fn tabs_are_refused_with_a_hint() {
    let l = load("t.yaml", "name: a\ntools:\n\tallowed: [Read]\n");
    broken(&l, "indent with spaces");
}

#[test]
fn unclosed_frontmatter() {
    let l = load(
        "u.md",
        "---\nname: a\ndescription: b\nThe prompt, but no closing fence.\n",
    );
    let m = broken(&l, "never closed");
    assert!(m[0].starts_with("u.md:1:1:"), "{m:?}");
}

#[test]
fn duplicate_keys() {
    let l = load(
        "d.yaml",
        "name: a\nsystemPrompt: p\ntransitions: {onSuccess: done}\nname: b\n",
    );
    let m = broken(&l, "duplicate key 'name'");
    assert!(m[0].starts_with("d.yaml:4:1:"), "{m:?}");
}

#[test]
fn wrong_types_and_unknown_fields_all_at_once() {
    let l = load(
        "agents/planner.yaml",
        "name: planner\nsystemPrompt: p\ntools:\n  allowed: Read\n  bashfilter: {}\ntransitions:\n  onSuccess: done\nlimits:\n  maxIterations: many\n  timeout: -5\n    \ntool: x\n",
    );
    let m = broken(&l, "unknown field 'tool' (did you mean 'tools'?)");
    assert!(
        m.contains(
            &"agents/planner.yaml:12:1: unknown field 'tool' (did you mean 'tools'?)".to_string()
        ),
        "{m:#?}"
    );
    assert!(m.contains(&"agents/planner.yaml:4:12: 'allowed' must be a list, found text (write it as a list: [Read])".to_string()), "{m:#?}");
    assert!(
        m.contains(
            &"agents/planner.yaml:5:3: unknown field 'bashfilter' (did you mean 'bashFilter'?)"
                .to_string()
        ),
        "{m:#?}"
    );
    assert!(
        m.iter()
            .any(|x| x
                .starts_with("agents/planner.yaml:9:18: 'maxIterations' must be a whole number")),
        "{m:#?}"
    );
    assert!(
        m.iter()
            .any(|x| x.starts_with("agents/planner.yaml:10:12: 'timeout' must be a whole number")),
        "{m:#?}"
    );
    assert_eq!(m.len(), 5, "{m:#?}");
}

#[test]
fn unknown_fields_are_warnings_in_foreign_dialects() {
    let l = load(
        "k.md",
        "---\nname: k\nmax_tokens: 10\ntemperature: 0.2\n---\nBody\n",
    );
    let m = messages(&l);
    assert!(l.agent.is_some(), "{m:?}");
    assert_eq!(
        m,
        ["k.md:4:1: warning: unknown field 'temperature' (rawko does not use it; ignored)"]
    );
}

#[test]
fn missing_required_fields_per_dialect() {
    let m = broken(
        &load("r.yaml", "name: r\n"),
        "missing required field 'systemPrompt'",
    );
    assert!(
        m.iter()
            .any(|x| x.contains("missing required field 'transitions'")),
        "{m:?}"
    );
    let m = broken(
        &load(
            "r.yaml",
            "name: r\nsystemPrompt: p\ntransitions:\n  onFailure: failed\n",
        ),
        "missing required field 'onSuccess'",
    );
    assert!(m[0].starts_with("r.yaml:4:3:"), "{m:?}");
    // kodelet defaults max_tokens (4096), and provider and model come from the user's config.
    let k = clean(load("k.md", "---\nprovider: openai\n---\nBody\n"));
    assert_eq!(k.model.max_tokens, Some(4096));
    let k = clean(load(
        "k.md",
        "---\nname: k\ndescription: d\nreasoning_effort: high\nallowed_tools: [file_read]\n---\nBody\n",
    ));
    assert_eq!((k.model.provider, k.model.model.as_deref()), (None, None));
    assert_eq!(k.model.max_tokens, Some(4096));
    broken(
        &load(
            "d.yaml",
            "apiVersion: docloom.io/v1alpha1\nkind: Agent\nmetadata: {name: d}\nspec: {tools: []}\n",
        ),
        "missing required field 'description'",
    );
}

#[test]
fn provider_specific_rules() {
    let m = broken(
        &load(
            "k.md",
            "---\nname: k\nprovider: anthropic\nmax_tokens: 8000\nreasoning_effort: high\n---\nBody\n",
        ),
        "reasoning_effort applies to provider openai only (for anthropic use thinking_budget)",
    );
    assert!(m[0].starts_with("k.md:5:19:"), "{m:?}");
    broken(
        &load(
            "k.md",
            "---\nname: k\nprovider: anthropic\nmax_tokens: 8000\nthinking_budget: 9000\n---\nBody\n",
        ),
        "thinking_budget (9000) must be less than max_tokens (8000)",
    );
    broken(
        &load(
            "k.md",
            "---\nname: k\nprovider: openia\nmax_tokens: 8000\n---\nBody\n",
        ),
        "unknown provider 'openia' (did you mean 'openai'?)",
    );
    broken(
        &load(
            "k.md",
            "---\nname: k\nprovider: openai\nmax_tokens: 0\n---\nBody\n",
        ),
        "'max_tokens' must be a whole number from 1",
    );
    broken(
        &load(
            "k.md",
            "---\nname: k\nprovider: openai\nmax_tokens: 10\nopenai: {api_key_env_var: sk-abc123}\n---\nBody\n",
        ),
        "is not an environment variable name",
    );
}

#[test]
fn empty_files() {
    broken(&load("e.yaml", ""), "the file is empty");
    broken(
        &load("e.yaml", "  \n# just a comment\n"),
        "the file is empty",
    );
    broken(&load("e.md", ""), "the file is empty");
    broken(
        &load("e.md", "---\n---\nBody\n"),
        "the frontmatter is empty",
    );
    broken(
        &load("e.md", "---\nname: e\nmax_tokens: 5\n---\n\n"),
        "no system prompt",
    );
}

#[test]
fn binary_garbage() {
    let mut bytes = b"name: x\n".to_vec();
    bytes.extend((0..=255u8).cycle().take(4096));
    let l = super::load_bytes(
        &bytes,
        FileInfo {
            path: Path::new("g.yaml"),
            display: "g.yaml",
            origin: AgentOrigin::File,
        },
    );
    let m = broken(&l, "not a text file");
    assert!(m[0].starts_with("g.yaml:2:1:"), "{m:?}");
    let nul = load("n.yaml", "name: a\0b\n");
    broken(&nul, "not a text file");
}

#[test]
fn a_ten_megabyte_file_is_refused_before_it_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let line = "# padding padding padding padding padding padding padding padding\n";
    std::fs::write(&path, line.repeat(10 * 1024 * 1024 / line.len() + 1)).unwrap();
    let l = load_file(&path, "huge.yaml", AgentOrigin::File);
    let m = broken(&l, "an agent definition may be at most 262144");
    assert!(m[0].starts_with("huge.yaml:1:1: the file is 104"), "{m:?}");
}

#[test]
fn an_alias_bomb_is_refused() {
    let mut text = String::from(
        "name: bomb\nsystemPrompt: p\ntransitions: {onSuccess: done}\nx0: &x0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n",
    );
    for i in 1..10 {
        let p = i - 1;
        text.push_str(&format!(
            "x{i}: &x{i} [*x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}, *x{p}]\n"
        ));
    }
    broken(
        &load("bomb.yaml", &text),
        "expands to more than 100000 values",
    );
}

#[test]
fn deeply_nested_yaml_is_refused() {
    let text = format!(
        "name: deep\nsystemPrompt: p\ntransitions: {{onSuccess: done}}\nx: {}{}\n",
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    broken(&load("deep.yaml", &text), "nested too deeply");
}

#[test]
fn names_with_path_separators_are_refused_in_every_dialect() {
    broken(
        &load(
            "p.yaml",
            "name: ../../etc/passwd\nsystemPrompt: p\ntransitions: {onSuccess: done}\n",
        ),
        "agent name '../../etc/passwd' contains a path separator",
    );
    broken(
        &load("p.md", "---\nname: a/b\ndescription: d\n---\nBody\n"),
        "contains a path separator",
    );
    broken(
        &load(
            "p.yaml",
            "apiVersion: docloom.io/v1alpha1\nkind: Agent\nmetadata: {name: 'x\\y', description: d}\nspec: {tools: []}\n",
        ),
        "contains a path separator",
    );
}

#[test]
fn the_system_prompt_may_not_be_given_twice() {
    broken(
        &load(
            "t.md",
            "---\nname: t\nsystemPrompt: one\ntransitions: {onSuccess: done}\n---\n## System Prompt\ntwo\n",
        ),
        "the system prompt is given twice",
    );
}

#[test]
fn bad_transition_targets_and_regexes() {
    let l = load(
        "t.yaml",
        "name: t\nsystemPrompt: p\ntools:\n  allowed: [Bash]\n  bashFilter:\n    blockedPatterns: ['rm (-rf']\ntransitions:\n  onSuccess: dnoe/x\n",
    );
    let m = broken(
        &l,
        "blocked pattern 'rm (-rf' is not a valid regular expression",
    );
    assert!(m.iter().any(|x| x.starts_with("t.yaml:8:14: 'onSuccess' target 'dnoe/x' is not an agent name")), "{m:#?}");
}

#[test]
fn an_invalid_output_schema_is_an_error() {
    broken(
        &load(
            "o.yaml",
            "name: o\nsystemPrompt: p\ntransitions: {onSuccess: done}\noutputSchema:\n  type: 12\n",
        ),
        "'outputSchema' is not a valid JSON Schema",
    );
}

#[test]
fn a_fifo_is_not_read() {
    #[cfg(unix)]
    {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.yaml");
        let status = std::process::Command::new("mkfifo").arg(&fifo).status();
        if matches!(status, Ok(s) if s.success()) {
            broken(
                &load_file(&fifo, "f.yaml", AgentOrigin::File),
                "not a regular file",
            );
        }
    }
}

// ---- the committed schema ----

#[test]
fn the_committed_schema_is_current() {
    let generated = super::rawko::schema_json();
    let committed = super::builtin::SCHEMA.text;
    if generated != committed {
        if std::env::var_os("RAWKO_UPDATE_SCHEMA").is_some() {
            let path = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../agents")
                .join(super::rawko::SCHEMA_PATH);
            std::fs::write(&path, &generated).unwrap();
            panic!("rewrote {}; rebuild and rerun", path.display());
        }
        panic!(
            "agents/{} is stale: rerun this test with RAWKO_UPDATE_SCHEMA=1 to regenerate it",
            super::rawko::SCHEMA_PATH
        );
    }
}

#[test]
fn the_schema_knows_exactly_the_keys_the_decoder_reads() {
    let schema: serde_json::Value = serde_json::from_str(&super::rawko::schema_json()).unwrap();
    let props = |v: &serde_json::Value| -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        k.sort();
        k
    };
    let defs = &schema["definitions"];
    let def_of = |name: &str| {
        defs.get(name)
            .unwrap_or_else(|| panic!("no definition {name}: {schema:#}"))
    };
    for (section, keys) in super::rawko::KEYS {
        let v = match *section {
            "" => &schema,
            "tools" => def_of("ToolsSection"),
            "bashFilter" => def_of("BashFilterSection"),
            "transitions" => def_of("TransitionsSection"),
            "limits" => def_of("LimitsSection"),
            "acp" | "cli" => def_of("ExternalSection"),
            other => panic!("{other}"),
        };
        let mut want: Vec<String> = keys.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(props(v), want, "section {section:?}");
        assert_eq!(v["additionalProperties"], false, "section {section:?}");
    }
}

#[test]
fn the_schema_accepts_the_built_ins_and_rejects_what_the_loader_rejects() {
    let schema: serde_json::Value = serde_json::from_str(super::builtin::SCHEMA.text).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let as_json = |text: &str| -> serde_json::Value { yaml_serde::from_str(text).unwrap() };
    for f in super::builtin::AGENTS {
        let v = as_json(f.text);
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", f.name);
    }
    let planner = std::fs::read_to_string(Path::new(FIXTURES).join("planner.yaml")).unwrap();
    assert!(validator.is_valid(&as_json(&planner)));
    for good in [
        "sandbox: full\nnetwork: on\n",
        "sandbox: read-only\nnetwork: false\n",
    ] {
        let text = format!("{planner}{good}");
        assert!(
            validator.is_valid(&as_json(&text)),
            "schema refused:\n{text}"
        );
        assert!(load("planner.yaml", &text).agent.is_some(), "{text}");
    }
    for bad in [
        planner.replace("tools:", "tool:"),
        planner.replace("maxIterations: 15", "maxIterations: 0"),
        planner.replace("  onSuccess: developer\n", ""),
        planner.replace("name: planner", "name: ../planner"),
        format!("{planner}sandbox: readonly\n"),
        format!("{planner}network: yes\n"),
    ] {
        assert!(
            !validator.is_valid(&as_json(&bad)),
            "schema accepted:\n{bad}"
        );
        assert!(
            load("planner.yaml", &bad).agent.is_none(),
            "loader accepted:\n{bad}"
        );
    }
}

#[test]
fn the_schema_names_exactly_the_sandbox_modes() {
    let schema: serde_json::Value = serde_json::from_str(&super::rawko::schema_json()).unwrap();
    let names: Vec<&str> = schema["definitions"]["SandboxSetting"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["const"].as_str().unwrap())
        .collect();
    assert_eq!(names, Mode::ALL.map(Mode::as_str));
}

/// A Claude Code subagent as they are shared: a one-line description holding ': ' (not valid
/// YAML), a description continued on unindented lines, a dotted name, tools rawko lacks or
/// names otherwise, an MCP tool, and `disallowedTools`. It loads as Claude Code loads it, and
/// every liberty taken is a warning.
#[test]
fn a_claude_agent_as_shared_in_the_wild_loads_with_warnings() {
    let l = fixture("claude-wild/code.reviewer.md");
    let m = messages(&l);
    let a = l.agent.clone().unwrap_or_else(|| panic!("{m:#?}"));
    assert!(!l.has_errors(), "{m:#?}");
    assert_eq!(a.name, "code-reviewer");
    assert_eq!(l.dialect, Some(Dialect::ClaudeCode));
    let d = a.description.as_deref().unwrap();
    assert!(
        d.starts_with("Use this agent after writing code. Examples:"),
        "{d}"
    );
    assert!(d.ends_with("and reports what to fix."), "{d}");
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(&["Read", "Grep", "Glob", "mcp__github__get_pull_request"].map(String::from)[..])
    );
    assert_eq!(a.tools.blocked, ["Write"]);
    assert!(!a.may_call("Write"));
    assert_eq!(a.bash.blocked_patterns, [r"^\s*rm(\s|$)"]);
    assert_eq!(a.model.model.as_deref(), Some("haiku"));
    for want in [
        "not valid YAML",
        "read line by line as Claude Code reads it: name, description, tools, disallowedTools, model, color",
        "agent name 'code.reviewer' has dots",
        "rawko has no 'WebFetch' tool",
        "rawko has no 'TodoWrite' tool",
        "Claude Code's 'NotebookRead' is 'Read' in rawko",
        "'mcp__github__get_pull_request' is a tool of the MCP server 'github'",
    ] {
        assert!(m.iter().any(|x| x.contains(want)), "no {want:?} in {m:#?}");
    }
}

#[test]
fn claude_unknown_tools_are_named_and_invalid_frontmatter_in_other_dialects_is_an_error() {
    let l = load(
        "x.md",
        "---\nname: x\ndescription: d\ntools: Read, Frobnicate\n---\nBody\n",
    );
    let m = messages(&l);
    assert!(l.agent.is_some(), "{m:#?}");
    assert!(
        m.iter()
            .any(|x| x.contains("'Frobnicate' is not a rawko tool")),
        "{m:#?}"
    );
    // A rawko Markdown file gets no such leniency.
    let l = load(
        "y.md",
        "---\nname: y\nwhenToUse: a: b: c\ntransitions: {onSuccess: done}\n---\nBody\n",
    );
    broken(&l, "mapping values are not allowed");
}

/// A DocLoom agent as DocLoom writes them today: `apiVersion: v1`, parameters typed `boolean`
/// and `integer`, a parameter name with `-`.
#[test]
fn a_docloom_v1_agent_with_typed_and_dashed_parameters_loads() {
    let a = clean(fixture("go-linter/agent.agent.yaml"));
    assert_eq!(a.name, "go-linter");
    let kinds: Vec<(&str, ParamType)> = a
        .parameters
        .iter()
        .map(|p| (p.name.as_str(), p.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("fix-issues", ParamType::Bool),
            ("max_issues", ParamType::Int)
        ]
    );
    assert_eq!(a.command_tools[0].name, "run-lint");
    let l = load(
        "d.yaml",
        "apiVersion: docloom.io/v2\nkind: Agent\nmetadata: {name: d, description: d}\nspec: {tools: []}\n",
    );
    broken(&l, "unsupported apiVersion 'docloom.io/v2'");
}

/// A GitHub Copilot custom agent as Copilot's docs write them: a display name, Copilot's tool
/// aliases, an MCP tool as `server/tool`, a model by its display name.
#[test]
fn a_copilot_custom_agent_loads_into_the_agent_model() {
    let path = Path::new(FIXTURES).join(".github/agents/security-reviewer.agent.md");
    let l = load_file(&path, "security-reviewer.agent.md", AgentOrigin::File);
    let m = messages(&l);
    let a = l.agent.clone().unwrap_or_else(|| panic!("{m:#?}"));
    assert_eq!(a.source.dialect, Dialect::Copilot);
    // Copilot calls it by its file; `name` is its title.
    assert_eq!(a.name, "security-reviewer");
    assert_eq!(a.display_name.as_deref(), Some("Security Reviewer"));
    assert_eq!(
        a.tools.allowed.as_deref(),
        Some(
            &[
                "Read",
                "LS",
                "Grep",
                "Glob",
                "mcp__github__get_pull_request"
            ]
            .map(String::from)[..]
        )
    );
    assert!(!a.can_write());
    assert_eq!(a.model.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(a.system_prompt.starts_with("You are a security reviewer."));
    for want in [
        "rawko has no tool for Copilot's 'web'",
        "'playwright/*' means every tool of the MCP server 'playwright'",
    ] {
        assert!(m.iter().any(|x| x.contains(want)), "no {want:?} in {m:#?}");
    }
    assert!(!m.iter().any(|x| x.contains("agent name")), "{m:#?}");
}

/// Copilot, opencode and kodelet's recipes call an agent by its file; a `name` that is a title
/// is shown, not mangled into a name. Only a file name that is no name either is made one.
#[test]
fn agents_called_by_their_file_keep_their_name_as_a_title() {
    let load_at = |rel: &str, text: &str| {
        let path = Path::new("/w").join(rel);
        load_text(
            text,
            FileInfo {
                path: &path,
                display: rel,
                origin: AgentOrigin::File,
            },
        )
    };
    for (rel, text, name, title, dialect) in [
        (
            ".github/agents/backend-developer.agent.md",
            "---\nname: Backend Developer (后端开发者)\ndescription: d\n---\nBuild.\n",
            "backend-developer",
            Some("Backend Developer (后端开发者)"),
            Dialect::Copilot,
        ),
        (
            ".github/agents/Code Reviewer.agent.md",
            "---\nname: Code Reviewer\ndescription: d\n---\nReview.\n",
            "code-reviewer",
            Some("Code Reviewer"),
            Dialect::Copilot,
        ),
        (
            ".opencode/agents/writer.md",
            "---\nname: writer\ndescription: d\n---\nWrite.\n",
            "writer",
            None,
            Dialect::Opencode,
        ),
        // A recipe, by where it is (no field only kodelet has).
        (
            ".kodelet/recipes/github/issue.md",
            "---\nname: GitHub Issue Resolver\ndescription: d\n---\nResolve {{.issue_url}}.\n",
            "issue",
            Some("GitHub Issue Resolver"),
            Dialect::Kodelet,
        ),
        // A recipe, by its fields, even where `name` would do as a name.
        (
            ".rawko/agents/commit.md",
            "---\nname: Commit\ndescription: d\narguments:\n  scope:\n    description: s\n---\nCommit.\n",
            "commit",
            Some("Commit"),
            Dialect::Kodelet,
        ),
        // Any other kodelet file keeps a `name` that is a name, and falls back when it is not.
        (
            ".rawko/agents/review.md",
            "---\nname: pr_review\nprovider: openai\n---\nReview.\n",
            "pr_review",
            None,
            Dialect::Kodelet,
        ),
        (
            ".rawko/agents/review.md",
            "---\nname: PR Review\nprovider: openai\n---\nReview.\n",
            "review",
            Some("PR Review"),
            Dialect::Kodelet,
        ),
    ] {
        let l = load_at(rel, text);
        let m = messages(&l);
        let a = l.agent.clone().unwrap_or_else(|| panic!("{rel}: {m:#?}"));
        assert_eq!(a.source.dialect, dialect, "{rel}");
        assert_eq!(
            (a.name.as_str(), a.display_name.as_deref()),
            (name, title),
            "{rel}"
        );
        let renamed = m
            .iter()
            .any(|x| x.contains("nor 'name' is a valid agent name"));
        assert_eq!(renamed, rel.contains(' '), "{rel}: {m:#?}");
    }
    // A broken file claims the name its decoder would have given it.
    let l = load_at(
        ".github/agents/backend.agent.md",
        "---\nname: Backend (后端)\ndescription: [a, {b: c}]\n---\nx\n",
    );
    assert!(l.has_errors(), "{:#?}", messages(&l));
    assert_eq!(l.name, "backend");
}

/// DocLoom's examples leave a parameter's `type` out: a string, with a warning at the parameter.
#[test]
fn a_docloom_parameter_without_a_type_is_a_string() {
    let l = load(
        "d/agent.agent.yaml",
        "apiVersion: v1\nkind: Agent\nmetadata: {name: d, description: d}\nspec:\n  tools:\n    - {name: t, description: t, command: echo, args: [\"${WORDS}\"]}\n  parameters:\n    - name: WORDS\n      description: w\n",
    );
    let m = messages(&l);
    let a = l.agent.clone().unwrap_or_else(|| panic!("{m:#?}"));
    assert_eq!(a.parameters[0].kind, ParamType::String);
    assert_eq!(
        m,
        [
            "d/agent.agent.yaml:8:7: warning: parameter 'WORDS' has no 'type'; it is a string (add 'type: string' (or integer, boolean))"
        ]
    );
    // A type that is written must still be one.
    broken(
        &load(
            "d/agent.agent.yaml",
            "apiVersion: v1\nkind: Agent\nmetadata: {name: d, description: d}\nspec:\n  tools: []\n  parameters:\n    - {name: W, description: w, type: [string]}\n",
        ),
        "'type'",
    );
}

/// kodelet fills a recipe's arguments into its body; rawko says it sends the body as written.
#[test]
fn a_kodelet_recipes_arguments_are_named_in_a_warning() {
    let l = load(
        "intro.md",
        "---\nname: Personal Introduction\ndescription: d\narguments:\n  name:\n    description: n\n---\nIntroduce {{.name}}.\n",
    );
    let m = messages(&l);
    let a = l.agent.clone().unwrap_or_else(|| panic!("{m:#?}"));
    assert_eq!(a.name, "intro");
    assert!(
        m.iter().any(|x| x.starts_with(
            "intro.md:4:1: warning: kodelet fills a recipe's arguments into its body ({{.name}})"
        )),
        "{m:#?}"
    );
    assert!(!m.iter().any(|x| x.contains("unknown field")), "{m:#?}");
}

/// An opencode agent: the file names it, `provider/model`, tools switched off by name, and
/// permissions: `deny` and `ask` both block (rawko cannot ask there).
#[test]
fn an_opencode_agent_loads_into_the_agent_model() {
    let path = Path::new(FIXTURES).join(".opencode/agent/docs-writer.md");
    let l = load_file(&path, "docs-writer.md", AgentOrigin::File);
    let m = messages(&l);
    let a = l.agent.clone().unwrap_or_else(|| panic!("{m:#?}"));
    assert_eq!(a.source.dialect, Dialect::Opencode);
    assert_eq!(a.name, "docs-writer");
    assert_eq!(a.model.provider, Some(Provider::Anthropic));
    assert_eq!(a.model.model.as_deref(), Some("claude-sonnet-4-20250514"));
    assert_eq!(a.tools.allowed, None);
    assert!(
        a.tools.blocked.contains(&"Bash".to_string()),
        "{:?}",
        a.tools
    );
    assert!(!a.may_call("Bash") && a.may_call("Edit") && a.may_call("Write"));
    assert_eq!(a.bash.blocked_patterns, [r"^\s*git push.*"]);
    assert!(a.system_prompt.starts_with("You are a technical writer."));
}

#[test]
fn external_agents_are_acp_or_cli_with_a_program_and_need_no_prompt() {
    use super::model::External;
    let load = |text: &str| {
        let l = load("x.yaml", text);
        let m = messages(&l);
        (l.agent.map(|a| (*a).clone()), m)
    };
    let (a, p) = load(
        "name: dev\nacp:\n  command: claude-code-acp\n  args: [--verbose]\n  env: [ANTHROPIC_API_KEY]\ntransitions: {onSuccess: done}\n",
    );
    let a = a.unwrap_or_else(|| panic!("{p:?}"));
    assert!(p.is_empty(), "{p:?}");
    let Some(External::Acp(c)) = &a.external else {
        panic!("{a:?}")
    };
    assert_eq!(c.command, "claude-code-acp");
    assert_eq!(c.args, ["--verbose"]);
    assert_eq!(c.env, ["ANTHROPIC_API_KEY"]);
    assert!(a.system_prompt.is_empty());

    let (a, _) = load(
        "name: c\ncli:\n  command: claude\n  args: [-p, \"{prompt}\"]\nsystemPrompt: Be brief.\ntransitions: {onSuccess: done}\n",
    );
    let a = a.unwrap();
    assert!(matches!(&a.external, Some(External::Cli(c)) if c.args == ["-p", "{prompt}"]));
    assert_eq!(a.system_prompt, "Be brief.");

    for (bad, want) in [
        ("name: x\ntransitions: {onSuccess: done}\n", "systemPrompt"),
        (
            "name: x\nacp: {args: [a]}\ntransitions: {onSuccess: done}\n",
            "command",
        ),
        (
            "name: x\nacp: {command: a}\ncli: {command: b}\ntransitions: {onSuccess: done}\n",
            "not both",
        ),
        (
            "name: x\nacp: {command: a, env: [\"A=b\"]}\ntransitions: {onSuccess: done}\n",
            "not an environment variable name",
        ),
        (
            "name: x\nacp: {command: a, cwd: /}\ntransitions: {onSuccess: done}\n",
            "cwd",
        ),
    ] {
        let (a, p) = load(bad);
        assert!(a.is_none(), "{bad}");
        let text = format!("{p:?}");
        assert!(text.contains(want), "{bad}: {text}");
    }
}

#[test]
fn the_lists_of_tool_names_come_from_the_catalogue() {
    assert_eq!(
        builtin_tools(),
        [
            "Read",
            "Write",
            "Edit",
            "Glob",
            "Grep",
            "LS",
            "Bash",
            "Git",
            "Knowledge",
            FINISH
        ]
    );
    assert_eq!(
        read_tools(),
        ["Read", "Glob", "Grep", "LS", "Git", "Knowledge"]
    );
    assert_eq!(write_tools(), ["Write", "Edit", "Bash"]);
    let mut names: Vec<&str> = catalogue().iter().map(|t| t.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), catalogue().len(), "a tool named twice");
}
