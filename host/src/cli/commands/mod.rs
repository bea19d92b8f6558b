//! One module per command.

pub mod agents;
pub mod init;
pub mod tool;
pub mod tools;
