//! Installed plugins used like built-in ones, through the real binary: an adapter plugin built
//! from `plugins/adapters/openai` and installed from its `.wasm`, named in the user's config and
//! asked against the scripted model server on loopback; a bash filter installed the same way and
//! named in `bash.filters`. Each runs with exactly what was granted at install: a host or a
//! variable the user did not grant stays out of reach, whatever the config asks for.

use std::path::PathBuf;

use crate::support::model_server::{ModelServer, openai};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

/// Copy a built plugin into the workspace, as a downloaded file would be.
fn copy_plugin(ws: &Workspace, from: &str, name: &str) -> PathBuf {
    let to = ws.path().join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

/// Write the user's own config.yaml.
fn user_config(ws: &Workspace, text: &str) {
    let dir = ws.config_home().join("rawko");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.yaml"), text).unwrap();
}

/// `rawko ARGS` with `OPENAI_API_KEY` set to the test key, which must never be printed.
fn run(ws: &Workspace, args: &[&str]) -> Run {
    let r = Run::of(
        rawko(ws)
            .env("OPENAI_API_KEY", TEST_KEY)
            .args(args)
            .output()
            .expect("run rawko"),
    );
    assert!(
        !r.stdout.contains(TEST_KEY) && !r.stderr.contains(TEST_KEY),
        "the key was printed: {r:?}"
    );
    r
}

/// Install the first-party OpenAI adapter as `rawko-openai`, granting `grants`.
fn install_openai(ws: &Workspace, grants: &[&str]) {
    copy_plugin(ws, rawko_test_artifacts::ADAPTER_OPENAI, "openai.wasm");
    let mut args = vec!["plugin", "install", "openai.wasm"];
    for g in grants {
        args.extend(["--grant", g]);
    }
    let r = run(ws, &args);
    assert_eq!(r.code, 0, "{r:?}");
}

fn instance(server: &ModelServer, extra: &str) -> String {
    format!(
        "adapters:\n  ext:\n    plugin: rawko-openai\n    model: test-model\n    base_url: {}\n    allow_private_network: true\n    timeout: 20\n{extra}",
        server.base_url()
    )
}

#[test]
pub(crate) fn an_installed_adapter_answers_through_its_granted_host_with_its_granted_key() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    install_openai(&ws, &["net.http=127.0.0.1", "env=OPENAI_API_KEY"]);
    user_config(&ws, &instance(&server, "    api_key_env: OPENAI_API_KEY\n"));

    let r = run(&ws, &["adapters", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = r.json();
    let ext = list
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "ext")
        .cloned()
        .unwrap_or_else(|| panic!("ext is not listed: {r:?}"));
    assert_eq!(ext["plugin"], "rawko-openai");
    assert_eq!(ext["plugin_installed"], true);
    assert_eq!(ext["withheld"], serde_json::json!([]));

    let r = run(&ws, &["adapters", "check", "ext", "--offline"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("rawko-openai loads"), "{r:?}");

    server.push(openai::text("Hello from an installed adapter.", 9, 6));
    let r = run(
        &ws,
        &["ask", "--adapter", "ext", "--no-stream", "Say hello"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Hello from an installed adapter.");
    let received = server.received();
    assert_eq!(received.len(), 1);
    assert_eq!(received[0].json()["model"], "test-model");
    assert_eq!(
        received[0].header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}")),
        "the granted variable is injected by the host"
    );
}

#[test]
fn an_installed_adapter_is_refused_what_it_was_not_granted() {
    let ws = Workspace::new();
    let server = ModelServer::start();
    // The plugin asks for loopback and the key; the user grants only api.openai.com.
    install_openai(&ws, &["net.http=api.openai.com"]);
    user_config(&ws, &instance(&server, ""));

    server.push(openai::text("must not be asked", 1, 1));
    let r = run(&ws, &["ask", "--adapter", "ext", "--no-stream", "hi"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("is not granted to this adapter"),
        "the request is refused by the host: {r:?}"
    );
    assert_eq!(server.hits(), 0, "nothing reached the server");

    let r = run(&ws, &["adapters", "check", "ext", "--offline", "--json"]);
    assert_eq!(r.code, 1, "{r:?}");
    let findings = r.json()[0]["findings"].clone();
    assert!(
        findings
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["what"] == "grant"
                && f["ok"] == false
                && f["message"]
                    .as_str()
                    .unwrap()
                    .contains("127.0.0.1 was not granted")),
        "{findings}"
    );

    // The key's variable was not granted either: it is not sent, and nothing is sent without it.
    user_config(&ws, &instance(&server, "    api_key_env: OPENAI_API_KEY\n"));
    let r = run(&ws, &["ask", "--adapter", "ext", "--no-stream", "hi"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("env=OPENAI_API_KEY"), "{r:?}");
    assert_eq!(server.hits(), 0);

    // A workspace's config cannot widen the grant: it picks among the granted hosts only.
    user_config(&ws, "");
    ws.write(
        ".rawko/config.yaml",
        format!(
            "adapters:\n  mine:\n    plugin: rawko-openai\n    model: m\n    base_url: {}\n    allow_private_network: true\n",
            server.base_url()
        ),
    );
    let r = run(&ws, &["ask", "--adapter", "mine", "--no-stream", "hi"]);
    assert_eq!(
        r.code, 2,
        "untrusted, the workspace's adapter is ignored: {r:?}"
    );
    assert_eq!(run(&ws, &["trust"]).code, 0);
    let r = run(&ws, &["ask", "--adapter", "mine", "--no-stream", "hi"]);
    assert_eq!(
        r.code, 1,
        "trusted, it is held to the plugin's grant: {r:?}"
    );
    assert_eq!(server.hits(), 0);
}

#[test]
fn an_installed_bash_filter_named_in_config_denies() {
    let ws = Workspace::new();
    copy_plugin(&ws, rawko_test_artifacts::ASK_FILTER, "marker.wasm");
    let r = run(&ws, &["plugin", "install", "marker.wasm"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("installed marker-filter"), "{r:?}");
    user_config(&ws, "bash:\n  filters: [marker-filter]\n");

    let check = |ws: &Workspace, command: &str| {
        run(
            ws,
            &[
                "bash", "check", "--read", ".", "--allow", "echo", "--json", "--", command,
            ],
        )
    };
    let r = check(&ws, "echo fine");
    assert_eq!(r.code, 0, "{r:?}");
    let filters: Vec<String> = r.json()["filters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["filter"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(filters, ["rawko-policy", "marker-filter"]);

    let r = check(&ws, "echo forbidden-by-plugin");
    assert_eq!(r.code, 1, "{r:?}");
    let j = r.json();
    assert_eq!(j["decision"], "deny");
    assert_eq!(j["decided_by"], "marker-filter");

    // A workspace may add an installed filter too; the user's stays first.
    ws.write(".rawko/config.yaml", "bash:\n  filters: [marker-filter]\n");
    assert_eq!(check(&ws, "echo forbidden-by-plugin").code, 1);
    std::fs::remove_file(ws.path().join(".rawko/config.yaml")).unwrap();

    // A component changed on disk is refused rather than run, and the check fails with it.
    let blobs = ws.path().join(".test-data/plugins/blobs");
    let blob = std::fs::read_dir(&blobs).unwrap().next().unwrap().unwrap();
    let good = std::fs::read(blob.path()).unwrap();
    std::fs::write(blob.path(), b"\0asm tampered").unwrap();
    let r = check(&ws, "echo fine");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("does not match the digest"), "{r:?}");
    std::fs::write(blob.path(), good).unwrap();

    // Once removed, naming it is an error, not a silently shorter chain.
    assert_eq!(run(&ws, &["plugin", "remove", "marker-filter"]).code, 0);
    let r = check(&ws, "echo forbidden-by-plugin");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("bash filter `marker-filter`: no plugin of that name is installed"),
        "{r:?}"
    );
}

#[test]
fn an_installed_plugin_is_used_only_as_its_kind() {
    let ws = Workspace::new();
    copy_plugin(&ws, rawko_test_artifacts::ASK_FILTER, "marker.wasm");
    assert_eq!(run(&ws, &["plugin", "install", "marker.wasm"]).code, 0);
    install_openai(&ws, &["net.http=api.openai.com"]);

    user_config(&ws, "bash:\n  filters: [rawko-openai]\n");
    let r = run(
        &ws,
        &[
            "bash", "check", "--read", ".", "--allow", "echo", "--", "echo hi",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not a bash filter"), "{r:?}");

    user_config(
        &ws,
        "adapters:\n  x:\n    plugin: marker-filter\n    model: m\n",
    );
    let r = run(&ws, &["adapters", "list"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("not an adapter"), "{r:?}");
}
