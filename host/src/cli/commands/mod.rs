//! One module per command.

pub mod plugin;
pub mod tool;
pub mod tools;
