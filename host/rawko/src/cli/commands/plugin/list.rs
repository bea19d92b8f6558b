//! `rawko plugin list`: the installed plugins, what they were granted and who signed them.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{Context, Table, print_json, print_out};
use rawko_distribution::PluginStore;

/// List installed plugins
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON: one object per plugin, with the lockfile's record of it
    #[arg(long)]
    json: bool,
}

pub fn list(cx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let installed = PluginStore::new(&cx.dirs.data).installed()?;
    if args.json {
        let items: Vec<serde_json::Value> = installed
            .iter()
            .map(|p| {
                let mut v = serde_json::to_value(&p.entry).unwrap_or_default();
                v["name"] = serde_json::Value::String(p.name.clone());
                v
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    if installed.is_empty() {
        print_out("no plugins installed (add one with `rawko plugin install SOURCE`)")?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 5]> = installed
        .iter()
        .map(|p| {
            let e = &p.entry;
            let kinds: Vec<&str> = e.kinds.iter().map(|k| k.as_str()).collect();
            let grants: Vec<String> = e.grants.iter().map(ToString::to_string).collect();
            [
                p.name.clone(),
                e.version.clone(),
                kinds.join(","),
                e.signer.as_ref().map_or("-".into(), |s| s.key_id.clone()),
                if grants.is_empty() {
                    "-".into()
                } else {
                    grants.join(" ")
                },
            ]
        })
        .collect();
    let mut table = Table::new(&["NAME", "VERSION", "KINDS", "SIGNER", "GRANTS"]);
    for r in &rows {
        table.row(r);
    }
    let out = table.render();
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}
