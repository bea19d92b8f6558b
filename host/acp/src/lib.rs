//! The Agent Client Protocol (v1) both ways.
//!
//! - [`client`]: an external coding agent (Claude Code, Codex, Gemini CLI, goose, ...) driven
//!   as a state of rawko's task machine. rawko is its client: it serves the agent's file and
//!   terminal requests with the state's own tools, so the agent gets exactly what a rawko agent
//!   in that state would.
//! - [`serve`]: rawko itself as an ACP agent on stdio, for editors that host ACP agents.

pub mod client;
pub mod lines;
pub mod serve;
