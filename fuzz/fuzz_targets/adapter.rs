//! What a model provider sends back, read by the first-party adapters: JSON replies, server-sent
//! event streams and embeddings. Invariants: no panic; the event parser gives the same events
//! whether the body arrives at once or in pieces; a reply the adapters accept has tool calls
//! with ids and JSON-object arguments as the host requires of them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rawko_plugin_sdk::adapter::StreamParser;
use rawko_plugin_sdk::llm::{AdapterError, Content, Response};
use rawko_plugin_sdk::sse;

fn stream<S: StreamParser>(mut parser: S, events: &[sse::Event]) -> Result<Response, AdapterError> {
    for e in events {
        if parser.feed(e, &mut |_| {})? {
            break;
        }
    }
    parser.finish()
}

fn check(reply: Result<Response, AdapterError>) {
    if let Ok(r) = reply {
        for c in &r.content {
            if let Content::ToolCall(t) = c {
                // The host refuses what is not an object; the adapter must not invent one.
                let _ = serde_json::from_str::<serde_json::Value>(&t.arguments);
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut whole = sse::Parser::new();
    let events = whole.feed(rest);
    let truncated = whole.finish();
    let step = usize::from(pick >> 3) % 13 + 1;
    let mut parts = sse::Parser::new();
    let mut pieces = Vec::new();
    for c in rest.chunks(step) {
        pieces.extend(parts.feed(c));
    }
    assert_eq!(events, pieces, "events differ when the body arrives {step} bytes at a time");
    assert_eq!(truncated, parts.finish());

    match pick % 5 {
        0 => check(rawko_adapter_openai::wire::parse_response(rest)),
        1 => check(rawko_adapter_anthropic::wire::parse_response(rest)),
        2 => check(stream(rawko_adapter_openai::stream::Accumulator::default(), &events)),
        3 => check(stream(rawko_adapter_anthropic::stream::Accumulator::default(), &events)),
        _ => {
            let n = usize::from(pick >> 3);
            if let Ok(e) = rawko_adapter_openai::embeddings::parse_response(rest, n, "m") {
                assert_eq!(e.vectors.len(), n);
            }
        }
    }
});
