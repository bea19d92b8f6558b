//! rawko's integration tests, one binary for all of them (linking is the slow part).
//!
//! - `sandbox`: hostile plugins against the real runtime, in-process, so each attack can be
//!   followed by a normal call to the same host.
//! - `cli_tools`: the real `rawko` binary calling the real first-party tools.
//! - `cli_agents`: `rawko init` and `rawko agents` on every dialect and on hostile files.
//! - `agents_watch`: hot reload, in process and through `rawko agents watch`.

mod support;

mod agents_watch;
mod cli_agents;
mod cli_tools;
mod sandbox;
