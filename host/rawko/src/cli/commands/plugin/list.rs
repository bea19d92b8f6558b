//! `rawko plugin list`: the installed plugins, what they were granted and who signed them.

use std::process::ExitCode;

use clap::Args;

use crate::cli::{Context, print_json, print_out};
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
    let header = ["NAME", "VERSION", "KINDS", "SIGNER", "GRANTS"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([header[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |r: [&str; 5]| {
        format!(
            "{:w0$}  {:w1$}  {:w2$}  {:w3$}  {}\n",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            w0 = widths[0],
            w1 = widths[1],
            w2 = widths[2],
            w3 = widths[3]
        )
    };
    let mut out = line(header);
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
    }
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}
