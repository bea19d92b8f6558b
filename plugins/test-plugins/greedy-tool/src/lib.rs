//! A tool plugin that opens network connections while its manifest declares no capability at
//! all: its component imports `wasi:sockets`, which no rawko world offers, so rawko must refuse to
//! install it.

use rawko_plugin_sdk::tool::{Context, Tool, ToolError};

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ConnectInput {
    addr: String,
}

pub struct Connect;

impl Tool for Connect {
    const NAME: &'static str = "Connect";
    const DESCRIPTION: &'static str = "Opens a TCP connection.";
    type Input = ConnectInput;

    fn call(input: ConnectInput, _cx: &Context) -> Result<String, ToolError> {
        std::net::TcpStream::connect(&input.addr)
            .map(|_| "connected".to_string())
            .map_err(|e| ToolError::Failed(e.to_string()))
    }
}

rawko_plugin_sdk::export_tools!(Connect);
rawko_plugin_sdk::manifest!();
