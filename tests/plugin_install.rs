//! `rawko plugin ...` through the real binary: installing from files, loopback HTTP and a real
//! OCI registry, real minisign signatures, consent, pinning, interrupted transfers, updates, and
//! a scaffolded plugin built and installed from scratch.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::support::services::{Minisign, Registry, Reply, Server, TokenGate};
use crate::support::{Run, Workspace, rawko, run};

/// Copy a test plugin into the workspace (so a signature can sit beside it).
fn copy_plugin(ws: &Workspace, from: &str, name: &str) -> PathBuf {
    let to = ws.path().join(name);
    std::fs::copy(from, &to).unwrap();
    to
}

fn lockfile(ws: &Workspace) -> PathBuf {
    ws.path().join(".test-data/plugins/plugins.lock")
}

/// Run `rawko plugin ARGS...` in `ws`.
fn plugin(ws: &Workspace, args: &[&str]) -> Run {
    let mut all = vec!["plugin"];
    all.extend_from_slice(args);
    run(ws, &all)
}

/// Run `rawko plugin install SOURCE --yes FLAGS...` in `ws`.
fn install(ws: &Workspace, source: &str, flags: &[&str]) -> Run {
    let mut args = vec!["install", source, "--yes"];
    args.extend_from_slice(flags);
    plugin(ws, &args)
}

