//! `rawko plugin`: install, inspect, update and remove plugins, trust publisher keys, scaffold
//! new plugins, pack components from any toolchain and publish them to OCI registries.

pub(crate) mod consent;
mod inspect;
mod install;
mod keys;
mod list;
mod new;
mod pack;
mod publish;
mod remove;

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::Context;

/// Where relative paths on the command line start: the current directory, as a shell user
/// expects, whatever `--workspace` says.
fn cwd(cx: &Context) -> std::path::PathBuf {
    std::env::current_dir().unwrap_or_else(|_| cx.workspace().to_path_buf())
}

/// Install and manage plugins
#[derive(Debug, Args)]
pub struct PluginCmd {
    #[command(subcommand)]
    action: PluginAction,
}

#[derive(Debug, Subcommand)]
enum PluginAction {
    Install(install::InstallArgs),
    List(list::ListArgs),
    Inspect(inspect::InspectArgs),
    Update(install::UpdateArgs),
    Remove(remove::RemoveArgs),
    New(new::NewArgs),
    Pack(pack::PackArgs),
    Publish(publish::PublishArgs),
    Keys(keys::KeysArgs),
}

impl PluginCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            PluginAction::Install(a) => install::install(cx, a).await,
            PluginAction::List(a) => list::list(cx, a),
            PluginAction::Inspect(a) => inspect::inspect(cx, a).await,
            PluginAction::Update(a) => install::update(cx, a).await,
            PluginAction::Remove(a) => remove::remove(cx, a),
            PluginAction::New(a) => new::new(cx, a),
            PluginAction::Pack(a) => pack::pack(cx, a),
            PluginAction::Publish(a) => publish::publish(cx, a).await,
            PluginAction::Keys(a) => keys::keys(cx, a),
        }
    }
}
