//! What filters decide about a command line, and the report of a whole chain's decision.

use serde::Serialize;

use crate::ParsedCommand;

pub use rawko_capability::Decision;

/// One filter's decision about one simple command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CommandVerdict {
    /// Index into [`ParsedCommand::commands`].
    pub index: usize,
    pub decision: Decision,
    pub rule: String,
    pub reason: String,
}

/// One filter's decision about a command line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FilterVerdict {
    pub decision: Decision,
    pub reason: String,
    pub commands: Vec<CommandVerdict>,
}

/// What one filter said.
#[derive(Debug, Clone, Serialize)]
pub struct FilterOutcome {
    pub filter: String,
    pub verdict: FilterVerdict,
}

/// The chain's answer about a command line, with everything that led to it.
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    pub decision: Decision,
    /// What decided: `parser`, a filter's name, or `rawko` (the host's own backstop).
    pub decided_by: String,
    pub reason: String,
    /// The parsed command, when it parsed.
    pub command: Option<ParsedCommand>,
    /// Each filter that was asked, in order.
    pub filters: Vec<FilterOutcome>,
}
