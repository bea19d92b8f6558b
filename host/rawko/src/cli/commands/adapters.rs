//! `rawko adapters list` and `rawko adapters check`: the adapter instances and their health.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::{BadInput, Context, Table, print_json, print_out};
use rawko_adapters::check::{Report, check};
use rawko_adapters::{AdapterInstance, AdapterOrigin, CredentialSpec, OpenOptions};

/// Inspect and check the configured LLM adapters
#[derive(Debug, Args)]
pub struct AdaptersCmd {
    #[command(subcommand)]
    action: AdaptersAction,
}

#[derive(Debug, Subcommand)]
enum AdaptersAction {
    /// List the adapter instances: built-in, from your config, and from the workspace's
    List(ListArgs),
    /// Check adapter instances: configuration, credential, plugin and endpoint
    #[command(
        after_help = "Without NAME, checks every instance your config and the workspace's \
        define, or the built-in ones when there are none. Exit status 1 when a check fails."
    )]
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON instead of a table
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The instance to check
    name: Option<String>,
    /// Do not contact the endpoints
    #[arg(long)]
    offline: bool,
    /// Print JSON: [{"adapter", "ok", "findings": [{"what", "ok", "message"}]}]
    #[arg(long)]
    json: bool,
}

impl AdaptersCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            AdaptersAction::List(args) => list(cx, args),
            AdaptersAction::Check(args) => check_cmd(cx, args).await,
        }
    }
}

fn credential(i: &AdapterInstance) -> String {
    match &i.credential {
        CredentialSpec::None => "-".into(),
        CredentialSpec::Env { var, .. } => {
            let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
            format!("${var}{}", if set { "" } else { " (not set)" })
        }
        CredentialSpec::Withheld { var, .. } => format!("${var} (withheld)"),
    }
}

fn source_kind(s: &AdapterOrigin) -> &'static str {
    match s {
        AdapterOrigin::Builtin => "built-in",
        AdapterOrigin::User(_) => "user",
        AdapterOrigin::Workspace(_) => "workspace",
    }
}

fn list(cx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let instances = cx.adapter_instances()?;
    if args.json {
        let items: Vec<serde_json::Value> = instances
            .values()
            .map(|i| {
                serde_json::json!({
                    "name": i.name,
                    "plugin": i.plugin.name(),
                    "plugin_installed": i.plugin.is_installed(),
                    "model": i.model,
                    "base_url": i.base_url,
                    "credential": match &i.credential {
                        CredentialSpec::None => serde_json::Value::Null,
                        CredentialSpec::Env { var, .. } => serde_json::json!({"env": var, "state": if std::env::var_os(var).is_some_and(|v| !v.is_empty()) { "set" } else { "missing" }}),
                        CredentialSpec::Withheld { var, reason } => serde_json::json!({"env": var, "state": "withheld", "reason": reason}),
                    },
                    "allow_private_network": i.allow_private_network,
                    "timeout_secs": i.timeout.as_secs(),
                    "source": source_kind(&i.source),
                    "source_path": match &i.source { AdapterOrigin::Builtin => None, AdapterOrigin::User(p) | AdapterOrigin::Workspace(p) => Some(p.display().to_string()) },
                    "withheld": i.withheld,
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<[String; 6]> = instances
        .values()
        .map(|i| {
            [
                i.name.clone(),
                if i.plugin.is_installed() {
                    format!("{} (installed)", i.plugin.name())
                } else {
                    i.plugin.name().to_string()
                },
                i.model.clone(),
                i.base_url.clone(),
                credential(i),
                source_kind(&i.source).to_string(),
            ]
        })
        .collect();
    let mut table = Table::new(&[
        "NAME",
        "PLUGIN",
        "MODEL",
        "ENDPOINT",
        "CREDENTIAL",
        "SOURCE",
    ]);
    for r in &rows {
        table.row(r);
    }
    let out = table.render();
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}

async fn check_cmd(cx: &Context, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let instances = cx.adapter_instances()?;
    let chosen: Vec<&AdapterInstance> = match &args.name {
        Some(n) => vec![instances.get(n).ok_or_else(|| {
            BadInput::new(format!(
                "no adapter named `{n}` (available: {})",
                instances.keys().cloned().collect::<Vec<_>>().join(", ")
            ))
        })?],
        None => {
            let configured: Vec<_> = instances
                .values()
                .filter(|i| i.source != AdapterOrigin::Builtin)
                .collect();
            if configured.is_empty() {
                instances.values().collect()
            } else {
                configured
            }
        }
    };
    let rt = cx.runtime()?;
    let env = |k: &str| std::env::var(k).ok();
    let mut reports: Vec<Report> = Vec::new();
    for i in chosen {
        reports.push(check(&rt, i, &env, args.offline, OpenOptions::default()).await);
    }
    let all_ok = reports.iter().all(Report::ok);
    if args.json {
        let items: Vec<serde_json::Value> = reports
            .iter()
            .map(|r| {
                serde_json::json!({
                    "adapter": r.adapter,
                    "ok": r.ok(),
                    "findings": r.findings.iter().map(|f| serde_json::json!({"what": f.what, "ok": f.ok, "message": f.message})).collect::<Vec<_>>(),
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
    } else {
        let mut out = String::new();
        for r in &reports {
            out.push_str(&format!(
                "{}: {}\n",
                r.adapter,
                if r.ok() { "ok" } else { "FAILED" }
            ));
            for f in &r.findings {
                out.push_str(&format!(
                    "  {} {}: {}\n",
                    if f.ok { "ok  " } else { "FAIL" },
                    f.what,
                    f.message
                ));
            }
        }
        print_out(&out)?;
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
