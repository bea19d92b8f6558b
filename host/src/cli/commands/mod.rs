//! One module per command.

pub mod adapters;
pub mod ask;
pub mod bash;
pub mod plugin;
pub mod tool;
pub mod tools;
