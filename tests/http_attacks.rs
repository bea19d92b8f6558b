//! Attacks on the `http` capability from a real hostile adapter plugin: reaching a host outside
//! its grant, directly or by redirect or DNS; reading the API key; exhausting the host with a
//! huge or never-ending response, with requests, with responses held open, or with progress
//! text. Each must fail cleanly, the key must never reach the plugin, and the same host must
//! then serve a normal call. Beside them, embeddings no one could use (the wrong count, ragged,
//! NaN, oversized) are refused by the host whatever the adapter says.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rawko_capability::FsGrants;
use rawko_capability::http::{
    Credential, CredentialScheme, HttpClient, HttpGrant, HttpPolicy, Origin, Secret,
};
use rawko_plugin_sdk::embeddings::EmbedRequest;
use rawko_plugin_sdk::llm::{AdapterError, Message, Request};
use rawko_runtime::adapter::AdapterCallContext;
use rawko_runtime::progress::{MAX_PROGRESS_BYTES, NoProgress, ProgressSink};
use rawko_runtime::{AdapterCallError, AdapterPlugin, Budget, Runtime};
use serde_json::{Value, json};

use crate::support::model_server::{ModelServer, Reply, openai};
use crate::support::{TEST_KEY, block_on, cache_dir, fast_policy};

struct Harness {
    rt: Runtime,
    plugin: AdapterPlugin,
    /// The granted server.
    server: ModelServer,
    /// A server outside the grant, which must never hear from the plugin.
    other: ModelServer,
}

impl Harness {
    fn new() -> Harness {
        let rt = Runtime::new(Some(cache_dir())).unwrap();
        let wasm =
            std::fs::read(rawko_test_artifacts::HOSTILE_ADAPTER).expect("hostile adapter built");
        let plugin = block_on(AdapterPlugin::load(&rt, "hostile", &wasm)).expect("load");
        Harness {
            rt,
            plugin,
            server: ModelServer::start(),
            other: ModelServer::start(),
        }
    }

    fn origin(&self) -> Origin {
        Origin::parse(&self.server.url()).unwrap()
    }

    /// A client granted the server's origin (private addresses allowed: it is on loopback),
    /// holding the key for it.
    fn client(&self, policy: HttpPolicy) -> HttpClient {
        let mut grant = HttpGrant::none();
        grant.allow(self.origin(), true);
        self.client_with(grant, self.origin(), policy, HashMap::new())
    }

    fn client_with(
        &self,
        grant: HttpGrant,
        key_origin: Origin,
        policy: HttpPolicy,
        fixed: HashMap<String, Vec<IpAddr>>,
    ) -> HttpClient {
        let credential = Credential {
            origin: key_origin,
            scheme: CredentialScheme::Bearer,
            secret: Secret::new(TEST_KEY.into()),
        };
        HttpClient::new(grant, vec![credential], policy, fixed).unwrap()
    }

    fn attack_with(&self, client: HttpClient, cmd: Value) -> Result<String, AdapterCallError> {
        self.attack_watched(client, cmd, Arc::new(NoProgress))
    }

    /// An attack whose progress reports go to `progress`.
    fn attack_watched(
        &self,
        client: HttpClient,
        cmd: Value,
        progress: Arc<dyn ProgressSink>,
    ) -> Result<String, AdapterCallError> {
        let request = Request {
            model: "hostile".into(),
            base_url: self.server.base_url(),
            system: String::new(),
            messages: vec![Message::user(cmd.to_string())],
            tools: vec![],
            options: Default::default(),
            stream: false,
            sequence: 0,
        };
        let files = FsGrants::none();
        let cx = AdapterCallContext {
            http: Some(Arc::new(client)),
            files: &files,
            progress,
            budget: Budget {
                timeout: Duration::from_secs(20),
                ..Budget::default()
            },
        };
        let r = block_on(self.plugin.complete(&self.rt, &request, &cx)).map(|r| r.text());
        if let Ok(text) = &r {
            assert!(
                !text.contains(TEST_KEY),
                "the key reached the plugin: {text}"
            );
        }
        if let Err(e) = &r {
            assert!(
                !e.to_string().contains(TEST_KEY),
                "the key is in an error: {e}"
            );
        }
        r
    }

