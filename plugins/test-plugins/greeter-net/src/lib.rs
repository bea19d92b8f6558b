//! The greeter's next version: the same tool, a manifest that also asks for the network.

#[path = "../../greeter/src/greet.rs"]
mod greet;

rawko_plugin_sdk::export_tools!(greet::Greet);
rawko_plugin_sdk::manifest!();
