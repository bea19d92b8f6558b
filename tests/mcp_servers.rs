//! MCP servers as tools, through the real binary: the reference server from npm
//! (`@modelcontextprotocol/server-everything`, installed by `.ci/run`) over stdio and over
//! streamable HTTP, and a hostile server (`tests/fixtures/mcp/hostile_server.py`) that names a
//! tool like a built-in, writes escape sequences, hangs, floods, lists 500 tools and probes its
//! sandbox.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::support::{Run, Workspace, rawko};

/// Only rawko's own environment has it; no server may see it.
const SECRET_ENV: &str = "mcp-env-marker-c04e";
/// In the fake `~/.ssh/id_rsa`.
const SSH_SECRET: &str = "mcp-ssh-marker-1f6a";

fn everything() -> PathBuf {
    let p = PathBuf::from("/usr/bin/mcp-server-everything");
    let found = which("mcp-server-everything").unwrap_or(p);
    assert!(
        found.exists(),
        "mcp-server-everything is not installed: `.ci/run` installs it \
         (npm install -g @modelcontextprotocol/server-everything)"
    );
    found
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.exists())
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/mcp")
        .join(name)
}

/// A workspace, a fake home with a secret, and the user's config with `mcp` servers.
struct Setup {
    ws: Workspace,
    outside: tempfile::TempDir,
}

impl Setup {
    fn new(mcp: &str) -> Setup {
        let ws = Workspace::new();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(outside.path().join("home/.ssh")).unwrap();
        std::fs::write(outside.path().join("home/.ssh/id_rsa"), SSH_SECRET).unwrap();
        let cfg = ws.config_home().join("rawko");
        std::fs::create_dir_all(cfg.join("agents")).unwrap();
        std::fs::write(cfg.join("config.yaml"), format!("mcp:\n{mcp}")).unwrap();
        std::fs::write(
            cfg.join("agents/helper.yaml"),
            "name: helper\nsystemPrompt: Help.\ntools:\n  allowed: [Read, mcp__everything]\n  \
             blocked: [mcp__everything__get-env]\ntransitions: {onSuccess: done}\n",
        )
        .unwrap();
        Setup { ws, outside }
    }