    fn attack(&self, cmd: Value) -> String {
        self.attack_with(self.client(fast_policy()), cmd)
            .expect("the plugin answers with what it got")
    }

    /// Embed `inputs`, the first being the plugin's command.
    fn embed(&self, inputs: &[String]) -> Result<usize, AdapterCallError> {
        let request = EmbedRequest {
            model: "hostile".into(),
            base_url: self.server.base_url(),
            inputs: inputs.to_vec(),
            dimensions: None,
        };
        let files = FsGrants::none();
        let cx = AdapterCallContext {
            http: Some(Arc::new(self.client(fast_policy()))),
            files: &files,
            progress: Arc::new(NoProgress),
            budget: Budget::default(),
        };
        block_on(self.plugin.embed(&self.rt, &request, &cx)).map(|e| e.dimensions())
    }

    /// After an attack: a normal request through the same runtime works.
    fn assert_healthy(&self) {
        self.server.push(openai::text("still fine", 1, 1));
        let out = self.attack(json!({"fetch": format!("{}/v1/health", self.server.url())}));
        assert!(
            out.starts_with("ok status=200") && out.contains("still fine"),
            "{out}"
        );
    }
}

#[test]
fn hosts_outside_the_grant_are_refused_before_any_connection() {
    let h = Harness::new();
    let port = h.server.addr().port();
    for url in [
        format!("{}/steal", h.other.url()),
        format!("http://localhost:{port}/v1"),
        format!("https://127.0.0.1:{port}/v1"),
        format!("http://127.0.0.2:{port}/v1"),
        format!("http://user:pw@127.0.0.1:{port}/v1"),
        "file:///etc/passwd".to_string(),
        "http://[::1]:1/".to_string(),
    ] {
        let out = h.attack(json!({ "fetch": url }));
        assert!(
            out.starts_with("err denied:") || out.starts_with("err invalid request"),
            "{url}: {out}"
        );
    }
    assert_eq!(h.other.hits(), 0);
    assert_eq!(h.server.hits(), 0);
    h.assert_healthy();
}

#[test]
fn a_redirect_out_of_the_grant_is_not_followed() {
    let h = Harness::new();
    h.server
        .push(Reply::redirect(302, &format!("{}/steal", h.other.url())));
    let out = h.attack(json!({"fetch": format!("{}/v1/models", h.server.url())}));
    assert!(out.starts_with("err denied: redirect from"), "{out}");
    assert_eq!(h.other.hits(), 0, "the redirect target was contacted");
    // A redirect inside the grant is followed by the host, with the key still attached.
    h.server.push(Reply::redirect(307, "/v1/moved"));
    h.server.push(Reply::echo_headers());
    let out = h.attack(json!({"fetch": format!("{}/v1/models", h.server.url())}));
    assert!(out.starts_with("ok status=200"), "{out}");
    let got = h.server.received();
    assert_eq!(got.last().unwrap().path, "/v1/moved");
    assert_eq!(
        got.last().unwrap().header("authorization"),
        Some(&*format!("Bearer {TEST_KEY}"))
    );
    h.assert_healthy();
}

#[test]
fn a_granted_name_that_resolves_to_a_private_address_is_refused() {
    let h = Harness::new();
    let port = h.server.addr().port();
    let named = Origin::parse(&format!("http://model.test:{port}")).unwrap();
    let fixed = HashMap::from([("model.test".to_string(), vec!["127.0.0.1".parse().unwrap()])]);
    let url = format!("http://model.test:{port}/v1/models");

    // Granted by name only: the address it resolves to is loopback, so it is refused.
    let mut grant = HttpGrant::none();
    grant.allow(named.clone(), false);
    let client = h.client_with(grant, named.clone(), fast_policy(), fixed.clone());
    let out = h.attack_with(client, json!({ "fetch": url })).unwrap();
    assert!(
        out.starts_with("err denied:") && out.contains("loopback"),
        "{out}"
    );
    assert_eq!(h.server.hits(), 0);

    // The same for an address literal granted without private access.
    let literal = h.origin();
    let mut grant = HttpGrant::none();
    grant.allow(literal.clone(), false);
    let client = h.client_with(grant, literal, fast_policy(), HashMap::new());
    let out = h
        .attack_with(
            client,
            json!({"fetch": format!("{}/v1/models", h.server.url())}),
        )
        .unwrap();
    assert!(
        out.starts_with("err denied:") && out.contains("allow_private_network"),
        "{out}"
    );
    assert_eq!(h.server.hits(), 0);

    // Granted on purpose, it is reached.
    let mut grant = HttpGrant::none();
    grant.allow(named.clone(), true);
    let client = h.client_with(grant, named, fast_policy(), fixed);
    h.server.push(openai::text("local model", 1, 1));
    let out = h.attack_with(client, json!({ "fetch": url })).unwrap();
    assert!(out.starts_with("ok status=200"), "{out}");
    h.assert_healthy();
}

