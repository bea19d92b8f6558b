//! Snapshots of the command-line surface, through the real `rawko` binary: the `--help` of every
//! command, the lists a user reads in a fresh workspace, and the main error messages with their
//! exit codes. The snapshots live in `tests/snapshots/`; after a deliberate change, regenerate them
//! with `INSTA_UPDATE=always cargo test -p rawko --test integration snapshots` and read the diff.
//!
//! Everything that differs between machines is pinned or redacted: the terminal width, colour,
//! the home, data, config and cache directories, API keys in the environment, and the temporary
//! workspace's path.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::support::{Run, Workspace, rawko};

/// Every command and nested subcommand, as typed after `rawko`. `every_subcommand_has_a_help_snapshot`
/// fails when a new one appears without being added here.
const COMMANDS: &[&str] = &[
    "",
    "run",
    "resume",
    "demo",
    "doctor",
    "bench",
    "init",
    "trust",
    "tasks",
    "tasks list",
    "tasks show",
    "store",
    "store export",
    "store import",
    "agents",
    "agents list",
    "agents show",
    "agents validate",
    "agents watch",
    "agents graph",
    "tools",
    "tools list",
    "tool",
    "tool call",
    "adapters",
    "adapters list",
    "adapters check",
    "ask",
    "plugin",
    "plugin install",
    "plugin list",
    "plugin inspect",
    "plugin update",
    "plugin remove",
    "plugin new",
    "plugin pack",
    "plugin publish",
    "plugin keys",
    "plugin keys add",
    "plugin keys list",
    "plugin keys remove",
    "bash",
    "bash check",
    "knowledge",
    "knowledge sync",
    "knowledge status",
    "knowledge query",
    "mcp",
    "mcp serve",
    "acp",
    "ui",
    "worker",
];

/// `rawko` in `ws`, isolated as `support::rawko` does it and with everything else that varies
/// between machines pinned: a private home, no API keys, no colour, a 100-column terminal, and
/// standard input, output and error that are not terminals.
fn cmd(ws: &Workspace) -> Command {
    let home = ws.path().join(".test-home");
    let mut c = rawko(ws);
    c.env("HOME", &home)
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("COLUMNS", "100")
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .env_remove("CLICOLOR")
        .env_remove("RAWKO_SDK")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("OPENAI_API_KEY")
        .env_remove("RAWKO_REGISTRY_USERNAME")
        .env_remove("RAWKO_REGISTRY_PASSWORD")
        .stdin(Stdio::null());
    c
}

/// Run `rawko args...` in `ws` through `cmd`.
fn run(ws: &Workspace, args: &[&str]) -> Run {
    run_with(cmd(ws), args)
}

fn run_with(mut c: Command, args: &[&str]) -> Run {
    Run::of(c.args(args).output().expect("run rawko"))
}

/// `args` as a user would type them, quoted where the shell needs it.
fn command_line(args: &[&str]) -> String {
    let mut line = String::from("rawko");
    for a in args {
        let plain = !a.is_empty()
            && a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:@,+".contains(c));
        if plain {
            line.push(' ');
            line.push_str(a);
        } else {
            line.push_str(&format!(" '{}'", a.replace('\'', r"'\''")));
        }
    }
    line
}

/// What a run printed, in one readable block: the command, the exit code, stdout and stderr.
fn transcript(args: &[&str], r: &Run) -> String {
    let section = |name: &str, text: &str| {
        if text.is_empty() {
            format!("--- {name} (empty)\n")
        } else if text.ends_with('\n') {
            format!("--- {name}\n{text}")
        } else {
            format!("--- {name} (no final newline)\n{text}\n")
        }
    };
    format!(
        "$ {}\nexit: {}\n{}{}",
        command_line(args),
        r.code,
        section("stdout", &r.stdout),
        section("stderr", &r.stderr)
    )
}

