//! `rawko tools list`: the tools that can be called, and which plugin provides each.

use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::{Context, print_json, print_out};
use crate::plugins::ToolSet;

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
    let set = ToolSet::with_installed(&rt, &cx.dirs.data, cx.workspace()).await?;
    let tools = set.tools();
    if args.json {
        let items: Vec<serde_json::Value> = tools
            .iter()
            .map(|(p, t)| {
                serde_json::json!({
                    "name": t.name,
                    "plugin": p.name(),
                    "description": t.description,
                    "input_schema": t.input_schema,
                })
            })
            .collect();
        print_json(&serde_json::Value::Array(items))?;
        return Ok(ExitCode::SUCCESS);
    }
    let name_w = tools
        .iter()
        .map(|(_, t)| t.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let plugin_w = tools
        .iter()
        .map(|(p, _)| p.name().len())
        .max()
        .unwrap_or(6)
        .max(6);
    let mut out = format!("{:name_w$}  {:plugin_w$}  DESCRIPTION\n", "TOOL", "PLUGIN");
    for (p, t) in &tools {
        out.push_str(&format!(
            "{:name_w$}  {:plugin_w$}  {}\n",
            t.name,
            p.name(),
            first_sentence(&t.description)
        ));
    }
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