    fn rawko(&self, args: &[&str]) -> Run {
        let out = rawko(&self.ws)
            .args(args)
            .env("RAWKO_TEST_SECRET", SECRET_ENV)
            .env("HOSTILE_OUTSIDE", self.outside.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        Run::of(out)
    }

    fn call(&self, tool: &str, input: &str) -> Run {
        self.rawko(&["tool", "call", tool, "--yes", "--input", input])
    }
}

fn stdio_everything() -> String {
    format!(
        "  everything:\n    command: {}\n    args: [stdio]\n",
        everything().display()
    )
}

#[test]
fn the_reference_server_over_stdio_is_asked_for_once_then_used() {
    let s = Setup::new(&stdio_everything());
    // Not approved, no terminal: left out, with how to approve it.
    let r = s.rawko(&[
        "tool",
        "call",
        "mcp__everything__echo",
        "--input",
        r#"{"message":"hi"}"#,
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("not approved") && r.stderr.contains("--yes"),
        "{r:?}"
    );

    let r = s.call("mcp__everything__echo", r#"{"message":"hi there"}"#);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: hi there");
    // Approved now: no --yes needed while the server and its tools stay the same.
    let r = s.rawko(&["tools", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let tools = r.json();
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"Read") && names.contains(&"mcp__everything__get-sum"),
        "{names:?}"
    );
    let sum = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "mcp__everything__get-sum")
        .unwrap();
    assert_eq!(sum["plugin"], "mcp:everything");

    let r = s.call("mcp__everything__get-sum", r#"{"a": 2, "b": 40}"#);
    assert!(r.stdout.contains("42"), "{r:?}");
    // Arguments are checked against the tool's schema before the server sees them.
    let r = s.call("mcp__everything__get-sum", r#"{"a": "two"}"#);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("invalid input"), "{r:?}");
    // The server's environment is the sandbox's allow-list: rawko's secrets are not in it.
    let r = s.call("mcp__everything__get-env", "{}");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains(SECRET_ENV), "{r:?}");
    assert!(r.stdout.contains("\"PATH\""), "{r:?}");

    // An agent gets the server's tools its definition allows, and not the one it blocks.
    let r = s.rawko(&["tools", "list", "--agent", "helper", "--json"]);
    let names: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        names.contains(&"mcp__everything__echo".to_string()),
        "{names:?}"
    );
    assert!(
        !names.contains(&"mcp__everything__get-env".to_string()),
        "{names:?}"
    );
    let r = s.rawko(&[
        "tool",
        "call",
        "mcp__everything__echo",
        "--agent",
        "helper",
        "--input",
        r#"{"message":"as an agent"}"#,
    ]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Echo: as an agent"), "{r:?}");
    let r = s.rawko(&[
        "tool",
        "call",
        "mcp__everything__get-env",
        "--agent",
        "helper",
        "--input",
        "{}",
    ]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("not available to the helper agent"),
        "{r:?}"
    );

    // A changed server (another argument) asks again.
    let cfg = s.ws.config_home().join("rawko/config.yaml");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("[stdio]", "[stdio, extra]");
    std::fs::write(&cfg, text).unwrap();
    let r = s.rawko(&["tools", "list"]);
    assert!(r.stderr.contains("changed since you approved it"), "{r:?}");
}

#[test]
fn a_workspaces_mcp_json_counts_only_once_the_workspace_is_trusted() {
    let s = Setup::new("  {}\n");
    std::fs::write(s.ws.config_home().join("rawko/config.yaml"), "").unwrap();
    s.ws.write(
        ".mcp.json",
        format!(
            r#"{{"mcpServers": {{"everything": {{"command": "{}", "args": ["stdio"]}}}}}}"#,
            everything().display()
        ),
    );
    let r = s.call("mcp__everything__echo", r#"{"message":"x"}"#);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("no MCP server named `everything`"),
        "{r:?}"
    );
    let r = s.rawko(&["trust"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = s.call("mcp__everything__echo", r#"{"message":"trusted"}"#);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: trusted");
}

/// The reference server's streamable HTTP transport, bound to loopback.
pub(crate) struct HttpEverything {
    child: Child,
    pub(crate) port: u16,
}

impl HttpEverything {
    pub(crate) fn start() -> HttpEverything {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = everything().canonicalize().unwrap();
        let child = Command::new("node")
            .arg("--require")
            .arg(fixture("loopback.cjs"))
            .arg(script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        let server = HttpEverything { child, port };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return server;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("the HTTP server did not start");
    }
}

impl Drop for HttpEverything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_reference_server_over_streamable_http_needs_a_grant_for_loopback() {
    let server = HttpEverything::start();
    let url = format!("http://127.0.0.1:{}/mcp", server.port);
    let s = Setup::new(&format!("  web:\n    url: {url}\n"));
    // Consent (--yes) is not enough for a server the user's own config defines: the refusal
    // says which line to add, and where.
    let r = s.call("mcp__web__echo", r#"{"message":"x"}"#);
    assert_eq!(r.code, 2, "{r:?}");
    let user_config = s.ws.config_home().join("rawko/config.yaml");
    for said in [
        "MCP server `web`",
        "on a loopback address (127.0.0.1)",
        &user_config.display().to_string(),
        "allow_private_network: true",
    ] {
        assert!(r.stderr.contains(said), "`{said}` not said: {r:?}");
    }
    assert!(!r.stderr.contains("adapter"), "{r:?}");

    let s = Setup::new(&format!(
        "  web:\n    url: {url}\n    allow_private_network: true\n    headers: {{X-Trace: \"${{RAWKO_TEST_SECRET}}\"}}\n"
    ));
    let r = s.call("mcp__web__echo", r#"{"message":"over http"}"#);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: over http");
}

/// A trusted workspace's `.mcp.json` naming an HTTP server on loopback: refused until the user
/// decides, with a refusal that names the server and says what to write where; consent (here
/// `--yes`) shows the loopback address and records it with the consent, so the server is reached
/// without asking from then on, until its address changes. An untrusted workspace's `.mcp.json`
/// gets nothing.
#[test]
fn a_loopback_server_from_mcp_json_is_admitted_once_by_consent() {
    let server = HttpEverything::start();
    let s = Setup::new("  {}\n");
    let user_config = s.ws.config_home().join("rawko/config.yaml");
    std::fs::write(&user_config, "").unwrap();
    let mcp_json = |port: u16| {
        format!(
            r#"{{"mcpServers": {{"web": {{"type": "http", "url": "http://127.0.0.1:{port}/mcp"}}}}}}"#
        )
    };
    s.ws.write(".mcp.json", mcp_json(server.port));
    let echo = |yes: bool| {
        let mut args = vec!["tool", "call", "mcp__web__echo"];
        if yes {
            args.push("--yes");
        }
        args.extend(["--input", r#"{"message":"on loopback"}"#]);
        s.rawko(&args)
    };
    let r = echo(true);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("no MCP server named `web`"), "{r:?}");
    assert_eq!(s.rawko(&["trust"]).code, 0);

    // Not decided yet: the refusal names the server and says what to do, and where.
    let r = echo(false);
    assert_eq!(r.code, 2, "{r:?}");
    for said in [
        "MCP server `web`",
        "on a loopback address (127.0.0.1)",
        "--yes",
        &user_config.display().to_string(),
        "mcp:\n    web:\n      allow_private_network: true",
    ] {
        assert!(r.stderr.contains(said), "`{said}` not said: {r:?}");
    }
    assert!(!r.stderr.contains("adapter"), "{r:?}");

    // Consent shows the address, and is recorded with it.
    let r = echo(true);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: on loopback");
    assert!(
        r.stderr.contains("on a loopback address (127.0.0.1)"),
        "{r:?}"
    );
    let consents =
        std::fs::read_to_string(s.ws.path().join(".test-data/mcp-consent.json")).unwrap();
    assert!(consents.contains("127.0.0.1"), "{consents}");
    // Decided once: no --yes needed from then on.
    let r = echo(false);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: on loopback");

    // Another address is another decision.
    let other = HttpEverything::start();
    s.ws.write(".mcp.json", mcp_json(other.port));
    assert_eq!(s.rawko(&["trust"]).code, 0);
    let r = echo(false);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("on a loopback address (127.0.0.1)"),
        "{r:?}"
    );
    // What the refusal says to write is enough: the server itself stays the workspace's.
    std::fs::write(
        &user_config,
        "mcp:\n  web:\n    allow_private_network: true\n",
    )
    .unwrap();
    let r = echo(false);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr.contains("changed since you approved it") && !r.stderr.contains("loopback"),
        "{r:?}"
    );
    let r = echo(true);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: on loopback");
}

/// The hostile server, run from the workspace (as a repository's own server would be: the
/// sandbox lets it read the workspace, not the rest of the disk), by the system's Python (the
/// probe runs with a fake home, where no user-installed Python is).
fn hostile(mode: &str, extra: &str) -> String {
    format!(
        "  hostile:\n    command: /usr/bin/python3\n    args: [hostile_server.py, {mode}{extra}]\n    timeout: 3\n"
    )
}

fn hostile_setup(mode: &str, extra: &str) -> Setup {
    let s = Setup::new(&hostile(mode, extra));
    std::fs::copy(
        fixture("hostile_server.py"),
        s.ws.path().join("hostile_server.py"),
    )
    .unwrap();
    s
}

#[test]
fn a_hostile_server_is_contained_and_bounded() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let s = hostile_setup("tools", &format!(", '{port}'"));
    let home = s.outside.path().join("home");

    // A tool named like a built-in is only ever `mcp__hostile__Read`; `Read` stays rawko's.
    let r = s.rawko(&["tools", "list", "--yes", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let tools = r.json();
    let list = tools.as_array().unwrap();
    assert_eq!(list.iter().filter(|t| t["name"] == "Read").count(), 1);
    let theirs = list
        .iter()
        .find(|t| t["name"] == "mcp__hostile__Read")
        .unwrap();
    let desc = theirs["description"].as_str().unwrap();
    assert!(
        !desc.contains('\u{1b}') && desc.chars().count() <= 2_001,
        "{desc:.200}"
    );
    assert!(
        !list
            .iter()
            .any(|t| t["name"].as_str().unwrap().contains("bad name"))
    );
    s.ws.write("mine.txt", "rawko's Read\n");
    let r = s.rawko(&[
        "tool",
        "call",
        "Read",
        "--read",
        ".",
        "--input",
        r#"{"path":"mine.txt"}"#,
    ]);
    assert!(r.stdout.contains("rawko's Read"), "{r:?}");

    // Escape sequences come back escaped, and a large result is capped.
    let r = s.call("mcp__hostile__spill", "{}");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        !r.stdout.contains('\u{1b}') && !r.stdout.contains('\r'),
        "{:.200}",
        r.stdout
    );
    assert!(r.stdout.contains("\\u{1b}[2J"), "{:.200}", r.stdout);
    assert!(r.stdout.chars().count() < 110_000, "{}", r.stdout.len());

    // A call that never returns ends at the server's timeout.
    let started = std::time::Instant::now();
    let r = s.call("mcp__hostile__hang", "{}");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("did not answer within 3 s"), "{r:?}");
    assert!(started.elapsed().as_secs() < 15);

    // The server's process runs in the kernel sandbox: no secrets, no network, no writes out.
    let out = rawko(&s.ws)
        .args([
            "tool",
            "call",
            "mcp__hostile__probe",
            "--yes",
            "--input",
            "{}",
        ])
        .env("HOME", &home)
        .env("RAWKO_TEST_SECRET", SECRET_ENV)
        .env("HOSTILE_OUTSIDE", s.outside.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let r = Run::of(out);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("ssh-denied"), "{r:?}");
    assert!(!r.stdout.contains(SSH_SECRET), "{r:?}");
    assert!(r.stdout.contains("net-denied"), "{r:?}");
    assert!(
        listener.accept().is_err(),
        "a connection reached the loopback server"
    );
    assert!(r.stdout.contains("write-denied"), "{r:?}");
    assert!(!s.outside.path().join("escaped.txt").exists());
    assert!(r.stdout.contains("secret-env:absent"), "{r:?}");
}

#[test]
fn a_server_that_dies_mid_call_is_an_error_not_a_hang() {
    let s = hostile_setup("crash", "");
    let started = std::time::Instant::now();
    let r = s.call("mcp__hostile__spill", "{}");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("MCP server `hostile`"), "{r:?}");
    assert!(started.elapsed().as_secs() < 3, "{:?}", started.elapsed());
}

#[test]
fn servers_that_flood_babble_list_too_much_or_stay_silent_fail_clearly() {
    for (mode, expect) in [
        ("many", "more than 128 tools"),
        ("flood", "could not start"),
        // Lines that are not JSON-RPC are skipped: the handshake never completes.
        ("garbage", "did not answer within 3 s"),
        ("silent", "did not answer within 3 s"),
    ] {
        let s = hostile_setup(mode, "");
        let started = std::time::Instant::now();
        let r = s.call("mcp__hostile__x", "{}");
        assert_eq!(r.code, 2, "{mode}: {r:?}");
        assert!(r.stderr.contains(expect), "{mode}: {r:?}");
        assert!(started.elapsed().as_secs() < 15, "{mode}");
        // The rest of rawko works as before.
        let r = s.rawko(&["tools", "list"]);
        assert_eq!(r.code, 0, "{mode}: {r:?}");
        assert!(r.stdout.contains("Read"), "{mode}");
    }
}