#[test]
fn the_plugin_cannot_read_the_api_key() {
    let h = Harness::new();
    // Not in its environment.
    let out = h.attack(json!({"env": true}));
    assert_eq!(out, "vars=");
    // Not from a server that echoes the request's headers back, in the body or in a header.
    h.server
        .push(Reply::echo_headers().header("x-echo", &format!("Bearer {TEST_KEY}")));
    let out = h.attack(json!({"fetch": format!("{}/v1/echo", h.server.url())}));
    assert!(out.starts_with("ok status=200"), "{out}");
    assert!(
        out.contains("\"authorization\":\"Bearer [redacted]\""),
        "{out}"
    );
    assert!(out.contains("x-echo: Bearer [redacted]"), "{out}");
    // Not when the echo is streamed in pieces that split the key.
    let body = format!("{{\"echo\":\"{TEST_KEY}\"}}");
    let (a, b) = body.split_at(14);
    h.server
        .push(Reply::sse(vec![a.to_string(), b.to_string()]));
    let out = h.attack(json!({"stream": format!("{}/v1/echo", h.server.url())}));
    assert!(out.contains("{\"echo\":\"[redacted]\"}"), "{out}");
    // A header the plugin sets in the credential's place is replaced, not added.
    h.server.push(Reply::echo_headers());
    h.attack(json!({
        "post": format!("{}/v1/echo", h.server.url()),
        "headers": [["Authorization", "Bearer chosen-by-plugin"], ["Host", "evil.example"]],
    }));
    let last = h.server.received().pop().unwrap();
    let auth: Vec<_> = last
        .headers
        .iter()
        .filter(|(k, _)| k == "authorization")
        .collect();
    assert_eq!(auth.len(), 1);
    assert_eq!(auth[0].1, format!("Bearer {TEST_KEY}"));
    assert_ne!(last.header("host"), Some("evil.example"));
    // And the key is sent to nobody else: another granted origin without a credential.
    let mut grant = HttpGrant::none();
    grant.allow(h.origin(), true);
    let other = Origin::parse(&h.other.url()).unwrap();
    grant.allow(other, true);
    let client = h.client_with(grant, h.origin(), fast_policy(), HashMap::new());
    h.other.push(Reply::echo_headers());
    let out = h
        .attack_with(
            client,
            json!({"fetch": format!("{}/v1/echo", h.other.url())}),
        )
        .unwrap();
    assert!(!out.contains("authorization"), "{out}");
    h.assert_healthy();
}

#[test]
fn a_huge_response_stops_at_the_cap() {
    let h = Harness::new();
    let policy = || HttpPolicy {
        max_body: 1 << 20,
        ..fast_policy()
    };
    for cmd in ["fetch", "stream"] {
        h.server.push(Reply::huge(16 << 20));
        let out = h
            .attack_with(
                h.client(policy()),
                json!({ cmd: format!("{}/v1/huge", h.server.url()) }),
            )
            .unwrap();
        assert_eq!(
            out, "err reading body: the response is larger than the 1048576-byte limit",
            "{cmd}"
        );
    }
    // A declared length over the cap is refused before the body is read.
    h.server
        .push(Reply::bytes(200, "application/json", vec![b' '; 2 << 20]));
    let out = h
        .attack_with(
            h.client(policy()),
            json!({"fetch": format!("{}/v1/huge", h.server.url())}),
        )
        .unwrap();
    assert!(out.contains("larger than the 1048576-byte limit"), "{out}");
    h.assert_healthy();
}

