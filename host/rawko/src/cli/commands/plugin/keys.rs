//! `rawko plugin keys`: the publisher keys whose signatures the user trusts.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::{BadInput, Context, print_json, print_out};
use rawko_distribution::signature::{self, KeyRing};

/// Manage trusted publisher keys (minisign public keys)
#[derive(Debug, Args)]
pub struct KeysArgs {
    #[command(subcommand)]
    action: KeysAction,
}

#[derive(Debug, Subcommand)]
enum KeysAction {
    /// Trust a publisher's minisign public key (the .pub file minisign -G writes)
    Add {
        /// The public key file
        file: PathBuf,
    },
    /// List trusted keys
    List {
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Stop trusting a key
    Remove {
        /// The key ID, as `rawko plugin keys list` shows it
        key_id: String,
    },
}

pub fn keys(cx: &Context, args: KeysArgs) -> anyhow::Result<ExitCode> {
    let ring = KeyRing::new(&cx.dirs.data);
    match args.action {
        KeysAction::Add { file } => {
            let text = signature::read_small(&file).map_err(|e| BadInput::new(e.to_string()))?;
            let key = ring
                .add(&text, &file.display().to_string())
                .map_err(|e| BadInput::new(e.to_string()))?;
            print_out(&format!("trusting key {} ({})", key.key_id, key.comment))?;
        }
        KeysAction::List { json } => {
            let keys = ring.keys();
            if json {
                print_json(&serde_json::Value::Array(
                    keys.iter()
                        .map(|k| serde_json::json!({ "key_id": k.key_id, "comment": k.comment }))
                        .collect(),
                ))?;
            } else if keys.is_empty() {
                print_out("no trusted keys (add one with `rawko plugin keys add FILE`)")?;
            } else {
                let text: String = keys
                    .iter()
                    .map(|k| format!("{}  {}\n", k.key_id, k.comment))
                    .collect();
                print_out(&text)?;
            }
        }
        KeysAction::Remove { key_id } => {
            if !ring
                .remove(&key_id)
                .map_err(|e| BadInput::new(e.to_string()))?
            {
                return Err(BadInput::new(format!("no trusted key {key_id}")).into());
            }
            print_out(&format!(
                "no longer trusting key {}",
                key_id.to_ascii_uppercase()
            ))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
