//! rawko's tools served over MCP: `rawko mcp serve`.
//!
//! [`Server`] answers `initialize`, `tools/list` and `tools/call`. It holds the list of tools
//! and a channel: a call becomes a [`CallRequest`], answered by whoever runs tools (one at a
//! time or many, as it likes), so the protocol side stays `Send` while the tools need not be.
//! Over HTTP ([`serve_http`]) a bearer token, when set, is required on every request, and only
//! loopback `Host` names are accepted unless the address served is another one.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::{mpsc, oneshot};

/// One tool as MCP clients see it.
#[derive(Debug, Clone)]
pub struct ServedTool {
    pub name: String,
    pub description: String,
    /// A JSON Schema object; anything else is served as an empty object schema.
    pub input_schema: serde_json::Value,
}

/// A `tools/call` to run: the tool, its arguments as JSON text, and where the answer goes.
#[derive(Debug)]
pub struct CallRequest {
    pub tool: String,
    pub input: String,
    pub reply: oneshot::Sender<CallReply>,
}

/// What a call produced: the text the client sees, and whether it is an error (a tool error,
/// a denial, a timeout: the client reads the text either way).
#[derive(Debug, Clone)]
pub struct CallReply {
    pub output: String,
    pub is_error: bool,
}

/// Why serving stopped or could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("the MCP client did not complete the handshake: {0}")]
    Handshake(String),
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the MCP session ended abnormally: {0}")]
    Session(String),
}

/// The MCP side of `rawko mcp serve`: cheap to clone, one per HTTP session.
#[derive(Debug, Clone)]
pub struct Server {
    tools: Arc<Vec<Tool>>,
    calls: mpsc::Sender<CallRequest>,
    instructions: Arc<str>,
}

impl Server {
    /// Serve `tools`; each call is sent on `calls`. `instructions` tell the client what it is
    /// talking to (which agent's tools, in which workspace).
    pub fn new(
        tools: Vec<ServedTool>,
        calls: mpsc::Sender<CallRequest>,
        instructions: &str,
    ) -> Server {
        let tools = tools
            .into_iter()
            .map(|t| {
                let schema = match t.input_schema {
                    serde_json::Value::Object(m) => m,
                    _ => serde_json::Map::from_iter([("type".to_string(), "object".into())]),
                };
                Tool::new(t.name, t.description, Arc::new(schema))
            })
            .collect();
        Server {
            tools: Arc::new(tools),
            calls,
            instructions: instructions.into(),
        }
    }

    /// The names served, in order.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.to_string()).collect()
    }

    async fn run(&self, tool: String, input: String) -> Result<CallReply, ErrorData> {
        let (reply, answer) = oneshot::channel();
        self.calls
            .send(CallRequest { tool, input, reply })
            .await
            .map_err(|_| ErrorData::internal_error("rawko is shutting down", None))?;
        answer
            .await
            .map_err(|_| ErrorData::internal_error("the call was dropped unanswered", None))
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("rawko", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.instructions.to_string())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if !self.tools.iter().any(|t| t.name == request.name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "no tool named `{}` here (tools: {})",
                    request.name,
                    self.names().join(", ")
                ),
                None,
            ));
        }
        let input = serde_json::Value::Object(request.arguments.unwrap_or_default()).to_string();
        let reply = self.run(request.name.into_owned(), input).await?;
        let content = vec![ContentBlock::text(reply.output)];
        Ok(if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }
        .into())
    }
}

/// Serve on standard input and output until the client closes them.
pub async fn serve_stdio(server: Server) -> Result<(), ServeError> {
    let running = server
        .serve((tokio::io::stdin(), tokio::io::stdout()))
        .await
        .map_err(|e| ServeError::Handshake(e.to_string()))?;
    running
        .waiting()
        .await
        .map(|_| ())
        .map_err(|e| ServeError::Session(e.to_string()))
}