/// The installed plugins, from `rawko plugin list --json`.
fn installed(ws: &Workspace) -> Vec<serde_json::Value> {
    let r = run(ws, &["plugin", "list", "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    r.json().as_array().unwrap().clone()
}

fn assert_nothing_installed(ws: &Workspace) {
    assert!(installed(ws).is_empty(), "something was installed");
    let blobs = ws.path().join(".test-data/plugins/blobs");
    let stored = std::fs::read_dir(&blobs).map(|d| d.count()).unwrap_or(0);
    assert_eq!(stored, 0, "a component was left in {}", blobs.display());
}

fn sha256(path: &Path) -> String {
    rawko_distribution::sha256_hex(&std::fs::read(path).unwrap())
}

#[test]
pub(crate) fn an_installed_tool_runs_with_only_what_was_granted() {
    let ws = Workspace::new();
    ws.write("public/hi.txt", "from public\n");
    ws.write("secret.txt", "the secret\n");
    let wasm = copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");

    let r = plugin(
        &ws,
        &["install", "greeter.wasm", "--grant", "fs.read=public"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("can read every file in your workspace"),
        "{r:?}"
    );
    assert!(r.stdout.contains("granted: fs.read=public"), "{r:?}");
    assert!(r.stdout.contains("denied:  fs.read=."), "{r:?}");

    let r = run(&ws, &["tools", "list", "--json"]);
    let greet = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "Greet")
        .cloned()
        .unwrap_or_else(|| panic!("Greet is not listed: {r:?}"));
    assert_eq!(greet["plugin"], "greeter");

    // The call grants the whole workspace; the plugin was granted only public/.
    let call = |input: &str| {
        run(
            &ws,
            &["tool", "call", "Greet", "--read", ".", "--input", input],
        )
    };
    let r = call(r#"{"name":"Ada","from_file":"public/hi.txt"}"#);
    assert_eq!(
        (r.code, r.stdout.trim()),
        (0, "Hello, Ada! from public"),
        "{r:?}"
    );
    let r = call(r#"{"name":"Ada","from_file":"secret.txt"}"#);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        !r.stdout.contains("the secret") && !r.stderr.contains("the secret"),
        "{r:?}"
    );
    // And without a call grant it reaches nothing, whatever the plugin was granted.
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Greet",
            "--input",
            r#"{"name":"A","from_file":"public/hi.txt"}"#,
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");

    let list = installed(&ws);
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["name"], "greeter");
    assert_eq!(list[0]["digest"], format!("sha256:{}", sha256(&wasm)));
    assert_eq!(list[0]["grants"], serde_json::json!(["fs.read=public"]));
    assert_eq!(
        list[0]["requested"],
        serde_json::json!(["fs.read=.", "fs.read=public"])
    );

    let r = plugin(&ws, &["inspect", "greeter"]);
    assert_eq!(r.code, 0, "{r:?}");
    for part in [
        "rawko:plugin/tools@0.1.1",
        "rawko:plugin/tool@0.1.1",
        "granted fs.read=public",
    ] {
        assert!(r.stdout.contains(part), "{part}: {r:?}");
    }

    let r = plugin(&ws, &["remove", "greeter"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_nothing_installed(&ws);
    let r = run(&ws, &["tools", "list"]);
    assert!(!r.stdout.contains("Greet"), "{r:?}");
    assert_eq!(plugin(&ws, &["remove", "greeter"]).code, 2);
}

#[test]
fn without_a_terminal_consent_must_be_explicit() {
    let ws = Workspace::new();
    copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");
    let r = plugin(&ws, &["install", "greeter.wasm"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("needs your consent"), "{r:?}");
    assert!(r.stderr.contains("--grant fs.read=."), "{r:?}");
    assert_nothing_installed(&ws);

    // A grant the plugin did not ask for cannot be given.
    let r = plugin(
        &ws,
        &[
            "install",
            "greeter.wasm",
            "--grant",
            "net.http=evil.example",
        ],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("does not ask for that"), "{r:?}");
    assert_nothing_installed(&ws);

    let r = install(&ws, "greeter.wasm", &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        installed(&ws)[0]["grants"],
        serde_json::json!(["fs.read=.", "fs.read=public"])
    );
}

#[test]
pub(crate) fn plugins_that_exceed_or_lack_their_manifest_are_refused() {
    let ws = Workspace::new();
    let cases = [
        (rawko_test_artifacts::GREEDY_TOOL, "imports `evil:net/raw`"),
        (
            rawko_test_artifacts::FUTURE_TOOL,
            "built against rawko:plugin@0.9.0, which this rawko does not support",
        ),
        (
            rawko_test_artifacts::HOSTILE_TOOL,
            "carries no rawko manifest",
        ),
    ];
    for (wasm, reason) in cases {
        let r = install(&ws, wasm, &[]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(
            r.stderr.contains("refused") && r.stderr.contains(reason),
            "{reason}: {r:?}"
        );
        assert_nothing_installed(&ws);
    }
    // Inspecting shows the reason without installing.
    let r = plugin(&ws, &["inspect", rawko_test_artifacts::GREEDY_TOOL]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("REFUSED") && r.stdout.contains("evil:net/raw"),
        "{r:?}"
    );
    assert_nothing_installed(&ws);
}

#[test]
fn a_wrong_digest_is_refused() {
    let ws = Workspace::new();
    let r = install(
        &ws,
        rawko_test_artifacts::GREETER,
        &["--sha256", &"0".repeat(64)],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("not the sha256:0000"), "{r:?}");
    assert_nothing_installed(&ws);
}

#[test]
fn minisign_signatures_verify_and_forgeries_are_refused() {
    let ws = Workspace::new();
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    let mallory = Minisign::generate(keys.path(), "mallory");

    let signed = copy_plugin(&ws, rawko_test_artifacts::GREETER, "signed.wasm");
    alice.sign(&signed);

    // A tampered byte: the manifest's description changed after signing.
    let tampered = ws.path().join("tampered.wasm");
    let mut bytes = std::fs::read(&signed).unwrap();
    let at = bytes
        .windows(6)
        .position(|w| w == b"Greets")
        .expect("the manifest text is in the component");
    bytes[at + 5] = b'z';
    std::fs::write(&tampered, &bytes).unwrap();
    std::fs::copy(
        ws.path().join("signed.wasm.minisig"),
        ws.path().join("tampered.wasm.minisig"),
    )
    .unwrap();

    // Signed by a key nobody trusts.
    let forged = copy_plugin(&ws, rawko_test_artifacts::GREETER, "forged.wasm");
    mallory.sign(&forged);

    let unsigned = copy_plugin(&ws, rawko_test_artifacts::GREETER, "unsigned.wasm");
    let alice_pub = alice.public.to_str().unwrap();

    let r = plugin(&ws, &["keys", "add", alice_pub]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = plugin(&ws, &["keys", "list"]);
    assert!(r.stdout.contains(&alice.key_id()), "{r:?}");

    let refusals = [
        (&tampered, "does not match the plugin's bytes"),
        (
            &forged,
            &*format!("signed by key {}, which you do not trust", mallory.key_id()),
        ),
        (&unsigned, "has no signature"),
    ];
    for (file, reason) in refusals {
        let r = install(&ws, file.to_str().unwrap(), &["--require-signature"]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains(reason), "{reason}: {r:?}");
        assert_nothing_installed(&ws);
    }
    // A bad signature by a trusted key is refused even when signatures are not required.
    let r = install(&ws, tampered.to_str().unwrap(), &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_nothing_installed(&ws);

    // The user's config can demand signatures for every install.
    let config = tempfile::tempdir().unwrap();
    std::fs::create_dir(config.path().join("rawko")).unwrap();
    std::fs::write(
        config.path().join("rawko/config.yaml"),
        "plugins:\n  require_signature: true\n",
    )
    .unwrap();
    let r = Run::of(
        rawko(&ws)
            .env("XDG_CONFIG_HOME", config.path())
            .args(["plugin", "install", unsigned.to_str().unwrap(), "--yes"])
            .output()
            .unwrap(),
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("plugins.require_signature"), "{r:?}");
    assert_nothing_installed(&ws);

    let r = install(&ws, signed.to_str().unwrap(), &["--require-signature"]);
    assert_eq!(r.code, 0, "{r:?}");
    let list = installed(&ws);
    assert_eq!(list[0]["signer"]["key_id"], alice.key_id());
    assert_eq!(
        list[0]["signer"]["trusted_comment"],
        "signed by the rawko tests"
    );

    // Once the key is removed, --trusted-key brings it back for one command.
    let r = plugin(&ws, &["remove", "greeter"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = plugin(&ws, &["keys", "remove", &alice.key_id()]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = install(&ws, signed.to_str().unwrap(), &["--require-signature"]);
    assert_eq!(r.code, 1, "{r:?}");
    let r = install(&ws, signed.to_str().unwrap(), &["--trusted-key", alice_pub]);
    assert_eq!(r.code, 0, "{r:?}");
}

/// The first line of stdout naming `label`, its last word.
fn field(r: &Run, label: &str) -> String {
    r.stdout
        .lines()
        .find(|l| l.trim_start().starts_with(label))
        .and_then(|l| l.split_whitespace().last())
        .unwrap_or_else(|| panic!("no {label} in {r:?}"))
        .to_string()
}

#[test]
fn oci_publish_install_by_tag_and_digest_and_pinning() {
    let registry = Registry::start();
    let ws = Workspace::new();
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    let v1 = copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");
    alice.sign(&v1);
    let v2 = copy_plugin(&ws, rawko_test_artifacts::GREETER_NET, "greeter-net.wasm");
    let tag = format!("oci://{}/rawko-tests/greeter:stable", registry.addr);

    let r = plugin(&ws, &["publish", "greeter.wasm", &tag]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("with its signature"), "{r:?}");
    let pinned = field(&r, "manifest:");
    assert_eq!(field(&r, "plugin:"), format!("sha256:{}", sha256(&v1)));

    // Inspect without installing.
    let r = plugin(&ws, &["inspect", &tag, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let info = r.json();
    assert_eq!(info["manifest"]["name"], "greeter");
    assert_eq!(info["resolved"], pinned);
    assert_nothing_installed(&ws);

    // By tag, with the signature carried in the manifest.
    let r = install(
        &ws,
        &tag,
        &["--trusted-key", alice.public.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let list = installed(&ws);
    assert_eq!(list[0]["source"], tag);
    assert_eq!(list[0]["resolved"], pinned);
    assert_eq!(list[0]["signer"]["key_id"], alice.key_id());

    // By digest, into another data directory.
    let other = Workspace::new();
    let r = install(&other, &pinned, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        installed(&other)[0]["digest"],
        format!("sha256:{}", sha256(&v1))
    );
    let r = run(
        &other,
        &["tool", "call", "Greet", "--input", r#"{"name":"registry"}"#],
    );
    assert_eq!((r.code, r.stdout.trim()), (0, "Hello, registry!"), "{r:?}");

    // The tag moves to other bytes: the lockfile's pin refuses them.
    let r = plugin(&ws, &["publish", "greeter-net.wasm", &tag]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = install(&ws, &tag, &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("pinned in the lockfile"), "{r:?}");
    assert_eq!(
        installed(&ws)[0]["digest"],
        format!("sha256:{}", sha256(&v1))
    );
    // And so does a digest given on the command line, in a fresh data directory.
    let fresh = Workspace::new();
    let r = install(&fresh, &tag, &["--sha256", &sha256(&v1)]);
    assert_eq!(r.code, 1, "{r:?}");
    assert_nothing_installed(&fresh);
    // The pinned manifest digest still names the old bytes.
    let r = install(&fresh, &pinned, &["--sha256", &sha256(&v1)]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_ne!(sha256(&v1), sha256(&v2));

    // Behind a registry that wants a Bearer token, push and pull fetch one first.
    let gate = TokenGate::start(&registry.addr);
    let gated = format!("oci://{}/rawko-tests/gated:1", gate.addr);
    let r = plugin(&ws, &["publish", "greeter.wasm", &gated]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = plugin(&Workspace::new(), &["inspect", &gated, "--json"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["digest"], format!("sha256:{}", sha256(&v1)));
    assert!(gate.tokens_issued.load(std::sync::atomic::Ordering::SeqCst) >= 2);
}

#[test]
fn a_hostile_registry_cannot_swap_the_bytes() {
    let ws = Workspace::new();
    let wasm = std::fs::read(rawko_test_artifacts::GREETER).unwrap();
    let layer = format!(
        "sha256:{}",
        sha256(Path::new(rawko_test_artifacts::GREETER))
    );
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.wasm.config.v0+json",
            "digest": format!("sha256:{}", "0".repeat(64)),
            "size": 2,
        },
        "layers": [{"mediaType": "application/wasm", "digest": layer, "size": wasm.len()}],
    })
    .to_string();
    // Same length, one byte changed: only the digest tells them apart.
    let mut swapped = wasm.clone();
    let last = swapped.len() - 1;
    swapped[last] ^= 1;
    let asked = format!("sha256:{}", "a".repeat(64));
    let server = Server::start(vec![
        ("/v2/evil/p/manifests/1", Reply::Ok(manifest.clone().into())),
        (
            &format!("/v2/evil/p/manifests/{asked}"),
            Reply::Ok(manifest.into()),
        ),
        (&format!("/v2/evil/p/blobs/{layer}"), Reply::Ok(swapped)),
    ]);
    let registry = server.base.trim_start_matches("http://");
    for (source, reason) in [
        (
            format!("oci://{registry}/evil/p:1"),
            format!("the wasm layer's bytes do not match its digest {layer}"),
        ),
        (
            format!("oci://{registry}/evil/p@{asked}"),
            "returned a manifest with digest".to_string(),
        ),
    ] {
        let r = install(&ws, &source, &[]);
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains(&reason), "{reason}: {r:?}");
        assert_nothing_installed(&ws);
    }
}

#[test]
fn interrupted_and_failed_downloads_leave_nothing_installed() {
    let ws = Workspace::new();
    let wasm = std::fs::read(rawko_test_artifacts::GREETER).unwrap();
    let half = wasm.len() / 2;
    let (started_tx, started) = mpsc::channel();
    let server = Server::start(vec![
        ("/whole.wasm", Reply::Ok(wasm.clone())),
        (
            "/short.wasm",
            Reply::Truncated {
                body: wasm.clone(),
                sent: half,
            },
        ),
        ("/broken.wasm", Reply::Status(500)),
        // A hostile server: away from TLS to a host that is not this machine, and a plugin
        // announced far past the size cap.
        (
            "/downgrade.wasm",
            Reply::Head {
                status: 302,
                headers: vec![("Location", "http://rawko.invalid/p.wasm".into())],
            },
        ),
        (
            "/huge.wasm",
            Reply::Head {
                status: 200,
                headers: vec![("Content-Length", (257u64 << 20).to_string())],
            },
        ),
        (
            "/stalled.wasm",
            Reply::Stalled {
                body: wasm.clone(),
                sent: half,
                started: started_tx,
            },
        ),
    ]);
    for (path, reason) in [
        ("/short.wasm", "the transfer"),
        ("/broken.wasm", "the server answered 500"),
        (
            "/downgrade.wasm",
            "refusing a redirect to http://rawko.invalid/p.wasm",
        ),
        ("/huge.wasm", "larger than the 268435456 bytes allowed"),
    ] {
        let r = plugin(
            &ws,
            &["install", &format!("{}{path}", server.base), "--yes"],
        );
        assert_eq!(r.code, 1, "{r:?}");
        assert!(r.stderr.contains(reason), "{reason}: {r:?}");
        assert_nothing_installed(&ws);
    }

    // Killed in the middle of the download.
    let mut child = rawko(&ws)
        .args([
            "plugin",
            "install",
            &format!("{}/stalled.wasm", server.base),
            "--yes",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    started
        .recv_timeout(Duration::from_secs(60))
        .expect("the download started");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!lockfile(&ws).exists() || installed(&ws).is_empty());
    assert_nothing_installed(&ws);

    // The next install works.
    let r = plugin(
        &ws,
        &["install", &format!("{}/whole.wasm", server.base), "--yes"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(installed(&ws).len(), 1);
}

#[test]
fn a_kill_while_the_install_waits_to_commit_leaves_nothing() {
    use std::io::BufRead;
    let ws = Workspace::new();
    // Another rawko holds the store: this install passes every check, then waits to commit.
    let store = ws.path().join(".test-data/plugins");
    std::fs::create_dir_all(&store).unwrap();
    let held = std::fs::File::create(store.join(".lock")).unwrap();
    held.lock().unwrap();
    let mut child = rawko(&ws)
        .args(["plugin", "install", rawko_test_artifacts::GREETER, "--yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let shown = stderr
        .lines()
        .map_while(Result::ok)
        .any(|l| l.starts_with("It asks for:"));
    assert!(shown, "the install never reached consent");
    child.kill().unwrap();
    child.wait().unwrap();
    held.unlock().unwrap();
    assert_nothing_installed(&ws);
    // The store still works.
    let r = install(&ws, rawko_test_artifacts::GREETER, &[]);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
pub(crate) fn updates_ask_again_for_new_capabilities_and_refuse_new_signers() {
    let ws = Workspace::new();
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    let bob = Minisign::generate(keys.path(), "bob");
    let v1 = copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");
    alice.sign(&v1);
    let v2 = copy_plugin(&ws, rawko_test_artifacts::GREETER_NET, "greeter-2.wasm");
    let v2_alice = copy_plugin(&ws, rawko_test_artifacts::GREETER_NET, "greeter-2a.wasm");
    bob.sign(&v2);
    alice.sign(&v2_alice);
    for key in [&alice, &bob] {
        let r = plugin(&ws, &["keys", "add", key.public.to_str().unwrap()]);
        assert_eq!(r.code, 0, "{r:?}");
    }
    let r = plugin(
        &ws,
        &["install", "greeter.wasm", "--grant", "fs.read=public"],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let version = |ws: &Workspace| installed(ws)[0]["version"].as_str().unwrap().to_string();

    // Another signer.
    let r = plugin(
        &ws,
        &["update", "greeter", "--from", "greeter-2.wasm", "--yes"],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr
            .contains(&format!("signed by key {}", alice.key_id())),
        "{r:?}"
    );
    assert!(r.stderr.contains("--allow-new-signer"), "{r:?}");
    assert_eq!(version(&ws), "0.1.0");

    // The same signer, but the new version wants the network: it stops and asks.
    let r = plugin(&ws, &["update", "greeter", "--from", "greeter-2a.wasm"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        r.stderr
            .contains("It now also asks for:\n  net.http=api.example.com"),
        "{r:?}"
    );
    assert!(r.stderr.contains("it could send your code there"), "{r:?}");
    assert!(
        r.stderr.contains("--grant net.http=api.example.com"),
        "{r:?}"
    );
    assert_eq!(version(&ws), "0.1.0");

    // On a terminal, it asks; declining changes nothing.
    if let Some(r) = on_a_terminal(&ws, "update greeter --from greeter-2a.wasm", "n\n") {
        assert!(r.contains("Grant these and update greeter? [y/N]"), "{r}");
        assert!(r.contains("you declined"), "{r}");
        assert_eq!(version(&ws), "0.1.0");
    }

    let r = plugin(
        &ws,
        &[
            "update",
            "greeter",
            "--from",
            "greeter-2a.wasm",
            "--grant",
            "net.http=api.example.com",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let list = installed(&ws);
    assert_eq!(list[0]["version"], "0.2.0");
    // Old grants carry over; what was declined stays declined.
    assert_eq!(
        list[0]["grants"],
        serde_json::json!(["fs.read=public", "net.http=api.example.com"])
    );

    // A new signer is accepted only when asked for (and going back, only when asked for).
    let r = plugin(
        &ws,
        &[
            "update",
            "greeter",
            "--from",
            "greeter.wasm",
            "--yes",
            "--allow-downgrade",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    let r = plugin(
        &ws,
        &[
            "update",
            "greeter",
            "--from",
            "greeter-2.wasm",
            "--yes",
            "--allow-new-signer",
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(installed(&ws)[0]["signer"]["key_id"], bob.key_id());
    let r = plugin(&ws, &["update", "greeter"]);
    assert!(r.stdout.contains("up to date"), "{r:?}");
}

/// Run `rawko plugin ARGS` under a pseudo-terminal (util-linux `script`) with `input` typed, and
/// return everything it showed; `None` where `script` is not installed.
fn on_a_terminal(ws: &Workspace, args: &str, input: &str) -> Option<String> {
    use std::io::Write;
    let script = ["/usr/bin/script", "/bin/script"]
        .into_iter()
        .find(|p| Path::new(p).exists())?;
    let cmd = format!("{} plugin {args}", crate::support::rawko_bin().display());
    let base = rawko(ws);
    let mut command = std::process::Command::new(script);
    command
        .args(["-qec", &cmd, "/dev/null"])
        .current_dir(ws.path());
    for (key, value) in base.get_envs() {
        match value {
            Some(v) => command.env(key, v),
            None => command.env_remove(key),
        };
    }
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(input.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).replace('\r', ""))
}

/// `rawko plugin new KIND NAME` in `ws`, built as its README says; the `.wasm` built.
fn new_plugin_built(ws: &Workspace, kind: &str, name: &str) -> PathBuf {
    let r = plugin(ws, &["new", kind, name]);
    assert_eq!(r.code, 0, "{r:?}");
    let dir = ws.path().join(name);
    // Built into the directory where the build compiled the first-party plugins, with a profile
    // of the same settings as theirs (and as the scaffold's `--release`), so the SDK's
    // dependencies compiled for wasm are reused rather than built again (minutes on CI).
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm");
    let mut cargo = std::process::Command::new(std::env::var("CARGO").unwrap_or("cargo".into()));
    cargo
        .args(["build", "--target", "wasm32-wasip2", "--quiet"])
        .args([
            "--profile",
            "wasm-plugin",
            "--config",
            "profile.wasm-plugin.inherits=\"release\"",
        ])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target);
    for var in [
        "RUSTFLAGS",
        "CARGO_ENCODED_RUSTFLAGS",
        "CARGO_BUILD_TARGET",
        "RUSTC_WORKSPACE_WRAPPER",
    ] {
        cargo.env_remove(var);
    }
    let out = cargo.output().expect("run cargo");
    assert!(
        out.status.success(),
        "building the {kind} scaffold failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join(format!(
        "wasm32-wasip2/wasm-plugin/{}.wasm",
        name.replace('-', "_")
    ))
}

#[test]
fn a_new_tool_plugin_builds_installs_and_runs() {
    let ws = Workspace::new();
    let wasm = new_plugin_built(&ws, "tool", "hello");
    let r = plugin(&ws, &["install", wasm.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("It asks for no capabilities"), "{r:?}");
    let r = run(
        &ws,
        &["tool", "call", "Hello", "--input", r#"{"name":"world"}"#],
    );
    assert_eq!((r.code, r.stdout.trim()), (0, "Hello, world!"), "{r:?}");
}

/// The other kinds' scaffolds are checked file by file in the unit tests; one is built here.
#[test]
fn a_new_bash_filter_builds_installs_and_denies() {
    let ws = Workspace::new();
    let wasm = new_plugin_built(&ws, "bash-filter", "no-net");
    let r = plugin(&ws, &["install", wasm.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    let config = ws.config_home().join("rawko");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(config.join("config.yaml"), "bash:\n  filters: [no-net]\n").unwrap();
    let check = |command: &str| {
        run(
            &ws,
            &[
                "bash", "check", "--read", ".", "--allow", "curl *", "--allow", "ls", "--", command,
            ],
        )
    };
    let r = check("ls && curl https://example.com");
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stdout
            .starts_with("deny: curl can reach the network (decided by no-net)"),
        "{r:?}"
    );
    assert_eq!(check("ls").code, 0);
}

/// `rawko plugin pack COMPONENT --manifest MANIFEST -o OUT` in `ws`.
pub(crate) fn pack(ws: &Workspace, component: &str, manifest: &str, out: &str) -> Run {
    run(
        ws,
        &[
            "plugin",
            "pack",
            component,
            "--manifest",
            manifest,
            "-o",
            out,
        ],
    )
}

/// `wasm` with its embedded manifest hidden: the custom section renamed in place, as a component
/// from a toolchain that knows nothing of rawko comes.
fn without_manifest(wasm: &[u8]) -> Vec<u8> {
    let name = rawko_distribution::SECTION.as_bytes();
    let mut bytes = wasm.to_vec();
    let at = bytes
        .windows(name.len() + 1)
        .position(|w| w[0] as usize == name.len() && &w[1..] == name)
        .expect("the manifest's section is in the component");
    bytes[at + name.len()] = b'X';
    bytes
}

#[test]
fn a_component_from_any_toolchain_is_packed_installed_and_signed_with_its_manifest() {
    let ws = Workspace::new();
    ws.write("public/hi.txt", "from public\n");
    let bare = ws.path().join("bare.wasm");
    std::fs::write(
        &bare,
        without_manifest(&std::fs::read(rawko_test_artifacts::GREETER).unwrap()),
    )
    .unwrap();
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../plugins/test-plugins/greeter/rawko-plugin.yaml");
    std::fs::copy(&manifest, ws.path().join("rawko-plugin.yaml")).unwrap();

    // Unpacked, install says how to pack it.
    let r = install(&ws, "bare.wasm", &[]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("rawko plugin pack"), "{r:?}");
    assert_nothing_installed(&ws);

    let r = pack(&ws, "bare.wasm", "rawko-plugin.yaml", "greeter.wasm");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("packed greeter 0.1.0"), "{r:?}");
    // Packing twice is refused: the component carries a manifest now.
    let r = pack(&ws, "greeter.wasm", "rawko-plugin.yaml", "twice.wasm");
    assert_eq!(r.code, 2, "{r:?}");
    // A manifest that does not fit the component is refused before anything is written.
    ws.write(
        "wrong.yaml",
        std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("kinds: [tool]", "kinds: [adapter]"),
    );
    let r = pack(&ws, "bare.wasm", "wrong.yaml", "wrong.wasm");
    assert_eq!(r.code, 2, "{r:?}");
    assert!(!ws.path().join("wrong.wasm").exists());

    // Signed after packing, it installs and runs.
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    alice.sign(&ws.path().join("greeter.wasm"));
    let alice_pub = alice.public.to_str().unwrap();
    let r = plugin(&ws, &["keys", "add", alice_pub]);
    assert_eq!(r.code, 0, "{r:?}");

    // The same component packed with an altered manifest (more access asked for) does not
    // verify under the signature of the first.
    ws.write(
        "greedy.yaml",
        std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("reads greetings kept in public/", "reads everything"),
    );
    let r = pack(&ws, "bare.wasm", "greedy.yaml", "altered.wasm");
    assert_eq!(r.code, 0, "{r:?}");
    std::fs::copy(
        ws.path().join("greeter.wasm.minisig"),
        ws.path().join("altered.wasm.minisig"),
    )
    .unwrap();
    let r = install(&ws, "altered.wasm", &["--require-signature"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("does not match the plugin's bytes"),
        "{r:?}"
    );
    assert_nothing_installed(&ws);

    let r = install(&ws, "greeter.wasm", &["--require-signature"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(
        &ws,
        &[
            "tool",
            "call",
            "Greet",
            "--read",
            ".",
            "--input",
            r#"{"name": "packed", "from_file": "public/hi.txt"}"#,
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("packed"), "{r:?}");
}

/// What toolchains import whether the plugin uses it or not (componentize-py always imports
/// `wasi:sockets`; others `wasi:http`) is accepted and denied, not refused: the install and the
/// listing say "denied", a connection to a loopback server never arrives, and an HTTP request
/// stops the plugin with an error naming the denied function. `--plugin` applies the same rules.
#[test]
pub(crate) fn imports_every_toolchain_makes_are_accepted_and_denied() {
    let ws = Workspace::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap().to_string();

    let r = plugin(&ws, &["inspect", rawko_test_artifacts::SOCKET_TOOL]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stdout.contains("REFUSED"), "{r:?}");
    assert!(
        r.stdout
            .contains("wasi:sockets/tcp@0.2.12  denied (no network")
            && r.stdout
                .contains("wasi:http/outgoing-handler@0.2.12  denied"),
        "{r:?}"
    );
    let r = install(&ws, rawko_test_artifacts::SOCKET_TOOL, &[]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains("denied") || r.stderr.contains("denied"),
        "{r:?}"
    );

    let connect = format!(r#"{{"addr": "{addr}"}}"#);
    let fresh = Workspace::new();
    for (ws, extra) in [
        (&ws, &[][..]),
        (&fresh, &["--plugin", rawko_test_artifacts::SOCKET_TOOL][..]),
    ] {
        let mut args = vec!["tool", "call", "Connect", "--input", &connect];
        args.extend_from_slice(extra);
        let r = run(ws, &args);
        assert!(r.stdout.contains("refused"), "{extra:?}: {r:?}");
        assert!(
            listener.accept().is_err(),
            "a connection arrived: {extra:?}"
        );
        let mut args = vec!["tool", "call", "Fetch", "--input", "{}"];
        args.extend_from_slice(extra);
        let r = run(ws, &args);
        assert_eq!(r.code, 1, "{extra:?}: {r:?}");
        assert!(
            r.stderr
                .contains("`wasi:http/types@0.2.12#[constructor]fields` is denied"),
            "{extra:?}: {r:?}"
        );
    }
}

/// A registry on IPv6 loopback (`[::1]`) is spoken to over plain HTTP like `127.0.0.1`: publish
/// with a signature and install requiring it. `--insecure-registry` is the only way to plain
/// HTTP elsewhere, and says so.
#[test]
fn an_ipv6_loopback_registry_works_like_ipv4_and_plain_http_elsewhere_is_loud() {
    let registry = Registry::start_on("[::1]");
    let ws = Workspace::new();
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    let file = copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");
    alice.sign(&file);
    let tag = format!("oci://{}/rawko-tests/greeter:1", registry.addr);
    let r = plugin(&ws, &["publish", "greeter.wasm", &tag]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("with its signature"), "{r:?}");
    // The signature comes back as the manifest's referrer, over IPv6 as over IPv4.
    let r = install(
        &ws,
        &tag,
        &[
            "--require-signature",
            "--trusted-key",
            alice.public.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(!r.stderr.contains("plain HTTP"), "{r:?}");
    assert_eq!(installed(&ws)[0]["source"], tag);
    assert_eq!(installed(&ws)[0]["signer"]["key_id"], alice.key_id());

    // Elsewhere https, unless named insecure (the name does not resolve here: the point is the
    // scheme tried, and the warning).
    let far = "oci://registry.invalid:5000/a/b:1";
    let r = plugin(&ws, &["inspect", far]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.stderr.contains("https://registry.invalid:5000"), "{r:?}");
    let r = plugin(
        &ws,
        &["inspect", far, "--insecure-registry", "registry.invalid"],
    );
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("over plain HTTP (insecure registry)"),
        "{r:?}"
    );
    assert!(r.stderr.contains("http://registry.invalid:5000"), "{r:?}");
}

/// Installing compiles the plugin ahead of time, in a child process with its time and memory
/// limited, into the component cache: the first call after it compiles nothing.
#[test]
fn install_compiles_the_plugin_ahead_of_time() {
    let ws = Workspace::new();
    let cache = tempfile::tempdir().unwrap();
    let digest = sha256(Path::new(rawko_test_artifacts::GREETER));
    let cached = || {
        std::fs::read_dir(cache.path().join("components"))
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().starts_with(&digest))
            })
            .unwrap_or(false)
    };
    let rawko_cached = |args: &[&str]| {
        let out = rawko(&ws)
            .args(args)
            .env("RAWKO_CACHE_DIR", cache.path())
            .env("RAWKO_LOG", "rawko=debug,rawko_runtime=debug")
            .output()
            .unwrap();
        Run::of(out)
    };
    assert!(!cached());
    let r = rawko_cached(&["plugin", "install", rawko_test_artifacts::GREETER, "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains("compiled the plugin ahead of time"),
        "{r:?}"
    );
    assert!(cached(), "no compiled component in the cache after install");
    let r = rawko_cached(&["tool", "call", "Greet", "--input", r#"{"name":"cached"}"#]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("Hello, cached!"), "{r:?}");
    // Only the built-in tools were compiled on this call; the plugin came from the cache.
    assert_eq!(
        r.stderr.matches("compiled plugin").count(),
        1,
        "{}",
        r.stderr
    );
}

/// `GET path` on `addr` with `accept`, as a client would: the status and the body.
fn registry_get(addr: &str, path: &str, accept: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

/// A signature is published as an OCI 1.1 referrer of the plugin's manifest (here through the
/// fallback tag `sha256-<hex>`: this registry has no referrers API), not inside the manifest,
/// and install finds and verifies it there. A referrer signed by a key nobody trusts does not
/// pass for a signature.
#[test]
fn signatures_are_published_and_found_as_referrers() {
    let registry = Registry::start();
    let ws = Workspace::new();
    let keys = tempfile::tempdir().unwrap();
    let alice = Minisign::generate(keys.path(), "alice");
    let mallory = Minisign::generate(keys.path(), "mallory");
    let plugin_file = copy_plugin(&ws, rawko_test_artifacts::GREETER, "greeter.wasm");
    alice.sign(&plugin_file);
    let tag = format!("oci://{}/rawko-tests/signed:1", registry.addr);
    let r = plugin(&ws, &["publish", "greeter.wasm", &tag]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("with its signature"), "{r:?}");
    let pinned = field(&r, "manifest:");
    let digest = pinned.rsplit('@').next().unwrap().to_string();

    let manifest_type = "application/vnd.oci.image.manifest.v1+json";
    let index_type = "application/vnd.oci.image.index.v1+json";
    let (status, body) = registry_get(
        &registry.addr,
        &format!("/v2/rawko-tests/signed/manifests/{digest}"),
        manifest_type,
    );
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains("minisig"),
        "the signature is in the manifest: {body}"
    );
    let (status, index) = registry_get(
        &registry.addr,
        &format!(
            "/v2/rawko-tests/signed/manifests/{}",
            digest.replacen(':', "-", 1)
        ),
        index_type,
    );
    assert_eq!(status, 200, "{index}");
    assert!(
        index.contains("application/vnd.dev.rawko.plugin.signature.v1+minisig"),
        "{index}"
    );

    let r = install(
        &ws,
        &tag,
        &[
            "--require-signature",
            "--trusted-key",
            alice.public.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(installed(&ws)[0]["signer"]["key_id"], alice.key_id());

    // Mallory publishes the same plugin with her signature as its referrer: not trusted.
    let other = Workspace::new();
    let forged = copy_plugin(&other, rawko_test_artifacts::GREETER, "greeter.wasm");
    mallory.sign(&forged);
    let tag2 = format!("oci://{}/rawko-tests/forged:1", registry.addr);
    let r = plugin(&other, &["publish", "greeter.wasm", &tag2]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = install(
        &other,
        &tag2,
        &[
            "--require-signature",
            "--trusted-key",
            alice.public.to_str().unwrap(),
        ],
    );
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("which you do not trust"), "{r:?}");
    assert_nothing_installed(&other);
}
