//! One module per command.

pub mod tool;
pub mod tools;
