//! The command policy given on the command line and the shell filters the config names: what
//! `bash check`, `tool call` and a run check commands against.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::cli::{BadInput, Context};
use rawko_capability::{Access, FsGrants};
use rawko_config::Layers;
use rawko_runtime::Runtime;
use rawko_shell::{Policy, Resolver};
use rawko_toolset::chain::Chain;

/// The command policy given on the command line (`bash check` without `--agent`, `tool call`).
#[derive(Debug, Args, Clone, Default)]
pub struct PolicyFlags {
    /// Allow commands matching PATTERN: `git status` (exactly), `git *` (any arguments), `ls`
    /// (one word: any arguments); repeatable. Without any, no command is allowed
    #[arg(long = "allow", value_name = "PATTERN")]
    pub allow: Vec<String>,
    /// Deny commands whose raw or normalised text matches the regular expression; repeatable
    #[arg(long = "block", value_name = "REGEX")]
    pub block: Vec<String>,
}

/// The policy, resolver and filter chain for commands run in this workspace.
pub struct ShellSetup {
    pub policy: Policy,
    pub resolver: Resolver,
    pub chain: Chain,
}

impl ShellSetup {
    pub async fn new(
        cx: &Context,
        rt: &Runtime,
        grants: &FsGrants,
        flags: &PolicyFlags,
    ) -> anyhow::Result<Self> {
        let policy = Policy::new(
            cx.workspace(),
            grants,
            flags.allow.clone(),
            flags.block.clone(),
        )
        .map_err(|e| BadInput::new(e.to_string()))?;
        let mut untrusted: Vec<&Path> = vec![cx.workspace()];
        untrusted.extend(policy.write_paths.iter().map(PathBuf::as_path));
        let resolver = Resolver::from_env(&untrusted);
        let chain = Chain::load(
            rt,
            &configured_filters(&cx.config_layers()?, &cx.dirs.data)?,
        )
        .await?;
        Ok(ShellSetup {
            policy,
            resolver,
            chain,
        })
    }
}

/// The bash-filter plugins named in the user's and then the workspace's `config.yaml`: `.wasm`
/// files and installed plugins. A workspace may add filters (any deny wins) but never remove one.
pub fn configured_filters(
    layers: &Layers,
    data_dir: &Path,
) -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    rawko_session::run::configured_filters(layers, data_dir)
        .map_err(|e| BadInput::new(e.to_string()).into())
}

/// Grants from `--read` and `--write`, relative to the workspace.
pub fn grants_from(cx: &Context, read: &[PathBuf], write: &[PathBuf]) -> anyhow::Result<FsGrants> {
    let mut grants = FsGrants::none();
    grants.protect_workspace(cx.workspace());
    for (paths, access) in [(read, Access::ReadOnly), (write, Access::ReadWrite)] {
        for p in paths {
            grants
                .grant(cx.workspace(), p, access)
                .map_err(|e| BadInput::new(e.to_string()))?;
        }
    }
    Ok(grants)
}
