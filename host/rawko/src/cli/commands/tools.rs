//! `rawko tools list`: the tools that can be called, and which plugin provides each.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::commands::agents::usable_agent;
use crate::cli::commands::mcp::{configured_servers, connect_servers};
use crate::cli::{Context, Table, print_err, print_json, print_out};
use rawko_adapters::Trust;
use rawko_fsm::session::{READ_ONLY_TOOLS, command_tool_spec, untrusted_agent};
use rawko_toolset::ToolSet;

/// Inspect the available tools
#[derive(Debug, Args)]
pub struct ToolsCmd {
    #[command(subcommand)]
    action: ToolsAction,
}

#[derive(Debug, Subcommand)]
enum ToolsAction {
    /// List every tool with the plugin that provides it
    List(ListArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// Print JSON (name, plugin, description, input schema) instead of a table
    #[arg(long)]
    json: bool,
    /// Only the tools this agent may call (with its command tools), as a run would offer them
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Approve configured MCP servers that are new or changed (on a terminal you are asked
    /// instead); their tools are listed as `mcp__<server>__<tool>`
    #[arg(long)]
    yes: bool,
}

impl ToolsCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            ToolsAction::List(args) => list(cx, args).await,
        }
    }
}

async fn list(cx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let rt = cx.runtime()?;
    let note = crate::cli::output::SlowNote::after_a_second(
        "preparing the tool plugins (compiled once on first use, then cached)…",
    );
    let set = ToolSet::with_installed(&rt, &cx.dirs.data, cx.workspace()).await?;
    drop(note);
    let mut tools: Vec<(String, String, String, serde_json::Value)> = set
        .tools()
        .into_iter()
        .map(|(p, t)| {
            (
                t.name.clone(),
                p.name().to_string(),
                t.description.clone(),
                t.input_schema.clone(),
            )
        })
        .collect();
    let specs = configured_servers(cx)?;
    let servers = connect_servers(cx, &specs, args.yes).await?;
    for (conn, t) in servers.tools() {
        if tools.iter().any(|(n, ..)| *n == t.name) {
            continue;
        }
        tools.push((
            t.name.clone(),
            format!("mcp:{}", conn.spec.name),
            t.description.clone(),
            t.input_schema.clone(),
        ));
    }
    servers.close().await;
    if let Some(name) = &args.agent {
        let agent = usable_agent(cx, name)?;
        let trusted = cx.workspace_trust() == Trust::Trusted;
        let restricted = untrusted_agent(&agent, trusted);
        tools.retain(|(name, ..)| {
            agent.may_call(name) && (!restricted || READ_ONLY_TOOLS.contains(&name.as_str()))
        });
        if !restricted {
            for t in &agent.command_tools {
                let spec = command_tool_spec(&agent, t);
                tools.push((
                    spec.name,
                    "agent".into(),
                    spec.description,
                    spec.input_schema,
                ));
            }
        }
        if restricted && !args.json {
            print_err(&format!(
                "note: agent {} comes from this untrusted workspace: read-only tools only \
                 (`rawko trust` to change that)",
                agent.name
            ))?;
        }
    }
    if args.json {
        let items: Vec<serde_json::Value> = tools
            .iter()
            .map(|(name, plugin, description, schema)| {
                serde_json::json!({
                    "name": name,
                    "plugin": plugin,
                    "description": description,
                    "input_schema": schema,
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&["TOOL", "PLUGIN", "DESCRIPTION"]);
    for (name, plugin, description, _) in &tools {
        table.row([name.as_str(), plugin.as_ref(), &first_sentence(description)]);
    }
    let out = table.render();
    print_out(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The description up to its first full stop, on one line.
fn first_sentence(description: &str) -> String {
    let one_line = description.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.find(". ") {
        Some(i) => one_line[..=i].to_string(),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use super::first_sentence;

    #[test]
    fn first_sentence_is_one_line() {
        assert_eq!(
            first_sentence("Read a file.\nMore. Even more."),
            "Read a file."
        );
        assert_eq!(first_sentence("No stop"), "No stop");
    }
}
