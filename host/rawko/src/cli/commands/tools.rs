//! `rawko tools list`: the tools that can be called, and which plugin provides each.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::lookup::usable_agent;
use crate::cli::offered::offered_tools;
use crate::cli::{Context, Table, print_err, print_json, print_out};
use rawko_session::untrusted_agent;

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
    let agent = match &args.agent {
        Some(name) => Some(usable_agent(cx, name)?),
        None => None,
    };
    let tools = offered_tools(cx, agent.as_deref(), args.yes).await?;
    if let Some(agent) = &agent
        && untrusted_agent(agent, cx.workspace_trust())
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
