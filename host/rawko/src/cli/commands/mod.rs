//! One module per command.

pub mod acp;
pub mod adapters;
pub mod agents;
pub mod ask;
pub mod bash;
pub mod bench;
pub mod demo;
pub mod doctor;
pub mod init;
pub mod knowledge;
pub mod mcp;
pub mod plugin;
pub mod run;
pub mod store;
pub mod tasks;
pub mod tool;
pub mod tools;
pub mod trust;
pub mod ui;
pub mod worker;
