//! Faults between an adapter and its provider: what is retried, how often, how long the host
//! waits, and what the caller gets in the end. Attempts are counted by the host and by the
//! server, which must agree.

use std::time::{Duration, Instant};

use rawko_capability::http::HttpPolicy;
use rawko_plugin_sdk::llm::{AdapterError, Message};
use rawko_runtime::{AdapterCallError, Runtime};

use crate::support::model_server::{ModelServer, Reply, openai};
use crate::support::{block_on, cache_dir, fast_policy, open_adapter};

fn ask(rt: &Runtime, adapter: &rawko_adapters::Adapter) -> Result<String, AdapterCallError> {
    let mut req = adapter.request("", vec![Message::user("hi")], vec![]);
    req.stream = false;
    block_on(adapter.complete(
        rt,
        req,
        std::sync::Arc::new(rawko_runtime::progress::NoProgress),
    ))
    .map(|r| r.text())
}

#[test]
fn a_429_with_retry_after_is_waited_out_then_succeeds() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::error(429, "Rate limit reached").header("retry-after", "1"));
    server.push(openai::text("finally", 5, 1));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let started = Instant::now();
    assert_eq!(ask(&rt, &adapter).unwrap(), "finally");
    // The server's wait is honoured, not the (millisecond) backoff of the test policy.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
    let s = adapter.http_stats();
    assert_eq!((s.requests, s.attempts, s.retries), (1, 2, 1));
    assert_eq!(server.hits(), 2);
}

#[test]
fn two_500s_are_retried_then_the_reply_arrives() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::error(500, "boom"));
    server.push(openai::error(502, "bad gateway"));
    server.push(openai::text("ok", 5, 1));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    assert_eq!(ask(&rt, &adapter).unwrap(), "ok");
    let s = adapter.http_stats();
    assert_eq!((s.attempts, s.retries), (3, 2));
    assert_eq!(server.hits(), 3);
}

#[test]
fn retries_stop_at_the_limit_and_the_provider_error_is_passed_on() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    for _ in 0..5 {
        server.push(openai::error(503, "overloaded"));
    }
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let r = ask(&rt, &adapter);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Status { status: 503, message })) if message == "overloaded"),
        "{r:?}"
    );
    let s = adapter.http_stats();
    assert_eq!((s.attempts, s.retries), (4, 3));
    assert_eq!(server.hits(), 4);
    assert_eq!(server.left(), 1, "no fifth attempt");
}

#[test]
fn a_retry_after_beyond_the_retry_window_is_not_waited_for() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::error(429, "come back in an hour").header("retry-after", "3600"));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let r = ask(&rt, &adapter);
    assert!(
        matches!(
            &r,
            Err(AdapterCallError::Adapter(AdapterError::Status {
                status: 429,
                ..
            }))
        ),
        "{r:?}"
    );
    assert_eq!(adapter.http_stats().attempts, 1);
}

#[test]
fn client_errors_are_not_retried() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::error(401, "Incorrect API key provided"));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    let r = ask(&rt, &adapter);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Status { status: 401, message })) if message.contains("Incorrect API key")),
        "{r:?}"
    );
    assert_eq!((adapter.http_stats().attempts, server.hits()), (1, 1));
}

#[test]
fn connection_refused_is_retried_then_reported() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    // A port that was just free: nothing listens there now.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let adapter = open_adapter(
        &rt,
        "openai",
        &format!("http://127.0.0.1:{port}/v1"),
        fast_policy(),
    );
    let r = ask(&rt, &adapter);
    match r {
        Err(AdapterCallError::Adapter(AdapterError::Transport { message })) => {
            assert!(
                message.contains("cannot connect") && message.contains("after 4 attempts"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    let s = adapter.http_stats();
    assert_eq!((s.attempts, s.retries), (4, 3));
}

#[test]
fn a_request_past_its_timeout_fails_without_retrying() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::text("too late", 1, 1).delay(Duration::from_secs(3)));
    let policy = HttpPolicy {
        timeout: Duration::from_millis(300),
        ..fast_policy()
    };
    let adapter = open_adapter(&rt, "openai", &server.base_url(), policy);
    let r = ask(&rt, &adapter);
    assert!(
        matches!(&r, Err(AdapterCallError::Adapter(AdapterError::Transport { message })) if message.contains("timed out")),
        "{r:?}"
    );
    let s = adapter.http_stats();
    assert_eq!((s.attempts, s.retries), (1, 0));
}

#[test]
fn a_500_then_a_dropped_connection_then_success() {
    let rt = Runtime::new(Some(cache_dir())).unwrap();
    let server = ModelServer::start();
    server.push(openai::error(500, "boom"));
    server.push(Reply::hang_up());
    server.push(openai::text("ok", 1, 1));
    let adapter = open_adapter(&rt, "openai", &server.base_url(), fast_policy());
    // A connection closed before any response is the peer breaking the protocol, not a
    // connection error: the request may have been processed, so it is not sent again.
    let r = ask(&rt, &adapter);
    assert!(
        matches!(
            &r,
            Err(AdapterCallError::Adapter(AdapterError::Transport { .. }))
        ),
        "{r:?}"
    );
    assert_eq!(adapter.http_stats().retries, 1);
    assert_eq!(server.hits(), 2);
}
