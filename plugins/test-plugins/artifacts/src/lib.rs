//! Paths of the test plugins, built for `wasm32-wasip2` by this crate's build script, and
//! `foreach_test_plugin!`, which names every one of them.
//!
//! Tests load these real components into the real runtime; nothing here is committed as a
//! binary.

include!(concat!(env!("OUT_DIR"), "/artifacts.rs"));
