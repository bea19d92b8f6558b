//! The words every policy speaks: how much of the machine a native command sees, and what a
//! check decides about an action. They live here, below the sandbox, the shell and the engine,
//! so each of those names the same types without depending on the others.

use serde::{Deserialize, Serialize};

/// How much of the machine a native command sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Reads limited to the workspace and the system and toolchain paths a build needs; writes
    /// only to a private temporary directory.
    ReadOnly,
    /// The same reads; writes inside the workspace too, except `.git` internals and `.rawko`.
    WorkspaceWrite,
    /// No kernel confinement. Only from the user's own config or a command-line flag.
    Full,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::ReadOnly, Mode::WorkspaceWrite, Mode::Full];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadOnly => "read-only",
            Mode::WorkspaceWrite => "workspace-write",
            Mode::Full => "full",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                format!("unknown sandbox mode `{s}` (expected read-only, workspace-write or full)")
            })
    }
}

/// A decision, ordered from most to least permissive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Ask,
    Deny,
}

impl std::fmt::Display for Decision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Decision::Allow => "allow",
            Decision::Ask => "ask",
            Decision::Deny => "deny",
        })
    }
}
