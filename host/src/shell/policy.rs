//! An agent's shell policy: which commands it may run and which paths they may touch.
//!
//! It comes from the agent definition (`bashFilter.allowedCommands` / `blockedPatterns`,
//! kodelet `allowed_commands`) or from command-line flags, and the paths from the agent's
//! filesystem grants: a read-only agent has no write paths at all. Blocked patterns are checked
//! here as regular expressions, so a typo is reported when the policy is made rather than
//! turning into a denial of every command.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::capability::{Access, FsGrants};

/// What the filters judge commands against.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Policy {
    /// Patterns a simple command must match (`git *`, `npm test`, `ls`).
    pub allowed_commands: Vec<String>,
    /// Regular expressions that deny a command whose raw or normalised text they match.
    pub blocked_patterns: Vec<String>,
    /// Directories commands may read.
    pub read_paths: Vec<PathBuf>,
    /// Directories commands may write; empty for a read-only agent.
    pub write_paths: Vec<PathBuf>,
    /// The workspace root, where commands start.
    pub workspace: PathBuf,
}

/// A policy that cannot be used as given.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("blocked pattern {pattern:?} is not a valid regular expression: {message}")]
    BadPattern { pattern: String, message: String },
    #[error("allowed command pattern {0:?} is empty")]
    EmptyAllowed(String),
}

impl Policy {
    /// A policy over `grants`: every grant is readable, read-write grants are writable.
    pub fn new(
        workspace: &Path,
        grants: &FsGrants,
        allowed_commands: Vec<String>,
        blocked_patterns: Vec<String>,
    ) -> Result<Self, PolicyError> {
        for p in &blocked_patterns {
            regex::Regex::new(p).map_err(|e| PolicyError::BadPattern {
                pattern: p.clone(),
                message: e.to_string(),
            })?;
        }
        if let Some(p) = allowed_commands.iter().find(|p| p.trim().is_empty()) {
            return Err(PolicyError::EmptyAllowed(p.clone()));
        }
        Ok(Policy {
            allowed_commands,
            blocked_patterns,
            read_paths: grants.iter().map(|g| g.path().to_path_buf()).collect(),
            write_paths: grants
                .iter()
                .filter(|g| g.access() == Access::ReadWrite)
                .map(|g| g.path().to_path_buf())
                .collect(),
            workspace: workspace.to_path_buf(),
        })
    }
}
