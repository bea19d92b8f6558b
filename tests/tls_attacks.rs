//! HTTPS servers whose certificate does not verify, through the real binary: a self-signed
//! certificate for `localhost` (a plain one, and one marked as a CA's, as `openssl req -x509`
//! makes by default), one from a trusted CA for another name, and an expired one from that CA.
//! An adapter instance, `rawko plugin install` from an https URL and from an OCI registry, and an
//! MCP server over streamable HTTP each refuse them, naming the host and saying the certificate
//! is not trusted and why, and send nothing past the handshake. Then the same server with a good
//! certificate from the CA works, the CA trusted the one way rawko has to trust extra roots: the
//! system's trust store, which `SSL_CERT_FILE` replaces with a file of roots.

use std::process::{Command, Stdio};

use crate::mcp_servers::HttpEverything;
use crate::support::model_server::{ModelServer, openai};
use crate::support::services::{Registry, Reply, Server};
use crate::support::tls::{HOST, Leaf, Pki, TlsProxy, WRONG_NAME};
use crate::support::{Run, TEST_KEY, Workspace, rawko};

/// The certificates that must be refused, with what the refusal says about each.
const ATTACKS: [(Leaf, &str); 4] = [
    (Leaf::SelfSigned, "self-signed"),
    (
        Leaf::SelfSignedCa,
        "certificate authority's own certificate",
    ),
    (Leaf::WrongName, WRONG_NAME),
    (Leaf::Expired, "expired"),
];

/// `rawko` in `ws` trusting the test CA and nothing else, whatever the machine trusts.
fn trusting(ws: &Workspace, pki: &Pki) -> Command {
    let mut c = rawko(ws);
    c.env("SSL_CERT_FILE", pki.ca_file())
        .env_remove("SSL_CERT_DIR")
        .env("TEST_KEY", TEST_KEY)
        .stdin(Stdio::null());
    c
}

fn run(mut c: Command, args: &[&str]) -> Run {
    Run::of(c.args(args).output().expect("run rawko"))
}

/// The refusal names the host and says the certificate is not trusted, and why.
fn assert_refused(r: &Run, proxy: &TlsProxy, why: &str, what: &str) {
    assert_refused_at(r, proxy, HOST, why, what);
}

/// [`assert_refused`] for a server reached as `host`.
fn assert_refused_at(r: &Run, proxy: &TlsProxy, host: &str, why: &str, what: &str) {
    assert_ne!(r.code, 0, "{what}: {r:?}");
    assert_eq!(
        proxy.handshakes(),
        0,
        "{what}: a handshake completed: {r:?}"
    );
    assert_eq!(proxy.forwarded(), 0, "{what}: bytes got through: {r:?}");
    let host = format!("{host}:{}", proxy.port);
    for said in [host.as_str(), "certificate is not trusted", why] {
        assert!(r.stderr.contains(said), "{what}: `{said}` not said: {r:?}");
    }
}

/// What the user reads of each refusal, for the snapshot: rawko's own `error:` and `warning:`
/// lines (not a library's log lines), with the port made stable.
fn refusals(runs: &[(Leaf, Run, u16)]) -> String {
    let mut text = String::new();
    for (leaf, r, port) in runs {
        text.push_str(&format!("--- {leaf:?}\n"));
        for line in r.stderr.lines() {
            if line.starts_with("error:") || line.starts_with("warning:") {
                text.push_str(&line.replace(&format!(":{port}"), ":[PORT]"));
                text.push('\n');
            }
        }
    }
    text
}

fn adapter_config(ws: &Workspace, url: &str) {
    let cfg = ws.config_home().join("rawko");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.yaml"),
        format!(
            "adapters:\n  tls:\n    plugin: openai\n    model: test-model\n    base_url: {url}/v1\n    \
             api_key_env: TEST_KEY\n    allow_private_network: true\n    timeout: 20\n"
        ),
    )
    .unwrap();
}

