//! rawko's built-in shell policy, as a bash-filter plugin.
//!
//! It runs first in every filter chain. Every simple command in a command line must be allowed
//! by a pattern; wrappers (`env`, `timeout`, `xargs`, `bash -c`, `find -exec`, ...) are opened
//! and the commands inside them judged the same way, or denied when what they run cannot be
//! known; redirections and files that commands write are checked against the writable paths,
//! files they read against the readable ones; `blockedPatterns` deny whatever they match in the
//! raw or the normalised text. What it cannot judge, it denies.

pub mod awk;
pub mod opts;
pub mod pattern;
pub mod policy;
pub mod sed;

use rawko_plugin_sdk::bash_filter::{self, Command, Filter, Policy, Program, Verdict};

/// The host's parser and resolvers, reached through the plugin's imports.
struct Imports;

impl policy::Host for Imports {
    fn parse(&self, script: &str, cwd: &str) -> Result<Command, String> {
        bash_filter::parse(script, cwd).map_err(|e| e.0)
    }

    fn resolve_program(&self, program: &str, cwd: &str) -> Program {
        bash_filter::resolve_program(program, cwd)
    }

    fn resolve_path(&self, path: &str, cwd: &str) -> String {
        bash_filter::resolve_path(path, cwd)
    }

    fn blocked_pattern(&self, text: &str) -> Option<String> {
        bash_filter::blocked_pattern(text)
    }
}

/// The filter the plugin exports.
pub struct BuiltinPolicy;

impl Filter for BuiltinPolicy {
    fn check(command: &Command, policy: &Policy) -> Verdict {
        policy::check(command, policy, &Imports)
    }
}

rawko_plugin_sdk::export_filter!(BuiltinPolicy);
rawko_plugin_sdk::manifest!();
