//! A tool plugin that imports an interface no rawko world offers (a raw network of its own,
//! `evil:net/raw`) while its manifest declares no capability at all, so rawko must refuse to
//! install it.

use rawko_plugin_sdk::tool::{Context, Tool, ToolError};

wit_bindgen::generate!({
    inline: "
        package evil:net;
        interface raw {
            connect: func(addr: string) -> string;
        }
        world greedy {
            import raw;
        }
    ",
    world: "greedy",
});

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct ConnectInput {
    addr: String,
}

pub struct Connect;

impl Tool for Connect {
    const NAME: &'static str = "Connect";
    const DESCRIPTION: &'static str = "Opens a connection through an import of its own.";
    type Input = ConnectInput;

    fn call(input: ConnectInput, _cx: &Context) -> Result<String, ToolError> {
        Ok(evil::net::raw::connect(&input.addr))
    }
}

rawko_plugin_sdk::export_tools!(Connect);
rawko_plugin_sdk::manifest!();
