//! A tool plugin with a manifest asking for two read grants, for the install, grant and update
//! tests.

mod greet;

rawko_plugin_sdk::export_tools!(greet::Greet);
rawko_plugin_sdk::manifest!();
