//! A tool plugin whose component imports `wasi:sockets` (through the standard library's
//! `TcpStream`) and `wasi:http` (through the `wasip2` crate), as components from toolchains
//! such as componentize-py do whether they use them or not. rawko links the first to a WASI
//! implementation with no network and the second to stubs that trap, and shows both as denied.

use rawko_plugin_sdk::tool::{Context, Tool, ToolError};

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConnectInput {
    /// `HOST:PORT` to connect to.
    pub addr: String,
}

/// Opens a TCP connection through `wasi:sockets`.
pub struct Connect;

impl Tool for Connect {
    const NAME: &'static str = "Connect";
    const DESCRIPTION: &'static str = "Connects to HOST:PORT over TCP and says what happened.";
    type Input = ConnectInput;

    fn call(input: ConnectInput, _cx: &Context) -> Result<String, ToolError> {
        match std::net::TcpStream::connect(input.addr.as_str()) {
            Ok(_) => Ok("connected".into()),
            Err(e) => Ok(format!("refused: {e}")),
        }
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchInput {}

/// Starts an outgoing request through `wasi:http`.
pub struct Fetch;

impl Tool for Fetch {
    const NAME: &'static str = "Fetch";
    const DESCRIPTION: &'static str = "Starts an HTTP request through wasi:http.";
    type Input = FetchInput;

    fn call(_input: FetchInput, _cx: &Context) -> Result<String, ToolError> {
        let request = wasip2::http::types::OutgoingRequest::new(wasip2::http::types::Fields::new());
        match wasip2::http::outgoing_handler::handle(request, None) {
            Ok(_) => Ok("sent".into()),
            Err(e) => Ok(format!("refused: {e:?}")),
        }
    }
}

rawko_plugin_sdk::export_tools!(Connect, Fetch);
rawko_plugin_sdk::manifest!();