#[test]
fn a_slow_loris_response_hits_the_deadline() {
    let h = Harness::new();
    let policy = || HttpPolicy {
        timeout: Duration::from_millis(500),
        ..fast_policy()
    };
    h.server.push(Reply::slow_loris(Duration::from_millis(50)));
    let started = Instant::now();
    let out = h
        .attack_with(
            h.client(policy()),
            json!({"stream": format!("{}/v1/slow", h.server.url())}),
        )
        .unwrap();
    assert_eq!(out, "err reading body: timed out");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // A head that never comes.
    h.server
        .push(Reply::status(200).delay(Duration::from_secs(5)));
    let out = h
        .attack_with(
            h.client(policy()),
            json!({"fetch": format!("{}/v1/slow", h.server.url())}),
        )
        .unwrap();
    assert_eq!(out, "err timed out");
    h.assert_healthy();
}

#[test]
fn a_flood_of_requests_is_cut_off() {
    let h = Harness::new();
    h.server.repeat(Reply::status(204));
    let out = h.attack(json!({"spin_fetch": format!("{}/v1/x", h.server.url()), "n": 1000}));
    assert!(
        out.starts_with("err denied: more than 16 requests"),
        "{out}"
    );
    assert_eq!(h.server.hits(), 16);
}

#[test]
fn responses_held_open_are_capped() {
    let h = Harness::new();
    h.server.repeat(Reply::status(200));
    let cap = fast_policy().max_open_responses;
    let out = h.attack(json!({"hold": format!("{}/v1/x", h.server.url()), "n": 100}));
    assert!(
        out.starts_with(&format!(
            "held={cap} err invalid request: more than {cap} responses open at once"
        )),
        "{out}"
    );
    assert_eq!(h.server.hits(), cap as usize);
    h.assert_healthy();
}

/// Counts the progress text that reaches the terminal's side.
#[derive(Default)]
struct Count(std::sync::atomic::AtomicUsize);

impl ProgressSink for Count {
    fn text(&self, delta: &str) {
        self.0
            .fetch_add(delta.len(), std::sync::atomic::Ordering::Relaxed);
    }
    fn thinking(&self, delta: &str) {
        self.text(delta);
    }
}

#[test]
fn a_flood_of_progress_text_is_cut_off() {
    let h = Harness::new();
    let seen = Arc::new(Count::default());
    let out = h
        .attack_watched(
            h.client(fast_policy()),
            json!({"shout": 4 * MAX_PROGRESS_BYTES}),
            seen.clone(),
        )
        .unwrap();
    assert_eq!(out, "shouted");
    assert_eq!(
        seen.0.load(std::sync::atomic::Ordering::Relaxed),
        MAX_PROGRESS_BYTES
    );
    h.assert_healthy();
}

#[test]
fn embeddings_no_one_could_use_are_refused_by_the_host() {
    let h = Harness::new();
    let two = |cmd: serde_json::Value| [cmd.to_string(), "second".to_string()];
    assert_eq!(
        h.embed(&two(json!({"vectors": [[1.0, 2.0], [3.0, 4.0]]})))
            .unwrap(),
        2
    );
    for (cmd, what) in [
        (
            json!({"vectors": [[1.0, 2.0]]}),
            "1 embedding vectors for 2 inputs",
        ),
        (
            json!({"vectors": [[1.0], [2.0], [3.0]]}),
            "3 embedding vectors for 2 inputs",
        ),
        (
            json!({"vectors": [[1.0, 2.0], [3.0]]}),
            "has 1 numbers where",
        ),
        (json!({"vectors": [[], []]}), "is empty"),
        (json!({"nan": true}), "not finite"),
    ] {
        match h.embed(&two(cmd.clone())) {
            Err(AdapterCallError::Adapter(AdapterError::Malformed { message })) => {
                assert!(message.contains(what), "{cmd}: {message}")
            }
            other => panic!("{cmd}: {other:?}"),
        }
    }
    // Two vectors of 200,000 numbers: 1.6 MB, over the 1 MiB output budget.
    let r = h.embed(&two(json!({"huge": 200_000})));
    assert!(matches!(&r, Err(e) if e.code() == "budget_output"), "{r:?}");
    h.assert_healthy();
}
