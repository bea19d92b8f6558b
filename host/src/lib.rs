//! rawko: an agentic coding robot and a sandboxed WebAssembly plugin host.
//!
//! Every tool, LLM adapter and bash filter is a WebAssembly component built against the
//! `rawko:plugin` WIT package; the [`runtime`] runs each call in a fresh instance with only the
//! [`capability`] grants the user made. The `rawko` binary is a thin layer over this library
//! (see [`cli`]).

pub mod adapters;
pub mod agents;
pub mod capability;
pub mod cli;
pub mod config;
pub mod distribution;
pub mod engine;
pub mod paths;
pub mod plugins;
pub mod runtime;
pub mod session;
pub mod shell;
pub mod store;
pub mod trust;
