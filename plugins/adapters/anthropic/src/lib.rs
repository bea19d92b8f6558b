//! rawko's adapter for the Anthropic Messages API.
//!
//! `wire` turns the provider-neutral request into a `POST {base_url}/messages` body (system
//! prompt, content blocks, `tool_use` / `tool_result`, `max_tokens`, extended thinking) and a
//! JSON reply back; `stream` assembles a streamed reply from its events. The host adds the
//! `x-api-key` header; this code never sees the key.
//!
//! Adapter options (`options:` in the adapter instance's config):
//! - `anthropic_version`: the `anthropic-version` header (default `2023-06-01`).
//! - `beta`: the `anthropic-beta` header, for features still in beta.
//! - `body`: a JSON object merged into the request body as is (`top_k`, `metadata`, ...).
//!
//! `max_tokens` is required by the API: without one in the request the adapter asks for 8192
//! (more when a thinking budget needs room). A `reasoning_effort` without a thinking budget
//! turns thinking on with a budget of 2048, 8192 or 24576 tokens for low, medium and high.

// Public only so the fuzz targets (fuzz/) can call the parsers natively.
#[doc(hidden)]
pub mod stream;
#[doc(hidden)]
pub mod wire;

use rawko_plugin_sdk::adapter::{Adapter, exchange, http};
use rawko_plugin_sdk::llm::{AdapterError, Request, Response};

struct Anthropic;

impl Adapter for Anthropic {
    fn complete(request: Request) -> Result<Response, AdapterError> {
        let (body, headers) = wire::build(&request)?;
        let url = format!("{}/messages", request.base_url.trim_end_matches('/'));
        let mut req = http::Request::post(url).json(&body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        exchange(req, wire::parse_response, stream::Accumulator::default())
    }
}

rawko_plugin_sdk::export_adapter!(Anthropic);
rawko_plugin_sdk::manifest!();
