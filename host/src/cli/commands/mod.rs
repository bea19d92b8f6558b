//! One module per command.

pub mod bash;
pub mod tool;
pub mod tools;
