//! `rawko trust [--revoke]`: let this workspace's own `.rawko/` files ask for more than reading.

use std::process::ExitCode;

use clap::Args;

use crate::cli::trust::brought_list;
use crate::cli::{Context, print_out, terminal_safe};
use rawko_config::trust::TrustStore;

/// Trust (or stop trusting) this workspace's own agents, adapters and filters
#[derive(Debug, Args)]
#[command(
    long_about = "Trust (or stop trusting) this workspace's own agents, adapters and filters.\n\n\
A repository can ship .rawko/agents/ and .rawko/config.yaml. Until you trust the workspace, its \
own agents get read-only tools and its own config.yaml may only narrow yours (lower limits, more \
bash filters). `rawko trust` lists what the workspace brings. Trust is bound to the content of \
those files: when they change, the workspace is untrusted again until you trust it anew. The \
decision is stored in rawko's data directory, never in the workspace."
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
                print_out(&format!(
                    "{} is no longer trusted.",
                    terminal_safe(&ws.display().to_string())
                ))?;
            } else {
                print_out(&format!(
                    "{} was not trusted.",
                    terminal_safe(&ws.display().to_string())
                ))?;
            }
        } else {
            store.trust(ws, "rawko trust")?;
            let brought = rawko_config::trust::brought(ws);
            let what = if brought.is_empty() {
                "it brings no agents or config of its own yet; when it does, they take effect"
                    .to_string()
            } else {
                format!("what it brings takes effect:\n{}", brought_list(&brought))
            };
            print_out(&format!(
                "{} is trusted; {what}",
                terminal_safe(&ws.display().to_string())
            ))?;
        }
        Ok(ExitCode::SUCCESS)
    }
}