/// `text` as a regular expression that matches it literally.
fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if r"\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Filters for everything machine-specific: the workspace (and so the private home and data
/// directories inside it), the shared plugin cache, this checkout, the real home and the system's
/// temporary directory, plus timings.
fn settings(ws: &Workspace) -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    let mut paths: Vec<(String, &str)> = vec![(ws.path().display().to_string(), "[WS]")];
    let target_tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let temp = std::env::temp_dir();
    for (p, name) in [
        (target_tmp.to_path_buf(), "[TARGET_TMP]"),
        (repo, "[REPO]"),
        (temp, "[TMP]"),
    ] {
        if let Ok(canonical) = p.canonicalize() {
            paths.push((canonical.display().to_string(), name));
        }
        paths.push((p.display().to_string(), name));
    }
    if let Some(home) = std::env::var_os("HOME") {
        paths.push((Path::new(&home).display().to_string(), "[HOME]"));
    }
    for (path, name) in paths {
        // Too short to be told apart from ordinary text (`HOME=/`, say).
        if path.trim_end_matches('/').len() > 4 {
            s.add_filter(&literal(path.trim_end_matches('/')), name);
        }
    }
    // Anything left under a temporary directory, from a path the filters above did not know.
    s.add_filter(r"/tmp/\.tmp[0-9A-Za-z]+", "[TMP]/[DIR]");
    // Timings.
    s.add_filter(r"\b\d+(\.\d+)?\s?(ns|µs|us|ms|s)\b", "[DURATION]");
    // Trailing blanks (clap indents its empty lines), which editors strip from the snapshots.
    s.add_filter(r"(?m)[ \t]+$", "");
    s
}

fn snapshot(ws: &Workspace, name: &str, args: &[&str], r: &Run) {
    let text = transcript(args, r);
    settings(ws).bind(|| insta::assert_snapshot!(name, text));
}

/// `rawko <command> --help` with no data directory in the environment: clap prints the value of
/// `RAWKO_DATA_DIR` in the help, and a user reading help usually has none.
fn help(ws: &Workspace, command: &'static str) -> (Vec<&'static str>, Run) {
    let args: Vec<&'static str> = command.split_whitespace().chain(["--help"]).collect();
    let mut c = cmd(ws);
    c.env_remove("RAWKO_DATA_DIR");
    let r = run_with(c, &args);
    (args, r)
}

#[test]
fn help_of_every_command() {
    let ws = Workspace::new();
    for &command in COMMANDS {
        let (args, r) = help(&ws, command);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        assert!(r.stderr.is_empty(), "{args:?}: {r:?}");
        let name = if command.is_empty() {
            "help_rawko".to_string()
        } else {
            format!("help_rawko_{}", command.replace(' ', "_"))
        };
        snapshot(&ws, &name, &args, &r);
    }
}

#[test]
fn every_subcommand_has_a_help_snapshot() {
    let ws = Workspace::new();
    for &command in COMMANDS {
        let (args, r) = help(&ws, command);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        let listed = r
            .stdout
            .lines()
            .skip_while(|l| *l != "Commands:")
            .skip(1)
            .take_while(|l| !l.trim().is_empty())
            // Continuation lines of a wrapped description are indented further.
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|sub| *sub != "help");
        for sub in listed {
            let full = format!("{command} {sub}").trim().to_string();
            assert!(
                COMMANDS.contains(&full.as_str()),
                "`rawko {full}` has no help snapshot: add it to COMMANDS"
            );
        }
    }
}

#[test]
fn lists_in_a_fresh_workspace() {
    let ws = Workspace::new();
    for (name, args) in [
        ("agents_list", &["agents", "list"][..]),
        ("tools_list", &["tools", "list"]),
        ("adapters_list", &["adapters", "list"]),
        ("plugin_list", &["plugin", "list"]),
    ] {
        let r = run(&ws, args);
        assert_eq!(r.code, 0, "{args:?}: {r:?}");
        snapshot(&ws, name, args, &r);
    }
}

