//! The plugin runtime: one wasmtime engine per process, compiled components cached on disk, and
//! a fresh, budgeted store and instance for every call.
//!
//! Nothing survives from one call to the next inside a plugin: each call builds its WASI context
//! from that call's grants, instantiates the pre-linked component into a new store, runs, and
//! throws the store away. A trap or a broken budget ends that call only.

pub mod adapter;
pub mod bindings;
pub mod cache;
pub mod engine;
pub mod filesystem;
pub mod filter;
pub mod http;
pub mod limits;
pub mod listing;
pub mod log;
pub mod output;
pub mod progress;
pub mod protect;
pub mod reading;
pub mod runtime;
pub mod sandbox;
pub mod shell;
pub mod state;
pub mod stdio;
pub mod tool;

pub use adapter::{AdapterCallError, AdapterPlugin};
pub use filter::{FilterError, FilterPlugin};
pub use limits::{Budget, BudgetKind, MAX_HANDLES};
pub use output::OutputSink;
pub use runtime::{Runtime, RuntimeError};
pub use state::HostState;
pub use tool::{InputError, ToolCallError, ToolCallOutput, ToolInfo, ToolPlugin};