/// Where [`serve_http`] listens and who it lets in.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub addr: SocketAddr,
    /// Required as `Authorization: Bearer TOKEN` on every request when set.
    pub token: Option<String>,
}

/// A bound HTTP listener, so the caller can say where it is before serving.
#[derive(Debug)]
pub struct HttpListener {
    listener: tokio::net::TcpListener,
    options: HttpOptions,
}

impl HttpListener {
    pub async fn bind(options: HttpOptions) -> Result<HttpListener, ServeError> {
        let listener = tokio::net::TcpListener::bind(options.addr)
            .await
            .map_err(|source| ServeError::Listen {
                addr: options.addr,
                source,
            })?;
        Ok(HttpListener { listener, options })
    }

    /// The address actually bound (the port chosen for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.options.addr)
    }

    /// Serve MCP over streamable HTTP at `/mcp` (any path is accepted) until the task is
    /// dropped or the listener fails.
    pub async fn serve(self, server: Server) -> Result<(), ServeError> {
        let addr = self.local_addr();
        let mut hosts = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "::1".to_string(),
        ];
        if !addr.ip().is_loopback() {
            hosts.push(addr.ip().to_string());
        }
        let config = StreamableHttpServerConfig::default().with_allowed_hosts(hosts);
        let service = StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::new(LocalSessionManager::default()),
            config,
        );
        let token: Option<Arc<str>> = self.options.token.as_deref().map(Arc::from);
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("mcp http: accept failed: {e}");
                    continue;
                }
            };
            let service = service.clone();
            let token = token.clone();
            tokio::spawn(async move {
                let handler = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let mut service = service.clone();
                        let token = token.clone();
                        async move {
                            if let Some(token) = &token
                                && !authorized(req.headers(), token)
                            {
                                tracing::warn!(
                                    "mcp http: refused a request from {peer}: no valid bearer token"
                                );
                                return Ok::<_, std::convert::Infallible>(unauthorized());
                            }
                            tower_service::Service::call(&mut service, req).await
                        }
                    },
                );
                let io = hyper_util::rt::TokioIo::new(stream);
                if let Err(e) = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, handler)
                    .await
                {
                    tracing::debug!("mcp http: connection from {peer}: {e}");
                }
            });
        }
    }
}

/// Whether `headers` carry `Authorization: Bearer <token>` (compared in constant time).
fn authorized(headers: &hyper::HeaderMap, token: &str) -> bool {
    let Some(given) = headers
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
    else {
        return false;
    };
    let (a, b) = (given.as_bytes(), token.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn unauthorized()
-> hyper::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>> {
    let mut r = hyper::Response::new(
        Full::new(Bytes::from_static(b"a bearer token is required\n")).boxed(),
    );
    *r.status_mut() = hyper::StatusCode::UNAUTHORIZED;
    r.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Bearer"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_token_must_match_exactly() {
        let mut h = hyper::HeaderMap::new();
        assert!(!authorized(&h, "s3cret"));
        h.insert(
            hyper::header::AUTHORIZATION,
            "Bearer s3cret".parse().unwrap(),
        );
        assert!(authorized(&h, "s3cret"));
        for wrong in [
            "Bearer s3cre",
            "Bearer s3cret2",
            "bearer s3cret",
            "s3cret",
            "Basic s3cret",
        ] {
            h.insert(hyper::header::AUTHORIZATION, wrong.parse().unwrap());
            assert!(!authorized(&h, "s3cret"), "{wrong}");
        }
    }

    #[test]
    fn a_schema_that_is_not_an_object_is_served_as_an_empty_object() {
        let (tx, _rx) = mpsc::channel(1);
        let s = Server::new(
            vec![ServedTool {
                name: "Odd".into(),
                description: "d".into(),
                input_schema: serde_json::json!(true),
            }],
            tx,
            "",
        );
        assert_eq!(s.tools[0].input_schema.get("type"), Some(&"object".into()));
    }
}
