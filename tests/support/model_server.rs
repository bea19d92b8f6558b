//! A scripted model server: OpenAI Chat Completions and Anthropic Messages over loopback
//! HTTP/1.1, JSON or server-sent events, with faults on request.
//!
//! A test starts one, queues the replies its conversation needs, points an adapter at
//! [`ModelServer::base_url`], and afterwards reads what the server received. Replies are served
//! in order whatever the path; an exhausted script answers 500 so a test that asks too much
//! fails loudly. The server runs on its own thread and runtime, so it serves the real `rawko`
//! binary and in-process tests alike, and stops when dropped.
//!
//! ```ignore
//! let server = ModelServer::start();
//! server.push(openai::text("Hello!", 12, 3));
//! server.push(Reply::status(429).header("retry-after", "1"));
//! // ... run the adapter against server.base_url() ...
//! assert_eq!(server.received()[0].path, "/v1/chat/completions");
//! ```

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The longest a never-ending reply (slow loris) keeps going, so a broken client cannot keep
/// a test server busy forever.
const ENDLESS_LIMIT: Duration = Duration::from_secs(30);

/// One request as the server read it.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    pub path: String,
    /// Names lowercase.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the whole request had been read.
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as JSON; panics (failing the test) when it is not.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "request body is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
}

#[derive(Debug, Clone)]
enum Body {
    /// Sent with a content length.
    Fixed(Vec<u8>),
    /// Sent chunked, one write per part, `interval` apart; with `cut`, the connection closes
    /// after the parts without ending the body.
    Parts {
        parts: Vec<Vec<u8>>,
        interval: Duration,
        cut: bool,
    },
    /// The request's headers back, as a JSON object.
    Echo,
    /// `part` forever (up to [`ENDLESS_LIMIT`]), `interval` apart.
    Endless { part: Vec<u8>, interval: Duration },
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Body,
    /// Wait before sending anything.
    delay: Duration,
    /// Close the connection without answering.
    hang_up: bool,
}

impl Reply {
    /// An empty reply with `status`.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Body::Fixed(Vec::new()),
            delay: Duration::ZERO,
            hang_up: false,
        }
    }

    /// `value` as a JSON body.
    pub fn json(status: u16, value: &Value) -> Reply {
        Reply::bytes(status, "application/json", value.to_string().into_bytes())
    }

    pub fn bytes(status: u16, content_type: &str, body: Vec<u8>) -> Reply {
        Reply {
            body: Body::Fixed(body),
            ..Reply::status(status)
        }
        .header("content-type", content_type)
    }

    /// Server-sent events, each written (and flushed) on its own.
    pub fn sse(events: Vec<String>) -> Reply {
        Reply {
            body: Body::Parts {
                parts: events.into_iter().map(String::into_bytes).collect(),
                interval: Duration::ZERO,
                cut: false,
            },
            ..Reply::status(200)
        }
        .header("content-type", "text/event-stream")
        .header("cache-control", "no-cache")
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::status(status).header("location", location)
    }

    /// No answer at all: the connection closes once the request is read.
    pub fn hang_up() -> Reply {
        Reply {
            hang_up: true,
            ..Reply::status(0)
        }
    }

    /// The request's headers back, as `{"headers": {name: value}}`.
    pub fn echo_headers() -> Reply {
        Reply {
            body: Body::Echo,
            ..Reply::status(200)
        }
        .header("content-type", "application/json")
    }

    /// A body that never ends: `part` every `interval`.
    pub fn slow_loris(interval: Duration) -> Reply {
        Reply {
            body: Body::Endless {
                part: b"x".to_vec(),
                interval,
            },
            ..Reply::status(200)
        }
        .header("content-type", "application/json")
    }

    /// A chunked body of `size` bytes of JSON-ish filler, with no declared length.
    pub fn huge(size: usize) -> Reply {
        let chunk = vec![b' '; 64 * 1024];
        let mut parts = Vec::new();
        let mut left = size;
        while left > 0 {
            let n = left.min(chunk.len());
            parts.push(chunk[..n].to_vec());
            left -= n;
        }
        Reply {
            body: Body::Parts {
                parts,
                interval: Duration::ZERO,
                cut: false,
            },
            ..Reply::status(200)
        }
        .header("content-type", "application/json")
    }

    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Wait `d` before answering (after reading the request).
    pub fn delay(mut self, d: Duration) -> Reply {
        self.delay = d;
        self
    }

    /// Send the body's parts `interval` apart.
    pub fn every(mut self, interval: Duration) -> Reply {
        if let Body::Parts { interval: i, .. } = &mut self.body {
            *i = interval;
        }
        self
    }

    /// Break the connection after the body's parts, without ending the body.
    pub fn cut(mut self) -> Reply {
        if let Body::Parts { cut, .. } = &mut self.body {
            *cut = true;
        }
        self
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    /// Served when the script is empty (benchmarks repeat one reply forever).
    fallback: Option<Reply>,
    /// Computes the reply from the request, when the script is empty and there is no fallback.
    responder: Option<Responder>,
    received: Vec<Received>,
    /// Time spent between reading a request and finishing its reply, summed.
    busy: Duration,
}

