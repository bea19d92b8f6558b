//! `rawko tools list`: the tools that can be called, and which plugin provides each.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::commands::agents::usable_agent;
use crate::cli::commands::mcp::{configured_servers, connect_servers};
use crate::cli::{Context, Table, print_err, print_json, print_out};
use rawko_adapters::Trust;
use rawko_agents::Agent;
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

/// One tool as a run offers it: its name, who provides it, its description and input schema.
pub(crate) struct Offered {
    pub name: String,
    pub plugin: String,
    pub description: String,
    pub input_schema: serde_json::Value,
}

/// The tools there are (the tool plugins', then the approved MCP servers'), or, for `agent`,
/// the ones a run offers it: those it may call, only the read-only ones when it is untrusted,
/// and its command tools. `approve` approves new or changed MCP servers. The one place both
/// `tools list` and `agents show` learn an agent's tools from.
pub(crate) async fn offered_tools(
    cx: &Context,
    agent: Option<&Agent>,
    approve: bool,
) -> anyhow::Result<Vec<Offered>> {
    let rt = cx.runtime()?;
    let note = crate::cli::output::SlowNote::after_a_second(
        "preparing the tool plugins (compiled once on first use, then cached)…",
    );
    let set = ToolSet::with_installed(&rt, &cx.dirs.data, cx.workspace()).await?;
    drop(note);
    let mut tools: Vec<Offered> = set
        .tools()
        .into_iter()
        .map(|(p, t)| Offered {
            name: t.name.clone(),
            plugin: p.name().to_string(),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        })
        .collect();
    let specs = configured_servers(cx)?;
    let servers = connect_servers(cx, &specs, approve).await?;
    for (conn, t) in servers.tools() {
        if tools.iter().any(|o| o.name == t.name) {
            continue;
        }
        tools.push(Offered {
            name: t.name.clone(),
            plugin: format!("mcp:{}", conn.spec.name),
            description: t.description.clone(),
            input_schema: t.input_schema.clone(),
        });
    }
    servers.close().await;
    if let Some(agent) = agent {
        let trusted = cx.workspace_trust() == Trust::Trusted;
        let restricted = untrusted_agent(agent, trusted);
        tools.retain(|o| {
            agent.may_call(&o.name) && (!restricted || READ_ONLY_TOOLS.contains(&o.name.as_str()))
        });
        if !restricted {
            for t in &agent.command_tools {
                let spec = command_tool_spec(agent, t);
                tools.push(Offered {
                    name: spec.name,
                    plugin: "agent".into(),
                    description: spec.description,
                    input_schema: spec.input_schema,
                });
            }
        }
    }
    Ok(tools)
}

async fn list(cx: &Context, args: ListArgs) -> anyhow::Result<ExitCode> {
    let agent = match &args.agent {
        Some(name) => Some(usable_agent(cx, name)?),
        None => None,
    };
    let tools = offered_tools(cx, agent.as_deref(), args.yes).await?;
    if let Some(agent) = &agent
        && untrusted_agent(agent, cx.workspace_trust() == Trust::Trusted)
        && !args.json
    {
        print_err(&format!(
            "note: agent {} comes from this untrusted workspace: read-only tools only \
             (`rawko trust` to change that)",
            agent.name
        ))?;
    }
    if args.json {
        let items: Vec<serde_json::Value> = tools
            .iter()
            .map(|o| {
                serde_json::json!({
                    "name": o.name,
                    "plugin": o.plugin,
                    "description": o.description,
                    "input_schema": o.input_schema,
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut table = Table::new(&["TOOL", "PLUGIN", "DESCRIPTION"]);
    for o in &tools {
        table.row([
            o.name.as_str(),
            o.plugin.as_str(),
            &first_sentence(&o.description),
        ]);
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
