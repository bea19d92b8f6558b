//! `rawko trust [--revoke]`: let this workspace's own `.rawko/` files ask for more than reading.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{Context, print_out};
use rawko_config::trust::TrustStore;

/// Trust (or stop trusting) this workspace's own agents, adapters and filters
#[derive(Debug, Args)]
#[command(
    long_about = "Trust (or stop trusting) this workspace's own agents, adapters and filters.\n\n\
A repository can ship .rawko/agents/ and .rawko/config.yaml. Until you trust the workspace, its \
own agents get read-only tools and its own config.yaml is ignored. The decision is stored in \
rawko's data directory, never in the workspace."
)]
pub struct TrustCmd {
    /// Stop trusting the workspace
    #[arg(long)]
    revoke: bool,
}

impl TrustCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let store = TrustStore::new(&cx.dirs.data);
        let ws = cx.workspace();
        if self.revoke {
            if store.revoke(ws)? {
                print_out(&format!("{} is no longer trusted.", ws.display()))?;
            } else {
                print_out(&format!("{} was not trusted.", ws.display()))?;
            }
        } else {
            store.trust(ws, "rawko trust")?;
            print_out(&format!(
                "{} is trusted: its own agents and config.yaml take effect.",
                ws.display()
            ))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}
