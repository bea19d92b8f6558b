//! `rawko plugin remove NAME`.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{BadInput, Context, print_out};
use rawko_distribution::PluginStore;

/// Remove an installed plugin and its grants
#[derive(Debug, Args)]
pub struct RemoveArgs {
    /// The installed plugin
    name: String,
}

pub fn remove(cx: &Context, args: RemoveArgs) -> anyhow::Result<ExitCode> {
    let store = PluginStore::new(&cx.dirs.data);
    let lock = store.lock()?;
    if !store.remove(&lock, &args.name)? {
        return Err(BadInput::new(format!(
            "no installed plugin named `{}` (see `rawko plugin list`)",
            args.name
        ))
        .into());
    }
    print_out(&format!("removed {}", args.name))?;
    Ok(ExitCode::SUCCESS)
}