/// A reply computed from the request (an embeddings server answers what it was sent).
type Responder = Arc<dyn Fn(&Received) -> Reply + Send + Sync>;

/// A running server.
pub struct ModelServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ModelServer {
    /// Start a server on 127.0.0.1 on a free port.
    pub fn start() -> ModelServer {
        let std_listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        std_listener.set_nonblocking(true).expect("nonblocking");
        let addr = std_listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let shared = state.clone();
        let thread = std::thread::Builder::new()
            .name("model-server".into())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("server runtime");
                rt.block_on(async move {
                    let listener = TcpListener::from_std(std_listener).expect("listener");
                    let mut stopped = stopped;
                    loop {
                        tokio::select! {
                            _ = &mut stopped => break,
                            accepted = listener.accept() => {
                                if let Ok((conn, _)) = accepted {
                                    tokio::spawn(serve(conn, shared.clone()));
                                }
                            }
                        }
                    }
                });
            })
            .expect("server thread");
        ModelServer {
            addr,
            state,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:PORT/v1`, the base URL both wire formats hang off.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// Queue a reply.
    pub fn push(&self, reply: Reply) -> &Self {
        self.lock().script.push_back(reply);
        self
    }

    /// Serve `reply` whenever the script is empty, instead of failing.
    pub fn repeat(&self, reply: Reply) -> &Self {
        self.lock().fallback = Some(reply);
        self
    }

    /// Answer each request with `f(request)` once the script is empty.
    pub fn respond_with(&self, f: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> &Self {
        self.lock().responder = Some(Arc::new(f));
        self
    }

    /// Forget the requests received so far (benchmarks would otherwise keep them all).
    pub fn clear_received(&self) {
        self.lock().received.clear();
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.lock().received.clone()
    }

    /// How many requests were received.
    pub fn hits(&self) -> usize {
        self.lock().received.len()
    }

    /// Replies still queued.
    pub fn left(&self) -> usize {
        self.lock().script.len()
    }

    /// Time the server spent on requests, summed; benchmarks subtract it.
    pub fn busy(&self) -> Duration {
        self.lock().busy
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Serve one connection: requests in turn until either side closes it.
async fn serve(mut conn: TcpStream, state: Arc<Mutex<State>>) {
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(&mut conn, &mut buf).await else {
            return;
        };
        let started = Instant::now();
        let reply = {
            let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
            s.received.push(req.clone());
            s.script
                .pop_front()
                .or_else(|| s.fallback.clone())
                .or_else(|| s.responder.as_ref().map(|f| f(&req)))
        };
        let reply = reply.unwrap_or_else(|| {
            Reply::json(
                500,
                &json!({"error": {"message": "the test script has no reply left"}}),
            )
        });
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        if reply.hang_up {
            return;
        }
        let keep = write_reply(&mut conn, &req, reply).await;
        state.lock().unwrap_or_else(|e| e.into_inner()).busy += started.elapsed();
        if !keep {
            return;
        }
    }
}

/// Read one request (head and `content-length` body); `None` when the connection ends.
async fn read_request(conn: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Received> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let mut chunk = [0u8; 8192];
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = head_end + 4;
    while buf.len() < body_start + len {
        let mut chunk = [0u8; 8192];
        let n = conn.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[body_start..body_start + len].to_vec();
    buf.drain(..body_start + len);
    Some(Received {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    })
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        307 => "Temporary Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

/// Write `reply`; `false` when the connection must close afterwards.
async fn write_reply(conn: &mut TcpStream, req: &Received, reply: Reply) -> bool {
    let mut head = format!("HTTP/1.1 {} {}\r\n", reply.status, reason(reply.status));
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    match reply.body {
        Body::Fixed(body) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            let mut out = head.into_bytes();
            out.extend_from_slice(&body);
            conn.write_all(&out).await.is_ok()
        }
        Body::Echo => {
            let headers: serde_json::Map<String, Value> = req
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect();
            let body = json!({ "headers": headers }).to_string();
            head.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
            conn.write_all(head.as_bytes()).await.is_ok()
        }
        Body::Parts {
            parts,
            interval,
            cut,
        } => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if conn.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            for (i, p) in parts.iter().enumerate() {
                if i > 0 && !interval.is_zero() {
                    tokio::time::sleep(interval).await;
                }
                if p.is_empty() {
                    continue;
                }
                if conn.write_all(&chunked(p)).await.is_err() {
                    return false;
                }
            }
            if cut {
                let _ = conn.flush().await;
                return false;
            }
            conn.write_all(b"0\r\n\r\n").await.is_ok()
        }
        Body::Endless { part, interval } => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            if conn.write_all(head.as_bytes()).await.is_err() {
                return false;
            }
            let until = Instant::now() + ENDLESS_LIMIT;
            while Instant::now() < until {
                if conn.write_all(&chunked(&part)).await.is_err() {
                    return false;
                }
                tokio::time::sleep(interval).await;
            }
            false
        }
    }
}

/// `part` as one chunk of a chunked body.
fn chunked(part: &[u8]) -> Vec<u8> {
    let mut chunk = format!("{:x}\r\n", part.len()).into_bytes();
    chunk.extend_from_slice(part);
    chunk.extend_from_slice(b"\r\n");
    chunk
}

/// One SSE event with a `data:` line.
fn data(value: &Value) -> String {
    format!("data: {value}\n\n")
}

/// One SSE event with an `event:` name and a `data:` line.
fn named(name: &str, value: &Value) -> String {
    format!("event: {name}\ndata: {value}\n\n")
}

/// Replies in the OpenAI Chat Completions format, shaped as its API reference documents.
pub mod openai {
    use super::*;

    fn completion(message: Value, finish: &str, prompt: u64, completion: u64) -> Value {
        json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": "gpt-4.1-2025-04-14",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0}
            },
            "service_tier": "default",
            "system_fingerprint": null
        })
    }

    /// A text reply.
    pub fn text(text: &str, prompt_tokens: u64, completion_tokens: u64) -> Reply {
        Reply::json(
            200,
            &completion(
                json!({"role": "assistant", "content": text, "refusal": null, "annotations": []}),
                "stop",
                prompt_tokens,
                completion_tokens,
            ),
        )
    }

    /// A reply calling one tool.
    pub fn tool_call(id: &str, name: &str, arguments: &Value) -> Reply {
        Reply::json(
            200,
            &completion(
                json!({
                    "role": "assistant",
                    "content": null,
                    "refusal": null,
                    "tool_calls": [{
                        "id": id,
                        "type": "function",
                        "function": {"name": name, "arguments": arguments.to_string()}
                    }]
                }),
                "tool_calls",
                20,
                10,
            ),
        )
    }

    /// An error in the API's shape.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply::json(
            status,
            &json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}),
        )
    }

    fn chunk(delta: Value, finish: Option<&str>) -> String {
        data(&json!({
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4.1-2025-04-14",
            "system_fingerprint": null,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]
        }))
    }

    fn usage_chunk(prompt: u64, completion: u64) -> String {
        data(&json!({
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 1_700_000_000,
            "model": "gpt-4.1-2025-04-14",
            "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
        }))
    }

    /// The events of a streamed text reply, `[DONE]` included.
    pub fn stream_text_events(parts: &[&str], prompt: u64, completion: u64) -> Vec<String> {
        let mut events = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        for p in parts {
            events.push(chunk(json!({"content": p}), None));
        }
        events.push(chunk(json!({}), Some("stop")));
        events.push(usage_chunk(prompt, completion));
        events.push("data: [DONE]\n\n".into());
        events
    }

    /// A streamed text reply.
    pub fn stream_text(parts: &[&str], prompt: u64, completion: u64) -> Reply {
        Reply::sse(stream_text_events(parts, prompt, completion))
    }

    /// An Embeddings reply (`POST /embeddings`): one vector per input, listed in order with
    /// their indexes.
    pub fn embeddings(vectors: &[&[f32]], prompt_tokens: u64) -> Reply {
        let data: Vec<Value> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| json!({"object": "embedding", "index": i, "embedding": v}))
            .collect();
        embeddings_data(data, prompt_tokens)
    }

    /// An Embeddings reply with `data` as given, for replies that are not what they should be.
    pub fn embeddings_data(data: Vec<Value>, prompt_tokens: u64) -> Reply {
        Reply::json(
            200,
            &json!({
                "object": "list",
                "data": data,
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens}
            }),
        )
    }

    /// A streamed reply calling one tool, its arguments split in `pieces`.
    pub fn stream_tool_call(id: &str, name: &str, pieces: &[&str]) -> Reply {
        let mut events = vec![chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": ""}}]}),
            None,
        )];
        for p in pieces {
            events.push(chunk(
                json!({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}),
                None,
            ));
        }
        events.push(chunk(json!({}), Some("tool_calls")));
        events.push(usage_chunk(30, 15));
        events.push("data: [DONE]\n\n".into());
        Reply::sse(events)
    }
}

/// Replies in the Anthropic Messages format, shaped as its API reference documents.
pub mod anthropic {
    use super::*;

    fn message(content: Value, stop: &str, input: u64, output: u64) -> Value {
        json!({
            "id": "msg_test",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5-20250929",
            "content": content,
            "stop_reason": stop,
            "stop_sequence": null,
            "usage": {
                "input_tokens": input,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": output,
                "service_tier": "standard"
            }
        })
    }

    /// A text reply.
    pub fn text(text: &str, input_tokens: u64, output_tokens: u64) -> Reply {
        Reply::json(
            200,
            &message(
                json!([{"type": "text", "text": text}]),
                "end_turn",
                input_tokens,
                output_tokens,
            ),
        )
    }

    /// A reply with some text and one tool call.
    pub fn tool_use(id: &str, name: &str, input: &Value) -> Reply {
        Reply::json(
            200,
            &message(
                json!([
                    {"type": "text", "text": "I'll use a tool."},
                    {"type": "tool_use", "id": id, "name": name, "input": input}
                ]),
                "tool_use",
                40,
                20,
            ),
        )
    }

    /// An error in the API's shape.
    pub fn error(status: u16, kind: &str, message: &str) -> Reply {
        Reply::json(
            status,
            &json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_test"}),
        )
    }

    fn start(input: u64) -> String {
        named(
            "message_start",
            &json!({"type": "message_start", "message": {
                "id": "msg_test", "type": "message", "role": "assistant", "content": [],
                "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": input, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}
            }}),
        )
    }

    fn end(stop: &str, output: u64) -> Vec<String> {
        vec![
            named(
                "message_delta",
                &json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": output}}),
            ),
            named("message_stop", &json!({"type": "message_stop"})),
        ]
    }

    /// The events of a streamed text reply, `message_stop` included.
    pub fn stream_text_events(parts: &[&str], input: u64, output: u64) -> Vec<String> {
        let mut events = vec![
            start(input),
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            named("ping", &json!({"type": "ping"})),
        ];
        for p in parts {
            events.push(named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        events.push(named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        events.extend(end("end_turn", output));
        events
    }

    /// A streamed text reply.
    pub fn stream_text(parts: &[&str], input: u64, output: u64) -> Reply {
        Reply::sse(stream_text_events(parts, input, output))
    }

    /// A streamed reply calling one tool, its JSON input split in `pieces`.
    pub fn stream_tool_use(id: &str, name: &str, pieces: &[&str]) -> Reply {
        let mut events = vec![
            start(50),
            named(
                "content_block_start",
                &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ),
        ];
        for p in pieces {
            events.push(named(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        events.push(named(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        events.extend(end("tool_use", 25));
        Reply::sse(events)
    }
}
