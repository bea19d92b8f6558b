//! The tools a session offers: the built-in, installed and given tool plugins with the
//! configured filters (what a run, `tool call --agent` and `mcp serve` call), and, for people,
//! the list `tools list` and `agents show` print.

use std::path::PathBuf;
use std::rc::Rc;

use crate::cli::policy::configured_filters;
use crate::cli::servers::{configured_servers, connect_servers};
use crate::cli::{BadInput, Context};
use rawko_agents::Agent;
use rawko_runtime::{Budget, Runtime, ToolPlugin};
use rawko_session::{SessionTools, command_tool_spec, read_only_tools, untrusted_agent};
use rawko_toolset::ToolSet;
use rawko_toolset::chain::Chain;

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
        let trusted = cx.workspace_trust();
        let restricted = untrusted_agent(agent, trusted);
        tools.retain(|o| {
            agent.may_call(&o.name) && (!restricted || read_only_tools().contains(&o.name.as_str()))
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

/// The tools a task's agents get in this workspace (built-in, installed and `plugins`), each wasm
/// call held to `budget`, native commands started as the global flags say.
pub(crate) async fn session_tools(
    cx: &Context,
    plugins: &[PathBuf],
    budget: Budget,
) -> anyhow::Result<SessionTools> {
    let trusted = cx.workspace_trust();
    let rt = Rc::new(cx.runtime()?);
    let set = tool_set(cx, &rt, plugins).await?;
    let filters = configured_filters(&cx.config_layers()?, &cx.dirs.data)?;
    let chain = Chain::load(&rt, &filters).await?;
    Ok(SessionTools::new(
        rt,
        cx.workspace().to_path_buf(),
        set,
        chain,
        trusted,
        budget,
        cx.launch()?,
    )
    .map_err(|e| BadInput::new(e.to_string()))?)
}

/// The built-in and installed tools, then the `--plugin` files.
pub(crate) async fn tool_set(
    cx: &Context,
    rt: &Runtime,
    plugins: &[PathBuf],
) -> anyhow::Result<ToolSet> {
    let mut set = ToolSet::with_installed(rt, &cx.dirs.data, cx.workspace()).await?;
    for path in plugins {
        let wasm = rawko_capability::fs::read_regular(path, rawko_distribution::MAX_PLUGIN_BYTES)
            .map_err(|e| BadInput::new(format!("plugin {}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "plugin".into());
        set.add(ToolPlugin::load(rt, &name, &wasm).await?)
            .map_err(|e| BadInput::new(e.to_string()))?;
    }
    Ok(set)
}
