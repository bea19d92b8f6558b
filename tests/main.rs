//! rawko's integration tests, one binary for all of them (linking is the slow part).
//!
//! - `sandbox`: hostile plugins against the real runtime, in-process, so each attack can be
//!   followed by a normal call to the same host.
//! - `cli_tools`: the real `rawko` binary calling the real first-party tools.

mod support;

mod cli_tools;
mod sandbox;
