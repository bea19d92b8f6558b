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

/// Where OCI registries may be reached over plain HTTP.
#[derive(Debug, Args, Clone, Default)]
pub(crate) struct RegistryArgs {
    /// Reach this OCI registry (HOST or HOST:PORT) over plain HTTP, although it is not on this
    /// machine; repeatable (or `plugins: {insecure_registries: [...]}` in your config)
    #[arg(long = "insecure-registry", value_name = "HOST")]
    insecure_registry: Vec<String>,
}

impl RegistryArgs {
    /// Mark `reference` insecure when its registry is named here or in the user's config, and
    /// say so loudly: what crosses the network can be read and changed on the way (the digest
    /// and signature checks still hold).
    pub(crate) fn apply(
        &self,
        cx: &Context,
        reference: &mut rawko_distribution::oci::Reference,
    ) -> anyhow::Result<()> {
        let mut named = self.insecure_registry.clone();
        if let Some(p) = cx.config_layers()?.user_only().plugins {
            named.extend(p.insecure_registries);
        }
        if reference.allow_insecure(&named) {
            crate::cli::print_err(&format!(
                "warning: registry {} is reached over plain HTTP (insecure registry): anyone on \
                 the network path can read and change what is sent; digests and signatures are \
                 still checked",
                rawko_text::line(&reference.registry, 100)
            ))?;
        }
        Ok(())
    }

    /// [`RegistryArgs::apply`] to an OCI source.
    pub(crate) fn apply_to(
        &self,
        cx: &Context,
        source: &mut rawko_distribution::Source,
    ) -> anyhow::Result<()> {
        if let rawko_distribution::Source::Oci(r) = source {
            self.apply(cx, r)?;
        }
        Ok(())
    }
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
