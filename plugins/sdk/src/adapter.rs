//! Adapter plugins: the [`Adapter`] trait, [`export_adapter!`](crate::export_adapter), and the host's HTTP and progress
//! capabilities in a form that is pleasant to call.
//!
//! An adapter turns a provider-neutral [`Request`] into one provider's wire format, sends it
//! through [`http`] (the host's network, which admits only granted hosts and adds the API key
//! itself), and turns the answer back into a [`Response`]. Streamed replies are parsed with
//! [`crate::sse`] and reported with [`report_text`] as they arrive. An adapter whose provider
//! has embeddings implements [`Adapter::embed`] too; the others keep its default, which answers
//! [`AdapterError::Unsupported`].
//!
//! ```ignore
//! use rawko_plugin_sdk::adapter::{Adapter, http};
//! use rawko_plugin_sdk::llm::{AdapterError, Content, Request, Response, StopReason, Usage};
//!
//! struct Echo;
//!
//! impl Adapter for Echo {
//!     fn complete(request: Request) -> Result<Response, AdapterError> {
//!         let mut reply = http::Request::post(format!("{}/echo", request.base_url))
//!             .json(&request.messages)
//!             .send()?;
//!         if !reply.is_success() {
//!             return Err(reply.error());
//!         }
//!         let text = String::from_utf8_lossy(&reply.read_all()?).into_owned();
//!         Ok(Response {
//!             content: vec![Content::text(text)],
//!             stop_reason: StopReason::EndTurn,
//!             usage: Usage::default(),
//!             model: request.model,
//!         })
//!     }
//! }
//!
//! rawko_plugin_sdk::export_adapter!(Echo);
//! ```

pub use crate::embeddings::{EmbedRequest, Embeddings};
pub use crate::llm::{AdapterError, Request, Response};

/// An LLM provider client. Implement it on a unit struct and name the struct in
/// [`export_adapter!`](crate::export_adapter).
pub trait Adapter {
    /// Ask the model for its next message. Malformed provider output is an
    /// [`AdapterError::Malformed`], never a panic: a panic is reported by the host as a crash.
    fn complete(request: Request) -> Result<Response, AdapterError>;

    /// Embed each of the request's inputs: one vector per input, in order. Check the
    /// provider's answer with [`Embeddings::checked`]. The default answers
    /// [`AdapterError::Unsupported`]: the adapter has no embeddings.
    fn embed(request: EmbedRequest) -> Result<Embeddings, AdapterError> {
        Err(AdapterError::unsupported(format!(
            "this adapter has no embeddings (asked to embed with model {:?})",
            request.model
        )))
    }
}

/// Report visible text the model produced since the last report, so the host can show it live.
pub fn report_text(delta: &str) {
    if !delta.is_empty() {
        crate::__private::adapter::bindings::rawko::plugin::progress::text(delta);
    }
}

/// Report reasoning text the model produced since the last report.
pub fn report_thinking(delta: &str) {
    if !delta.is_empty() {
        crate::__private::adapter::bindings::rawko::plugin::progress::thinking(delta);
    }
}

