//! One module per command.

pub mod adapters;
pub mod ask;
pub mod plugin;
pub mod tool;
pub mod tools;
