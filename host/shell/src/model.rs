//! The parsed form of a command line: what filters judge and what the executor runs.
//!
//! One parse produces both views. [`ParsedCommand::commands`] is the flat list of every simple
//! command, wherever it sits, which is what filters see; [`Script`] is the tree of lists and
//! pipelines over the same commands (by index), which is what the executor walks. The executor
//! never looks at text again, so it runs exactly the words that were judged.

use std::path::PathBuf;

use serde::Serialize;

/// One word of a command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "text", rename_all = "snake_case")]
pub enum Word {
    /// Known before the command runs: after quote removal and rawko's own glob expansion.
    Literal(String),
    /// Only known when it runs, as written.
    Dynamic(String),
}

impl Word {
    pub fn text(&self) -> &str {
        match self {
            Word::Literal(s) | Word::Dynamic(s) => s,
        }
    }

    pub fn literal(&self) -> Option<&str> {
        match self {
            Word::Literal(s) => Some(s),
            Word::Dynamic(_) => None,
        }
    }
}

/// What a redirection does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RedirectKind {
    Read,
    Write,
    Append,
    ReadWrite,
    Duplicate,
    HereString,
    HereDoc,
}

/// One redirection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirect {
    pub kind: RedirectKind,
    /// The descriptor it applies to when written (`2>`); `None` for `&>`, which means 1 and 2.
    pub fd: Option<u32>,
    pub target: Word,
    /// For file redirections with a literal target: where the file operation lands.
    pub path: Option<PathBuf>,
    /// `&>` / `&>>`: stdout and stderr both.
    pub both: bool,
}

/// Where a simple command sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Context {
    Pipeline,
    Subshell,
    BraceGroup,
    CommandSubstitution,
    ProcessSubstitution,
    Background,
    Condition,
    CompoundBody,
    FunctionBody,
    HereDocument,
    Coprocess,
}

/// The program a command runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Program {
    /// The name policies match (see `wit/bash-filter.wit`).
    pub name: String,
    /// The file that would be executed.
    pub path: Option<PathBuf>,
}

/// One program invocation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    pub argv: Vec<Word>,
    pub program: Program,
    pub assignments: Vec<Word>,
    pub redirects: Vec<Redirect>,
    pub cwd: PathBuf,
    pub nesting: Vec<Context>,
    pub text: String,
    /// Why rawko's executor cannot run this command, if it cannot (a dynamic word, a redirection
    /// it does not implement). Filters do not see this; the executor refuses on it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_runnable: Vec<String>,
}

impl SimpleCommand {
    /// Program name and arguments, space-separated: the text `blockedPatterns` also see.
    pub fn normalized(&self) -> String {
        let mut words: Vec<&str> = self.assignments.iter().map(Word::text).collect();
        if !self.argv.is_empty() {
            words.push(&self.program.name);
            words.extend(self.argv[1..].iter().map(Word::text));
        }
        words.join(" ")
    }
}

/// A parsed command line.
#[derive(Debug, Clone, Serialize)]
pub struct ParsedCommand {
    pub raw: String,
    pub commands: Vec<SimpleCommand>,
    /// Constructs no policy can judge; the command is denied when this is not empty.
    pub unsupported: Vec<String>,
    #[serde(skip)]
    pub script: Script,
}

/// A list of and-or lists, run one after the other (`;`, newline) or in the background (`&`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Script(pub Vec<ListItem>);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListItem {
    pub first: Pipeline,
    pub rest: Vec<(Connector, Pipeline)>,
    pub background: bool,
}

/// `&&` or `||`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Connector {
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pipeline {
    /// `! pipeline`.
    pub negated: bool,
    /// `time pipeline`.
    pub timed: bool,
    pub stages: Vec<Stage>,
}

/// One element of a pipeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stage {
    /// A simple command, by its index in [`ParsedCommand::commands`].
    Command(usize),
    /// `( list )`; `redirected` when redirections apply to the whole of it.
    Subshell { script: Script, redirected: bool },
    /// `{ list; }`.
    Group { script: Script, redirected: bool },
    /// A construct the executor does not run, named for the error message.
    Other(String),
}