/// Something a streamed reply showed, to report as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delta<'a> {
    Text(&'a str),
    Thinking(&'a str),
}

/// A provider's streamed reply being put together, one server-sent event at a time.
pub trait StreamParser {
    /// Take one event, passing what it shows to `show`. `Ok(true)` when it ends the reply.
    fn feed(
        &mut self,
        event: &crate::sse::Event,
        show: &mut dyn FnMut(Delta<'_>),
    ) -> Result<bool, AdapterError>;

    /// The reply, once the stream is over. A stream that stopped before its documented end
    /// is [`AdapterError::Malformed`].
    fn finish(self) -> Result<Response, AdapterError>;
}

/// Send `request` and make a reply of the answer: an error status becomes the provider's
/// error, an event stream goes through `stream` (its text reported live), and anything else,
/// a reply in one piece, through `parse`. Servers that ignore a request to stream are handled
/// by the same call.
pub fn exchange<S: StreamParser>(
    request: http::Request,
    parse: impl FnOnce(&[u8]) -> Result<Response, AdapterError>,
    mut stream: S,
) -> Result<Response, AdapterError> {
    let mut reply = request.send()?;
    if !reply.is_success() {
        return Err(reply.error());
    }
    if !reply.is_event_stream() {
        return parse(&reply.read_all()?);
    }
    let mut show = |d: Delta<'_>| match d {
        Delta::Text(t) => report_text(t),
        Delta::Thinking(t) => report_thinking(t),
    };
    for event in reply.events() {
        if stream.feed(&event?, &mut show)? {
            break;
        }
    }
    stream.finish()
}

/// Register the plugin's adapter:
///
/// ```ignore
/// rawko_plugin_sdk::export_adapter!(OpenAi);
/// ```
#[macro_export]
macro_rules! export_adapter {
    ($adapter:ty) => {
        #[doc(hidden)]
        pub struct __RawkoAdapterPlugin;

        impl $crate::__private::adapter::LlmGuest for __RawkoAdapterPlugin {
            fn complete(
                request: $crate::__private::adapter::WitRequest,
            ) -> ::std::result::Result<
                $crate::__private::adapter::WitResponse,
                $crate::__private::adapter::WitAdapterError,
            > {
                $crate::__private::adapter::dispatch::<$adapter>(request)
            }
        }

        impl $crate::__private::adapter::EmbeddingsGuest for __RawkoAdapterPlugin {
            fn embed(
                request: $crate::__private::adapter::WitEmbedRequest,
            ) -> ::std::result::Result<
                $crate::__private::adapter::WitEmbedResponse,
                $crate::__private::adapter::WitAdapterError,
            > {
                $crate::__private::adapter::dispatch_embed::<$adapter>(request)
            }
        }

        // WIT export names only link on wasm; native builds (unit tests) leave them out.
        #[cfg(target_arch = "wasm32")]
        $crate::__private::adapter::bindings::__export_adapter_world!(
            __RawkoAdapterPlugin with_types_in $crate::__private::adapter::bindings
        );
    };
}

/// The host's HTTP capability.
pub mod http {
    use std::time::Duration;

    use crate::__private::adapter::bindings::rawko::plugin::http as wit;
    use crate::llm::AdapterError;
    use crate::sse;

    /// The request method.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Method {
        Get,
        Head,
        Post,
        Put,
        Patch,
        Delete,
    }

    /// Why a request failed, as the host reports it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum HttpError {
        /// The URL, an address it resolved to, or a redirect target is not granted.
        Denied(String),
        /// The URL or request is malformed.
        InvalidRequest(String),
        /// No connection, after the host's retries.
        Connect(String),
        /// The request's deadline passed.
        Timeout,
        /// The body is larger than the host's cap (bytes).
        TooLarge(u64),
        /// The peer broke the protocol or hung up mid-response.
        Protocol(String),
    }

    impl std::fmt::Display for HttpError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                HttpError::Denied(m) => write!(f, "denied: {m}"),
                HttpError::InvalidRequest(m) => write!(f, "invalid request: {m}"),
                HttpError::Connect(m) => write!(f, "cannot connect: {m}"),
                HttpError::Timeout => f.write_str("timed out"),
                HttpError::TooLarge(cap) => {
                    write!(f, "the response is larger than the {cap}-byte limit")
                }
                HttpError::Protocol(m) => write!(f, "protocol error: {m}"),
            }
        }
    }

    impl std::error::Error for HttpError {}

    impl From<HttpError> for AdapterError {
        fn from(e: HttpError) -> Self {
            AdapterError::transport(e.to_string())
        }
    }

    impl From<wit::HttpError> for HttpError {
        fn from(e: wit::HttpError) -> Self {
            match e {
                wit::HttpError::Denied(m) => HttpError::Denied(m),
                wit::HttpError::InvalidRequest(m) => HttpError::InvalidRequest(m),
                wit::HttpError::Connect(m) => HttpError::Connect(m),
                wit::HttpError::Timeout => HttpError::Timeout,
                wit::HttpError::TooLarge(n) => HttpError::TooLarge(n),
                wit::HttpError::Protocol(m) => HttpError::Protocol(m),
            }
        }
    }

    /// A request being built.
    #[derive(Debug, Clone)]
    pub struct Request {
        pub method: Method,
        pub url: String,
        pub headers: Vec<(String, String)>,
        pub body: Vec<u8>,
        /// At most this long, reading the body included; the host caps it.
        pub timeout: Option<Duration>,
    }

    impl Request {
        pub fn new(method: Method, url: impl Into<String>) -> Self {
            Request {
                method,
                url: url.into(),
                headers: Vec::new(),
                body: Vec::new(),
                timeout: None,
            }
        }

        pub fn get(url: impl Into<String>) -> Self {
            Request::new(Method::Get, url)
        }

        pub fn post(url: impl Into<String>) -> Self {
            Request::new(Method::Post, url)
        }

        /// Add a header.
        pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
            self.headers.push((name.into(), value.into()));
            self
        }

        /// Send `value` as the JSON body.
        pub fn json(mut self, value: &impl serde::Serialize) -> Self {
            // Serializing the SDK's and adapters' own data types cannot fail.
            self.body = serde_json::to_vec(value).unwrap_or_default();
            self.header("content-type", "application/json")
        }

        pub fn timeout(mut self, timeout: Duration) -> Self {
            self.timeout = Some(timeout);
            self
        }

        /// Send it and wait for the response head. The host has already followed redirects
        /// within the grant and retried what is worth retrying.
        pub fn send(self) -> Result<Response, HttpError> {
            let req = wit::Request {
                method: match self.method {
                    Method::Get => wit::Method::Get,
                    Method::Head => wit::Method::Head,
                    Method::Post => wit::Method::Post,
                    Method::Put => wit::Method::Put,
                    Method::Patch => wit::Method::Patch,
                    Method::Delete => wit::Method::Delete,
                },
                url: self.url,
                headers: self.headers,
                body: self.body,
                timeout_ms: self
                    .timeout
                    .map(|d| u32::try_from(d.as_millis()).unwrap_or(u32::MAX)),
            };
            let inner = wit::send(&req)?;
            Ok(Response {
                status: inner.status(),
                headers: inner.headers(),
                inner,
            })
        }
    }

    /// A response whose body has not been read yet.
    #[derive(Debug)]
    pub struct Response {
        inner: wit::Response,
        status: u16,
        headers: Vec<(String, String)>,
    }

    impl Response {
        pub fn status(&self) -> u16 {
            self.status
        }

        pub fn is_success(&self) -> bool {
            (200..300).contains(&self.status)
        }

        /// Whether the body is server-sent events.
        pub fn is_event_stream(&self) -> bool {
            self.header("content-type")
                .is_some_and(|t| t.trim_start().starts_with("text/event-stream"))
        }

        pub fn headers(&self) -> &[(String, String)] {
            &self.headers
        }

        /// The first header called `name` (any case).
        pub fn header(&self, name: &str) -> Option<&str> {
            self.headers
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.as_str())
        }

        /// The next part of the body, `None` at its end.
        pub fn read(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
            Ok(self.inner.read()?)
        }

        /// The rest of the body.
        pub fn read_all(&mut self) -> Result<Vec<u8>, HttpError> {
            Ok(self.inner.read_all()?)
        }

        /// The body as server-sent events, parsed as they arrive.
        pub fn events(&mut self) -> Events<'_> {
            Events {
                response: self,
                parser: sse::Parser::new(),
                ready: std::collections::VecDeque::new(),
                done: false,
            }
        }

        /// Read the rest of the body and turn an error status into the provider's error.
        pub fn error(mut self) -> AdapterError {
            match self.read_all() {
                Ok(body) => super::status_error(self.status, &body),
                Err(e) => AdapterError::Status {
                    status: self.status,
                    message: format!("(the error body could not be read: {e})"),
                },
            }
        }
    }

    /// Server-sent events from a response body. Ends with `Err(StreamEnd::Truncated)` when the
    /// body stopped in the middle of an event.
    pub struct Events<'a> {
        response: &'a mut Response,
        parser: sse::Parser,
        ready: std::collections::VecDeque<sse::Event>,
        done: bool,
    }

    impl std::fmt::Debug for Events<'_> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Events").field("done", &self.done).finish()
        }
    }

    /// Why an event stream stopped early.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub enum StreamError {
        /// Reading the body failed.
        Http(HttpError),
        /// The body ended in the middle of an event.
        Truncated,
    }

    impl std::fmt::Display for StreamError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            match self {
                StreamError::Http(e) => e.fmt(f),
                StreamError::Truncated => f.write_str("the stream ended in the middle of an event"),
            }
        }
    }

    impl From<StreamError> for AdapterError {
        fn from(e: StreamError) -> Self {
            match e {
                StreamError::Http(e) => e.into(),
                StreamError::Truncated => AdapterError::malformed(e.to_string()),
            }
        }
    }

    impl Iterator for Events<'_> {
        type Item = Result<sse::Event, StreamError>;

        fn next(&mut self) -> Option<Self::Item> {
            loop {
                if let Some(e) = self.ready.pop_front() {
                    return Some(Ok(e));
                }
                if self.done {
                    return None;
                }
                match self.response.read() {
                    Ok(Some(chunk)) => self.ready.extend(self.parser.feed(&chunk)),
                    Ok(None) => {
                        self.done = true;
                        if self.parser.finish() {
                            return Some(Err(StreamError::Truncated));
                        }
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(StreamError::Http(e)));
                    }
                }
            }
        }
    }
}

