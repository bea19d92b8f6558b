//! One module per command.

pub mod agents;
pub mod init;
pub mod tasks;
pub mod tool;
pub mod tools;
pub mod trust;
