//! The shell: command lines parsed into structure, judged by a chain of filters, and run by
//! rawko itself exactly as judged.
//!
//! Matching command strings is how shell permissions get talked around (`ls && rm -rf x`,
//! `ls $(rm -rf x)`, `env rm`, `r''m`). Here a real bash parser ([`parse`](mod@parse)) turns the text into
//! every simple command it contains, with words after quote removal and programs resolved to
//! the files they run; filters (the chain in `rawko-toolset`) judge that structure, giving
//! [`verdict`]s; and the executor ([`exec`]) spawns those very argv vectors, wiring pipes and
//! redirections itself, so no second reading of the text by a shell can differ from what was
//! judged.

pub mod budget;
pub mod exec;
pub mod glob;
pub mod model;
pub mod parse;
pub mod policy;
pub mod resolve;
pub mod verdict;

pub use model::{Context, ParsedCommand, Program, Redirect, RedirectKind, SimpleCommand, Word};
pub use parse::{ParseError, ParseOptions, parse};
pub use policy::Policy;
pub use resolve::Resolver;
