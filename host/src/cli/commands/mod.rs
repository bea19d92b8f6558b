//! One module per command.

pub mod adapters;
pub mod ask;
pub mod tool;
pub mod tools;
