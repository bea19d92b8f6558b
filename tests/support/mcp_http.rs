//! A minimal MCP server over streamable HTTP (JSON responses, no event stream), on loopback,
//! that keeps the `params` of every `tools/call` it is sent: what a server sees of rawko's
//! requests.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

pub struct McpHttp {
    port: u16,
    calls: Arc<Mutex<Vec<serde_json::Value>>>,
}

impl McpHttp {
    /// A server with one tool, `echo`, answering `echoed`.
    pub fn start() -> McpHttp {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let calls: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
        let seen = calls.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let seen = seen.clone();
                std::thread::spawn(move || {
                    let _ = serve(stream, &seen);
                });
            }
        });
        McpHttp { port, calls }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// The `params` of each `tools/call` so far.
    pub fn calls(&self) -> Vec<serde_json::Value> {
        self.calls.lock().unwrap().clone()
    }
}

fn serve(stream: std::net::TcpStream, seen: &Mutex<Vec<serde_json::Value>>) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let mut length = 0;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line)?;
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let (status, reply) = if request.starts_with("POST") {
            answer(&body, seen)
        } else if request.starts_with("DELETE") {
            ("200 OK", None)
        } else {
            ("405 Method Not Allowed", None)
        };
        let text = reply.map(|r| r.to_string()).unwrap_or_default();
        write!(
            out,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nmcp-session-id: s1\r\n\
             content-length: {}\r\n\r\n{text}",
            text.len()
        )?;
        out.flush()?;
    }
}

fn answer(
    body: &[u8],
    seen: &Mutex<Vec<serde_json::Value>>,
) -> (&'static str, Option<serde_json::Value>) {
    let Ok(message) = serde_json::from_slice::<serde_json::Value>(body) else {
        return ("400 Bad Request", None);
    };
    let Some(id) = message.get("id").cloned() else {
        // A notification.
        return ("202 Accepted", None);
    };
    let result = match message["method"].as_str() {
        Some("initialize") => serde_json::json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "spy", "version": "1"},
        }),
        Some("tools/list") => serde_json::json!({"tools": [{
            "name": "echo",
            "description": "Echo.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        }]}),
        Some("tools/call") => {
            seen.lock().unwrap().push(message["params"].clone());
            serde_json::json!({"content": [{"type": "text", "text": "echoed"}]})
        }
        _ => {
            return (
                "200 OK",
                Some(serde_json::json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": "no such method"}})),
            );
        }
    };
    (
        "200 OK",
        Some(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result})),
    )
}
