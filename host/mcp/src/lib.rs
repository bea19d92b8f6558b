//! MCP (the Model Context Protocol) for rawko.
//!
//! [`client`]: MCP servers as tools (`mcp__<server>__<tool>`), stdio servers in the kernel
//! sandbox, HTTP servers through a checked client, everything they say bounded; [`consent`]: the
//! user's approval of each server and its tool list.
//!
//! [`serve`]: rawko's tools served to MCP clients over stdio or streamable HTTP. The protocol is
//! `rmcp`'s; what a call does is not this crate's business: each `tools/call` becomes a
//! [`serve::CallRequest`] on a channel, and whoever holds the other end (the `rawko` binary, with
//! an agent's tools, capabilities and kernel sandbox) runs it and answers.

pub mod client;
pub mod consent;
pub mod serve;