#[test]
fn unknown_commands_and_flags() {
    let ws = Workspace::new();
    for (name, args) in [
        ("error_unknown_subcommand", &["nosuch"][..]),
        ("error_misspelt_subcommand", &["agent", "list"]),
        ("error_transposed_subcommand", &["rnu", "x"]),
        ("error_unknown_flag", &["--bogus"]),
        ("error_missing_subcommand", &["agents"]),
    ] {
        let r = run(&ws, args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        snapshot(&ws, name, args, &r);
    }
}

#[test]
fn unknown_agent_and_tool_and_bad_tool_input() {
    let ws = Workspace::new();
    for (name, args) in [
        (
            "error_agents_show_unknown",
            &["agents", "show", "nosuch"][..],
        ),
        (
            "error_tool_call_unknown",
            &["tool", "call", "Nope", "--input", "{}"],
        ),
        (
            "error_tool_call_bad_json",
            &["tool", "call", "Read", "--input", "not json"],
        ),
        (
            "error_tool_call_no_grant",
            &["tool", "call", "Read", "--input", r#"{"path":"a.txt"}"#],
        ),
    ] {
        let r = run(&ws, args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        snapshot(&ws, name, args, &r);
    }
}

#[test]
fn run_without_an_adapter_or_a_key() {
    let ws = Workspace::new();
    for (name, args) in [
        ("error_run_no_adapter", &["run", "add a --verbose flag"][..]),
        (
            "error_run_no_key",
            &["run", "--adapter", "anthropic", "add a --verbose flag"],
        ),
        ("error_ask_no_adapter", &["ask", "What is 2+2?"]),
    ] {
        let r = run(&ws, args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        snapshot(&ws, name, args, &r);
    }
    assert!(
        !ws.path().join(".rawko").exists(),
        "a run that cannot start leaves nothing behind"
    );
}

#[test]
fn malformed_workspace_config() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/config.yaml",
        "defaults:\n  adapter: anthropic\nadaptres:\n  local:\n    plugin: openai\n",
    );
    for (name, args) in [
        ("error_config_unknown_key_run", &["run", "hi"][..]),
        (
            "error_config_unknown_key_adapters_list",
            &["adapters", "list"],
        ),
    ] {
        let r = run(&ws, args);
        assert_ne!(r.code, 0, "{args:?}: {r:?}");
        snapshot(&ws, name, args, &r);
    }

    ws.write(".rawko/config.yaml", "adapters: [\n");
    let args = &["adapters", "list"];
    let r = run(&ws, args);
    assert_ne!(r.code, 0, "{r:?}");
    snapshot(&ws, "error_config_bad_yaml", args, &r);
}

#[test]
fn agents_validate_on_a_broken_agent() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/planner.yaml",
        "name: planner\nsystemPrompt: |\n  Plan.\ntools:\n  allowed: [Read]\ntransitions:\n  onSuccess: developr\nlimits:\n  maxIterations: 0\ntool: [Grep]\n",
    );
    ws.write(
        ".rawko/agents/bad.md",
        "---\nname: bad\ndescription: fine\ncolour: red\n---\nBe bad.\n",
    );
    for (name, args) in [
        ("error_agents_validate", &["agents", "validate"][..]),
        ("agents_list_with_a_broken_agent", &["agents", "list"]),
    ] {
        let r = run(&ws, args);
        snapshot(&ws, name, args, &r);
    }
}

/// `plugin inspect`: the component's facts under its header, then what it asks for.
#[test]
fn plugin_inspect() {
    let ws = Workspace::new();
    std::fs::copy(
        rawko_test_artifacts::GREETER,
        ws.path().join("greeter.wasm"),
    )
    .unwrap();
    let args = ["plugin", "inspect", "greeter.wasm"];
    let r = run(&ws, &args);
    assert_eq!(r.code, 0, "{r:?}");
    // The component's bytes (and so its digest) depend on where it was built.
    let mut text = transcript(&args, &r);
    while let Some(i) = text.find("sha256:") {
        let end = (i + 7 + 64).min(text.len());
        text.replace_range(i..end, "[DIGEST]");
    }
    settings(&ws).bind(|| insta::assert_snapshot!("plugin_inspect", text));
}

/// `agents validate` lists a file's problems in line order, as an editor shows them.
#[test]
fn agents_validate_in_line_order() {
    let ws = Workspace::new();
    ws.write(
        ".rawko/agents/messy.yaml",
        "name: messy\ntransitions: {onSuccess: nowhere}\ntools:\n  allowed: [Reed]\n\
         systemPrompt: p\ncolour: red\nlimits: {maxIterations: 0}\n",
    );
    let args = ["agents", "validate"];
    let r = run(&ws, &args);
    snapshot(&ws, "agents_validate_in_line_order", &args, &r);
}
