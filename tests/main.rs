//! rawko's integration tests, one binary for all of them (linking is the slow part).
//!
//! - `sandbox`: hostile plugins against the real runtime, in-process, so each attack can be
//!   followed by a normal call to the same host.
//! - `cli_tools`: the real `rawko` binary calling the real first-party tools.
//! - `shell`: bypass payloads against the real parser and the built-in policy plugin.
//! - `cli_bash`: `rawko bash check` and the `Bash` tool through the real binary: verdicts,
//!   exit codes, and what running a command does and does not do.

mod support;

mod cli_bash;
mod cli_tools;
mod sandbox;
mod shell;
