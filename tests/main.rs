//! rawko's integration tests, one binary for all of them (linking is the slow part).
//!
//! - `sandbox`: hostile plugins against the real runtime, in-process, so each attack can be
//!   followed by a normal call to the same host.
//! - `cli_tools`: the real `rawko` binary calling the real first-party tools.
//! - `plugin_install`: `rawko plugin ...` against real files, a loopback HTTP server, a real OCI
//!   registry and real minisign signatures.

mod support;

mod cli_tools;
mod plugin_install;
mod sandbox;