#[test]
fn an_adapter_refuses_a_server_whose_certificate_does_not_verify() {
    let pki = Pki::generate();
    let server = ModelServer::start();
    let mut runs = Vec::new();
    for (leaf, why) in ATTACKS {
        let ws = Workspace::new();
        let proxy = TlsProxy::start(&pki, leaf, server.addr());
        adapter_config(&ws, &proxy.url());
        let r = run(
            trusting(&ws, &pki),
            &["ask", "--adapter", "tls", "--no-stream", "hi"],
        );
        assert_refused(&r, &proxy, why, &format!("adapter, {leaf:?}"));
        assert!(!r.stderr.contains(TEST_KEY), "{r:?}");
        runs.push((leaf, r, proxy.port));
    }
    assert_eq!(server.hits(), 0);
    insta::assert_snapshot!("adapter_refusals", refusals(&runs));

    let ws = Workspace::new();
    let proxy = TlsProxy::start(&pki, Leaf::Good, server.addr());
    adapter_config(&ws, &proxy.url());
    server.push(openai::text("Over TLS.", 3, 2));
    let r = run(
        trusting(&ws, &pki),
        &["ask", "--adapter", "tls", "--no-stream", "hi"],
    );
    assert_eq!((r.code, r.stdout.as_str()), (0, "Over TLS.\n"), "{r:?}");
    assert_eq!(proxy.handshakes(), 1);
    let req = &server.received()[0];
    assert_eq!(
        req.header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
}

#[test]
fn plugin_install_refuses_a_server_whose_certificate_does_not_verify() {
    let wasm = std::fs::read(rawko_test_artifacts::GREETER).unwrap();
    let files = Server::start(vec![("/greeter.wasm", Reply::Ok(wasm))]);
    let upstream = files
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("the file server's address");
    let pki = Pki::generate();
    let mut runs = Vec::new();
    for (leaf, why) in ATTACKS {
        let ws = Workspace::new();
        let proxy = TlsProxy::start(&pki, leaf, upstream);
        let url = format!("{}/greeter.wasm", proxy.url());
        let r = run(trusting(&ws, &pki), &["plugin", "install", &url, "--yes"]);
        assert_refused(&r, &proxy, why, &format!("plugin install, {leaf:?}"));
        runs.push((leaf, r, proxy.port));
        let r = run(trusting(&ws, &pki), &["plugin", "list", "--json"]);
        assert_eq!(r.json(), serde_json::json!([]), "{r:?}");
    }
    insta::assert_snapshot!("plugin_install_refusals", refusals(&runs));

    let ws = Workspace::new();
    let proxy = TlsProxy::start(&pki, Leaf::Good, upstream);
    let url = format!("{}/greeter.wasm", proxy.url());
    let r = run(trusting(&ws, &pki), &["plugin", "install", &url, "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(trusting(&ws, &pki), &["plugin", "list", "--json"]);
    assert_eq!(r.json().as_array().map(Vec::len), Some(1), "{r:?}");
}

/// A registry is spoken to over plain HTTP when it is on this machine by name or address
/// (`localhost`, `127.0.0.0/8`, `[::1]`); named by 127.0.0.1 mapped into IPv6 it is not, so it
/// is reached over HTTPS, here through the TLS server in front of a real registry.
#[test]
fn an_oci_registry_over_https_is_refused_when_its_certificate_does_not_verify() {
    let registry = Registry::start();
    let ws = Workspace::new();
    std::fs::copy(
        rawko_test_artifacts::GREETER,
        ws.path().join("greeter.wasm"),
    )
    .unwrap();
    let plain = format!("oci://{}/rawko-tests/greeter:1", registry.addr);
    let r = run(rawko(&ws), &["plugin", "publish", "greeter.wasm", &plain]);
    assert_eq!(r.code, 0, "{r:?}");
    let upstream = registry.addr.parse().expect("the registry's address");
    let pki = Pki::generate();
    let mut runs = Vec::new();
    for (leaf, why) in ATTACKS {
        let ws = Workspace::new();
        let proxy = TlsProxy::start(&pki, leaf, upstream);
        let tag = format!(
            "oci://[::ffff:127.0.0.1]:{}/rawko-tests/greeter:1",
            proxy.port
        );
        let r = run(trusting(&ws, &pki), &["plugin", "install", &tag, "--yes"]);
        let what = format!("OCI registry, {leaf:?}");
        assert_refused_at(&r, &proxy, "[::ffff:7f00:1]", why, &what);
        runs.push((leaf, r, proxy.port));
        let r = run(trusting(&ws, &pki), &["plugin", "list", "--json"]);
        assert_eq!(r.json(), serde_json::json!([]), "{r:?}");
    }
    insta::assert_snapshot!("oci_registry_refusals", refusals(&runs));

    let ws = Workspace::new();
    let proxy = TlsProxy::start(&pki, Leaf::Good, upstream);
    let tag = format!(
        "oci://[::ffff:127.0.0.1]:{}/rawko-tests/greeter:1",
        proxy.port
    );
    let r = run(trusting(&ws, &pki), &["plugin", "install", &tag, "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(proxy.handshakes() > 0);
    let r = run(trusting(&ws, &pki), &["plugin", "list", "--json"]);
    assert_eq!(r.json().as_array().map(Vec::len), Some(1), "{r:?}");
}

fn mcp_config(ws: &Workspace, url: &str) {
    let cfg = ws.config_home().join("rawko");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("config.yaml"),
        format!("mcp:\n  web:\n    url: {url}/mcp\n    allow_private_network: true\n"),
    )
    .unwrap();
}

#[test]
fn an_mcp_server_over_https_is_refused_when_its_certificate_does_not_verify() {
    let server = HttpEverything::start();
    let upstream = format!("127.0.0.1:{}", server.port).parse().unwrap();
    let pki = Pki::generate();
    let call = ["tool", "call", "mcp__web__echo", "--yes", "--input"];
    let mut runs = Vec::new();
    for (leaf, why) in ATTACKS {
        let ws = Workspace::new();
        let proxy = TlsProxy::start(&pki, leaf, upstream);
        mcp_config(&ws, &proxy.url());
        let r = run(
            trusting(&ws, &pki),
            &[&call[..], &[r#"{"message":"x"}"#]].concat(),
        );
        assert_refused(&r, &proxy, why, &format!("MCP, {leaf:?}"));
        runs.push((leaf, r, proxy.port));
    }
    insta::assert_snapshot!("mcp_refusals", refusals(&runs));

    let ws = Workspace::new();
    let proxy = TlsProxy::start(&pki, Leaf::Good, upstream);
    mcp_config(&ws, &proxy.url());
    let r = run(
        trusting(&ws, &pki),
        &[&call[..], &[r#"{"message":"over https"}"#]].concat(),
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "Echo: over https");
}
