//! An agent's shell policy: which commands it may run and which paths they may touch.
//!
//! It comes from the agent definition (`bashFilter.allowedCommands` / `blockedPatterns`,
//! kodelet `allowed_commands`) or from command-line flags, and the paths from the agent's
//! filesystem grants: a read-only agent has no write paths at all. Blocked patterns are checked
//! here as regular expressions, so a typo is reported when the policy is made rather than
//! turning into a denial of every command.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;

use rawko_capability::{Access, FsGrants};

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
    /// `blocked_patterns`, compiled once: filters ask the host to match them (the `shell`
    /// import's `blocked-pattern`) rather than compile them again in every fresh instance.
    #[serde(skip)]
    pub(crate) compiled: CompiledPatterns,
}

/// Compiled regular expressions, compared by their source text.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompiledPatterns(Arc<[regex::Regex]>);

impl PartialEq for CompiledPatterns {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(other.0.iter())
                .all(|(a, b)| a.as_str() == b.as_str())
    }
}

impl Eq for CompiledPatterns {}

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
        let compiled = blocked_patterns
            .iter()
            .map(|p| {
                regex::Regex::new(p).map_err(|e| PolicyError::BadPattern {
                    pattern: p.clone(),
                    message: e.to_string(),
                })
            })
            .collect::<Result<Arc<[_]>, _>>()?;
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
            compiled: CompiledPatterns(compiled),
        })
    }

    /// The first blocked pattern that matches `text`, as written in the policy. A pattern that
    /// does not compile (the fields were changed after [`Policy::new`]) matches everything.
    pub fn blocked_by(&self, text: &str) -> Option<&str> {
        let compiled = &self.compiled.0;
        let current = compiled.len() == self.blocked_patterns.len()
            && compiled
                .iter()
                .zip(&self.blocked_patterns)
                .all(|(re, p)| re.as_str() == p);
        if current {
            return compiled
                .iter()
                .find(|re| re.is_match(text))
                .map(regex::Regex::as_str);
        }
        self.blocked_patterns
            .iter()
            .find(|p| match regex::Regex::new(p) {
                Ok(re) => re.is_match(text),
                Err(_) => true,
            })
            .map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_patterns_match_compiled_and_after_a_change() {
        let ws = Path::new("/");
        let mut p = Policy::new(ws, &FsGrants::none(), vec![], vec![r"rm\s+-rf".into()]).unwrap();
        assert_eq!(p.blocked_by("rm  -rf /"), Some(r"rm\s+-rf"));
        assert_eq!(p.blocked_by("ls"), None);
        // Changed after it was made: matched from the new text, and a pattern that does not
        // compile blocks everything rather than nothing.
        p.blocked_patterns = vec!["^ls".into()];
        assert_eq!(p.blocked_by("ls -la"), Some("^ls"));
        assert_eq!(p.blocked_by("rm -rf /"), None);
        p.blocked_patterns = vec!["(".into()];
        assert_eq!(p.blocked_by("anything"), Some("("));
        assert!(Policy::new(ws, &FsGrants::none(), vec![], vec!["(".into()]).is_err());
    }
}
