//! Bash-filter plugins: the [`Filter`] trait, the parsed-command types, and [`export_filter!`](crate::export_filter).
//!
//! A filter judges a command line the host has already parsed: every simple command in it with
//! its words, program, redirections and working directory. When a command hides another script
//! or program in its arguments (`bash -c SCRIPT`, `xargs CMD`), the filter asks the host to
//! [`parse`] or [`resolve_program`] it, so that the host's parser stays the only one.
//!
//! ```ignore
//! use rawko_plugin_sdk::bash_filter::{Command, Decision, Filter, Policy, Verdict, Word};
//!
//! struct NoCurl;
//!
//! impl Filter for NoCurl {
//!     fn check(command: &Command, _policy: &Policy) -> Verdict {
//!         let curl = command.commands.iter().any(|c| c.program.name == "curl");
//!         if curl {
//!             Verdict::deny("curl is not allowed here")
//!         } else {
//!             Verdict::allow("no curl")
//!         }
//!     }
//! }
//!
//! rawko_plugin_sdk::export_filter!(NoCurl);
//! ```

use crate::__private::bash_filter::bindings::rawko::plugin::shell as host;

pub use crate::__private::bash_filter::bindings::exports::rawko::plugin::filter::{
    CommandVerdict, Decision, Policy, Verdict,
};
pub use host::{Command, Context, Program, Redirect, RedirectKind, SimpleCommand, Word};

/// A bash filter. Implement it on a unit struct and name the struct in [`export_filter!`](crate::export_filter).
pub trait Filter {
    /// Judge `command` under `policy`. Deny what you cannot judge.
    fn check(command: &Command, policy: &Policy) -> Verdict;
}

/// Parse `script` as a shell started in `cwd` would (for the script of `bash -c`, say).
pub fn parse(script: &str, cwd: &str) -> Result<Command, ParseError> {
    host::parse(script, cwd).map_err(ParseError)
}

/// Why the host could not parse a script, in its words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParseError {}

/// Resolve a program name found inside a command exactly as the host resolves `argv[0]`.
pub fn resolve_program(program: &str, cwd: &str) -> Program {
    host::resolve_program(program, cwd)
}

/// `path` made absolute against `cwd`, with `.`, `..` and symlinks in its existing part resolved.
pub fn resolve_path(path: &str, cwd: &str) -> String {
    host::resolve_path(path, cwd)
}

/// The first of the policy's blocked patterns that matches `text`, if any. The host has them
/// compiled already; compiling them in the plugin would cost every call.
pub fn blocked_pattern(text: &str) -> Option<String> {
    host::blocked_pattern(text)
}

impl Word {
    /// The text: the value of a literal word, the source of a dynamic one.
    pub fn text(&self) -> &str {
        match self {
            Word::Literal(s) | Word::Dynamic(s) => s,
        }
    }

    /// The value, when it is known before the command runs.
    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Dynamic(_) => None,
        }
    }
}

impl Verdict {
    /// Allow the whole command line, with no per-command detail.
    pub fn allow(reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::Allow,
            reason: reason.into(),
            commands: Vec::new(),
        }
    }

    /// Deny the whole command line, with no per-command detail.
    pub fn deny(reason: impl Into<String>) -> Self {
        Verdict {
            decision: Decision::Deny,
            reason: reason.into(),
            commands: Vec::new(),
        }
    }

    /// A verdict made of per-command ones: the first deny decides, else the first ask, else
    /// allow.
    pub fn from_commands(commands: Vec<CommandVerdict>) -> Self {
        let pick = |d: Decision| commands.iter().find(|c| c.decision == d);
        let (decision, reason) = match pick(Decision::Deny).or_else(|| pick(Decision::Ask)) {
            Some(c) => (c.decision, c.reason.clone()),
            None => (Decision::Allow, "every command is allowed".to_string()),
        };
        Verdict {
            decision,
            reason,
            commands,
        }
    }
}

/// Register the filter a plugin provides:
///
/// ```ignore
/// rawko_plugin_sdk::export_filter!(MyFilter);
/// ```
#[macro_export]
macro_rules! export_filter {
    ($filter:ty) => {
        #[doc(hidden)]
        pub struct __RawkoBashFilter;

        impl $crate::__private::bash_filter::FilterGuest for __RawkoBashFilter {
            fn check(
                command: $crate::bash_filter::Command,
                policy: $crate::bash_filter::Policy,
            ) -> $crate::bash_filter::Verdict {
                <$filter as $crate::bash_filter::Filter>::check(&command, &policy)
            }
        }

        // WIT export names only link for wasm; native builds (tests) leave them out.
        #[cfg(target_arch = "wasm32")]
        $crate::__private::bash_filter::bindings::__export_bash_filter_world!(
            __RawkoBashFilter with_types_in $crate::__private::bash_filter::bindings
        );
    };
}
