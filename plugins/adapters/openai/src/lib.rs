//! rawko's adapter for the OpenAI Chat Completions API, and every server that speaks it
//! (Ollama, vLLM, the llama.cpp server, LM Studio, OpenRouter) through `base_url`.
//!
//! The plugin only translates: `wire` turns the provider-neutral request into a
//! `POST {base_url}/chat/completions` body and a JSON reply back, `stream` assembles a
//! streamed reply from its server-sent events, and `embeddings` does the same for
//! `POST {base_url}/embeddings`. The host sends the request, adds the API key and enforces the
//! grant; this code never sees the key.
//!
//! Adapter options (`options:` in the adapter instance's config):
//! - `max_tokens_param`: the body field for the output limit, `max_tokens` or
//!   `max_completion_tokens` (the default for api.openai.com, whose reasoning models refuse the
//!   older name; other servers get `max_tokens`).
//! - `stream_usage`: ask for token usage at the end of a stream (`stream_options.include_usage`,
//!   default true); turn off for servers that reject it.
//! - `body`: a JSON object merged into the request body as is (`seed`, `top_p`, ...).

// Public only so the fuzz targets (fuzz/) can call the parsers natively.
#[doc(hidden)]
pub mod embeddings;
#[doc(hidden)]
pub mod stream;
#[doc(hidden)]
pub mod wire;

use rawko_plugin_sdk::adapter::{Adapter, exchange, http};
use rawko_plugin_sdk::embeddings::{EmbedRequest, Embeddings};
use rawko_plugin_sdk::llm::{AdapterError, Request, Response};

struct OpenAi;

impl Adapter for OpenAi {
    fn complete(request: Request) -> Result<Response, AdapterError> {
        let body = wire::request_body(&request)?;
        let url = format!(
            "{}/chat/completions",
            request.base_url.trim_end_matches('/')
        );
        exchange(
            http::Request::post(url).json(&body),
            wire::parse_response,
            stream::Accumulator::default(),
        )
    }

    fn embed(request: EmbedRequest) -> Result<Embeddings, AdapterError> {
        if request.inputs.is_empty() {
            return Ok(Embeddings {
                vectors: Vec::new(),
                model: request.model,
                usage: Default::default(),
            });
        }
        let url = format!("{}/embeddings", request.base_url.trim_end_matches('/'));
        let mut reply = http::Request::post(url)
            .json(&embeddings::request_body(&request))
            .send()?;
        if !reply.is_success() {
            return Err(reply.error());
        }
        embeddings::parse_response(&reply.read_all()?, request.inputs.len(), &request.model)
    }
}

rawko_plugin_sdk::export_adapter!(OpenAi);
rawko_plugin_sdk::manifest!();
