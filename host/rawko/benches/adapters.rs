//! Adapter benchmarks: what a completion costs rawko itself, against the scripted model server
//! on loopback.
//!
//! ```sh
//! cargo bench -p rawko --bench adapters
//! ```
//!
//! `openai_json_4k` is the whole round trip of a 4 KB reply through the real path: a fresh
//! sandboxed instance of the OpenAI adapter, the request built in wasm, the host's HTTP
//! capability (grant check, credential, redaction), the loopback server, parsing and the host's
//! checks. `reqwest_4k` is the same HTTP exchange with a bare client, the floor set by the
//! network stack and the server; the difference is rawko's overhead. After the table, the
//! server's own time per request is printed, to subtract from both.

#[path = "../../../tests/support/model_server.rs"]
mod model_server;

use std::sync::{Arc, LazyLock};

use divan::Bencher;
use model_server::{ModelServer, anthropic, openai};
use rawko_adapters::instance::{AdapterOrigin, InstalledAdapters, Trust, resolve};
use rawko_adapters::{Adapter, OpenOptions};
use rawko_config::AdapterConfig;
use rawko_plugin_sdk::llm::Message;
use rawko_runtime::Runtime;
use rawko_runtime::progress::NoProgress;

fn main() {
    divan::main();
    let f = &*FIXTURE;
    for (name, s) in [
        ("openai", &f.openai_server),
        ("anthropic", &f.anthropic_server),
    ] {
        let hits = s.hits().max(1) as u32;
        println!(
            "{name} server: {} requests, {:?} of server time per request",
            s.hits(),
            s.busy() / hits
        );
    }
}

/// 4 KB of reply text.
fn text_4k() -> String {
    "The quick brown fox jumps over the lazy dog. ".repeat(4096 / 45 + 1)[..4096].to_string()
}

struct Fixture {
    tokio: tokio::runtime::Runtime,
    rt: Runtime,
    openai_server: ModelServer,
    anthropic_server: ModelServer,
    openai: Adapter,
    openai_stream: Adapter,
    anthropic: Adapter,
    raw: reqwest::Client,
}

fn open(tokio: &tokio::runtime::Runtime, rt: &Runtime, plugin: &str, base_url: String) -> Adapter {
    let cfg = AdapterConfig {
        plugin: plugin.into(),
        model: Some("bench-model".into()),
        base_url: Some(base_url),
        api_key_env: Some("RAWKO_BENCH_KEY".into()),
        allow_private_network: true,
        ..AdapterConfig::default()
    };
    let instance = resolve(
        "bench",
        &cfg,
        &AdapterOrigin::Builtin,
        None,
        Trust::Trusted,
        &InstalledAdapters::none(),
    )
    .unwrap();
    let env = |_: &str| Some("sk-bench-0123456789abcdef".to_string());
    tokio
        .block_on(Adapter::open(rt, instance, &env, OpenOptions::default()))
        .unwrap()
}

static FIXTURE: LazyLock<Fixture> = LazyLock::new(|| {
    let tokio = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let cache = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
    let rt = Runtime::new(Some(cache)).unwrap();
    let text = text_4k();
    let openai_server = ModelServer::start();
    openai_server.repeat(openai::text(&text, 100, 1000));
    let anthropic_server = ModelServer::start();
    anthropic_server.repeat(anthropic::text(&text, 100, 1000));
    let openai = open(&tokio, &rt, "openai", openai_server.base_url());
    let anthropic = open(&tokio, &rt, "anthropic", anthropic_server.base_url());
    let stream_server = Box::leak(Box::new(ModelServer::start()));
    let parts: Vec<String> = text
        .as_bytes()
        .chunks(100)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    stream_server.repeat(openai::stream_text(&parts, 100, 1000));
    let openai_stream = open(&tokio, &rt, "openai", stream_server.base_url());
    Fixture {
        tokio,
        rt,
        openai_server,
        anthropic_server,
        openai,
        openai_stream,
        anthropic,
        raw: {
            rawko_capability::tls::install_provider();
            reqwest::Client::builder().no_proxy().build().unwrap()
        },
    }
});

fn round_trip(b: Bencher, adapter: &Adapter, stream: bool) {
    let f = &*FIXTURE;
    let progress = Arc::new(NoProgress);
    b.bench(|| {
        let mut req = adapter.request("be brief", vec![Message::user("hello")], vec![]);
        req.stream = stream;
        let reply = f
            .tokio
            .block_on(adapter.complete(&f.rt, req, progress.clone()))
            .unwrap();
        assert_eq!(reply.text().len(), 4096);
    });
}

/// A 4 KB JSON reply through the OpenAI adapter.
#[divan::bench]
fn openai_json_4k(b: Bencher) {
    round_trip(b, &FIXTURE.openai, false);
}

/// A 4 KB reply streamed in 41 events through the OpenAI adapter.
#[divan::bench]
fn openai_stream_4k(b: Bencher) {
    round_trip(b, &FIXTURE.openai_stream, true);
}

/// A 4 KB JSON reply through the Anthropic adapter.
#[divan::bench]
fn anthropic_json_4k(b: Bencher) {
    round_trip(b, &FIXTURE.anthropic, false);
}

/// The same exchange as `openai_json_4k` with a bare HTTP client: the floor.
#[divan::bench]
fn reqwest_4k(b: Bencher) {
    let f = &*FIXTURE;
    let url = format!("{}/chat/completions", f.openai_server.base_url());
    let body = serde_json::json!({"model": "bench-model", "messages": [{"role": "user", "content": "hello"}]}).to_string();
    b.bench(|| {
        f.tokio.block_on(async {
            let r = f
                .raw
                .post(&url)
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .await
                .unwrap();
            let bytes = r.bytes().await.unwrap();
            assert!(bytes.len() > 4096);
        })
    });
}