/// The provider's error for an error `status` and its `body`: the message from the JSON shapes
/// providers use (`{"error": {"message": ...}}`, `{"error": "..."}`, `{"message": ...}`), else
/// the start of the body as text.
pub fn status_error(status: u16, body: &[u8]) -> AdapterError {
    const MAX: usize = 1000;
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let from_json = json.as_ref().and_then(|v| {
        let e = v.get("error").unwrap_or(v);
        e.get("message")
            .and_then(|m| m.as_str())
            .or_else(|| e.as_str())
            .map(str::to_string)
    });
    let mut message = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    if message.len() > MAX {
        let mut cut = MAX;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    AdapterError::Status { status, message }
}

#[doc(hidden)]
pub mod __dispatch {
    use super::Adapter;
    use crate::__private::adapter::bindings::exports::rawko::plugin::embeddings as wit_embed;
    use crate::__private::adapter::bindings::exports::rawko::plugin::llm as wit;
    use crate::__private::adapter::bindings::rawko::plugin::types::ToolSpec as WitToolSpec;
    use crate::embeddings::{EmbedRequest, Embeddings};
    use crate::llm::*;

    pub fn dispatch<A: Adapter>(request: wit::Request) -> Result<wit::Response, wit::AdapterError> {
        let request = from_wit(request).map_err(wit::AdapterError::Unsupported)?;
        match A::complete(request) {
            Ok(r) => Ok(response_to_wit(r)),
            Err(e) => Err(error_to_wit(e)),
        }
    }

    pub fn dispatch_embed<A: Adapter>(
        request: wit_embed::EmbedRequest,
    ) -> Result<wit_embed::EmbedResponse, wit::AdapterError> {
        let request = EmbedRequest {
            model: request.model,
            base_url: request.base_url,
            inputs: request.inputs,
            dimensions: request.dimensions,
        };
        match A::embed(request) {
            Ok(Embeddings {
                vectors,
                model,
                usage,
            }) => Ok(wit_embed::EmbedResponse {
                vectors,
                model,
                usage: wit_embed::EmbedUsage {
                    input_tokens: usage.input_tokens,
                },
            }),
            Err(e) => Err(error_to_wit(e)),
        }
    }

    fn from_wit(r: wit::Request) -> Result<Request, String> {
        Ok(Request {
            model: r.model,
            base_url: r.base_url,
            system: r.system,
            messages: r.messages.into_iter().map(message_from_wit).collect(),
            tools: r
                .tools
                .into_iter()
                .map(|t: WitToolSpec| {
                    let input_schema = serde_json::from_str(&t.input_schema).map_err(|e| {
                        format!("the input schema of tool {} is not JSON: {e}", t.name)
                    })?;
                    Ok(ToolSpec {
                        name: t.name,
                        description: t.description,
                        input_schema,
                    })
                })
                .collect::<Result<_, String>>()?,
            options: Options {
                max_tokens: r.options.max_tokens,
                temperature: r.options.temperature,
                reasoning_effort: r.options.reasoning_effort.map(|e| match e {
                    wit::ReasoningEffort::Low => ReasoningEffort::Low,
                    wit::ReasoningEffort::Medium => ReasoningEffort::Medium,
                    wit::ReasoningEffort::High => ReasoningEffort::High,
                }),
                thinking_budget: r.options.thinking_budget,
                extra: match r.options.extra {
                    Some(text) => Some(
                        serde_json::from_str(&text)
                            .map_err(|e| format!("the adapter options are not JSON: {e}"))?,
                    ),
                    None => None,
                },
            },
            stream: r.stream,
            sequence: r.sequence,
        })
    }

    fn message_from_wit(m: wit::Message) -> Message {
        Message {
            role: match m.role {
                wit::Role::User => Role::User,
                wit::Role::Assistant => Role::Assistant,
            },
            content: m
                .content
                .into_iter()
                .map(|c| match c {
                    wit::Content::Text(text) => Content::Text { text },
                    wit::Content::Thinking(t) => Content::Thinking(Thinking {
                        text: t.text,
                        signature: t.signature,
                    }),
                    wit::Content::ToolCall(t) => Content::ToolCall(ToolCall {
                        id: t.id,
                        name: t.name,
                        arguments: t.arguments,
                    }),
                    wit::Content::ToolResult(t) => Content::ToolResult(ToolResult {
                        call_id: t.call_id,
                        content: t.content,
                        is_error: t.is_error,
                    }),
                })
                .collect(),
        }
    }

    fn response_to_wit(r: Response) -> wit::Response {
        wit::Response {
            content: r
                .content
                .into_iter()
                .map(|c| match c {
                    Content::Text { text } => wit::Content::Text(text),
                    Content::Thinking(t) => wit::Content::Thinking(wit::Thinking {
                        text: t.text,
                        signature: t.signature,
                    }),
                    Content::ToolCall(t) => wit::Content::ToolCall(wit::ToolCall {
                        id: t.id,
                        name: t.name,
                        arguments: t.arguments,
                    }),
                    Content::ToolResult(t) => wit::Content::ToolResult(wit::ToolResult {
                        call_id: t.call_id,
                        content: t.content,
                        is_error: t.is_error,
                    }),
                })
                .collect(),
            stop_reason: match r.stop_reason {
                StopReason::EndTurn => wit::StopReason::EndTurn,
                StopReason::ToolUse => wit::StopReason::ToolUse,
                StopReason::MaxTokens => wit::StopReason::MaxTokens,
                StopReason::StopSequence => wit::StopReason::StopSequence,
                StopReason::Refusal => wit::StopReason::Refusal,
                StopReason::Other => wit::StopReason::Other,
            },
            usage: wit::Usage {
                input_tokens: r.usage.input_tokens,
                output_tokens: r.usage.output_tokens,
                cache_read_tokens: r.usage.cache_read_tokens,
                cache_write_tokens: r.usage.cache_write_tokens,
            },
            model: r.model,
        }
    }

    fn error_to_wit(e: AdapterError) -> wit::AdapterError {
        match e {
            AdapterError::Transport { message } => wit::AdapterError::Transport(message),
            AdapterError::Status { status, message } => {
                wit::AdapterError::Status(wit::StatusError { status, message })
            }
            AdapterError::Malformed { message } => wit::AdapterError::Malformed(message),
            AdapterError::Unsupported { message } => wit::AdapterError::Unsupported(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_error_messages_are_found_in_every_shape() {
        let m = |body: &str| match status_error(400, body.as_bytes()) {
            AdapterError::Status { message, .. } => message,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            m(r#"{"error":{"message":"bad model","type":"x"}}"#),
            "bad model"
        );
        assert_eq!(m(r#"{"error":"model not found"}"#), "model not found");
        assert_eq!(m(r#"{"message":"nope"}"#), "nope");
        assert_eq!(m("  plain text\n"), "plain text");
        assert!(m(&"é".repeat(2000)).ends_with('…'));
    }
}
