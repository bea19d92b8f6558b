//! The set of tools a command can call: tools from wasm plugins (the built-in ones and those
//! installed) and tools the host provides itself (`Bash`, `Git`, `Knowledge`, each a
//! [`HostTool`] registered in [`host`]; DocLoom command tools), and the bash filter chain every
//! shell command goes through.

pub mod ask;
pub mod chain;
pub mod command_tool;
pub mod host;
mod tool;

/// Declares each host tool's module and lists its `register` function in [`host::HOST_TOOLS`]:
/// a host tool is its module and its name here.
macro_rules! host_tools {
    ($($(#[$attr:meta])* $vis:vis $tool:ident,)*) => {
        $($(#[$attr])* $vis mod $tool;)*

        /// The host's own tools, in the order they are listed.
        const HOST_TOOLS: &[host::Register] = &[$($(#[$attr])* $tool::register,)*];
    };
}

// The host's own tools. Registering one is a line here.
host_tools! {
    pub bash,
    pub git,
    pub knowledge,
    #[cfg(debug_assertions)] probe,
}

use std::path::Path;
use std::sync::Arc;

use rawko_builtins::{BUILTIN_TOOL_PLUGINS, HOST};
use rawko_distribution::{Kind, PluginStore, fs_limit};
use rawko_runtime::{Runtime, RuntimeError, ToolInfo, ToolPlugin};

pub use host::{Audit, HostCallContext, HostTool};

/// Where a tool comes from.
#[derive(Debug, Clone, Copy)]
pub enum Provider<'a> {
    Plugin(&'a ToolPlugin),
    Host(&'a dyn HostTool),
}

impl Provider<'_> {
    /// The plugin's name, or `host`.
    pub fn name(&self) -> &str {
        match self {
            Provider::Plugin(p) => p.name(),
            Provider::Host(_) => HOST,
        }
    }
}

/// Why a tool set could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum ToolSetError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Two providers for one tool name: which one a model reaches is the user's decision, not
    /// an accident of load order.
    #[error(
        "tool `{tool}` is provided by both {first} and {second}; a tool has one provider: remove \
         the plugin you do not want (`rawko plugin remove NAME`)"
    )]
    Conflict {
        tool: String,
        first: String,
        second: String,
    },
}

/// Loaded tool plugins and host tools, and which one provides each tool name.
#[derive(Debug, Default)]
pub struct ToolSet {
    plugins: Vec<ToolPlugin>,
    host: Vec<Arc<dyn HostTool>>,
}

impl ToolSet {
    /// The built-in tool plugins and the host's own tools.
    pub async fn builtin(rt: &Runtime) -> Result<Self, ToolSetError> {
        let mut set = ToolSet {
            plugins: Vec::new(),
            host: host::host_tools().to_vec(),
        };
        for b in BUILTIN_TOOL_PLUGINS {
            set.add(ToolPlugin::load(rt, b.name, b.wasm).await?)?;
        }
        Ok(set)
    }

    /// Load the built-in tool plugins, then every installed tool plugin in `data_dir`, each held
    /// to the filesystem the user granted it in `workspace`. An installed plugin that cannot be
    /// loaded is reported and left out; one that provides a tool name already provided is an
    /// error naming both.
    pub async fn with_installed(
        rt: &Runtime,
        data_dir: &Path,
        workspace: &Path,
    ) -> Result<Self, ToolSetError> {
        let mut set = ToolSet::builtin(rt).await?;
        let installed = match PluginStore::new(data_dir).installed() {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!("installed plugins are not loaded: {e}");
                return Ok(set);
            }
        };
        for p in installed.iter().filter(|p| p.kinds().contains(&Kind::Tool)) {
            let loaded = match p.wasm() {
                Ok(wasm) => ToolPlugin::load(rt, &p.name, &wasm)
                    .await
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match loaded {
                Ok(plugin) => set.add(plugin.with_fs_limit(fs_limit(p.grants(), workspace)))?,
                Err(e) => tracing::warn!("installed plugin {} is not loaded: {e}", p.name),
            }
        }
        Ok(set)
    }

    /// Add a plugin, unless it provides a tool name already provided (by the host, a built-in
    /// or an earlier plugin).
    pub fn add(&mut self, plugin: ToolPlugin) -> Result<(), ToolSetError> {
        for t in plugin.tools() {
            if let Some((other, _)) = self.find(&t.name) {
                return Err(ToolSetError::Conflict {
                    tool: t.name.clone(),
                    first: describe(other),
                    second: format!("plugin {}", plugin.name()),
                });
            }
        }
        self.plugins.push(plugin);
        Ok(())
    }

    /// The provider of tool `name`, and the tool. Host tools come first: a plugin cannot
    /// replace `Bash` or `Git` with a tool of its own.
    pub fn find(&self, name: &str) -> Option<(Provider<'_>, &ToolInfo)> {
        self.host
            .iter()
            .find(|h| h.info().name == name)
            .map(|h| (Provider::Host(h.as_ref()), h.info()))
            .or_else(|| {
                self.plugins
                    .iter()
                    .find_map(|p| p.tool(name).map(|t| (Provider::Plugin(p), t)))
            })
    }

    /// Every callable tool with its provider, first provider winning.
    pub fn tools(&self) -> Vec<(Provider<'_>, &ToolInfo)> {
        let mut seen: std::collections::HashSet<&str> =
            self.host.iter().map(|h| h.info().name.as_str()).collect();
        let mut out: Vec<(Provider<'_>, &ToolInfo)> = Vec::new();
        for p in &self.plugins {
            for t in p.tools() {
                if seen.insert(&t.name) {
                    out.push((Provider::Plugin(p), t));
                }
            }
        }
        out.extend(
            self.host
                .iter()
                .map(|h| (Provider::Host(h.as_ref()), h.info())),
        );
        out
    }

    /// Names of every callable tool, for error messages.
    pub fn names(&self) -> Vec<String> {
        self.tools()
            .into_iter()
            .map(|(_, t)| t.name.clone())
            .collect()
    }
}

/// An error from one of the host's own tools.
pub(crate) fn host_error(
    tool: &str,
    kind: rawko_runtime::tool::GuestErrorKind,
    message: String,
) -> rawko_runtime::ToolCallError {
    rawko_runtime::ToolCallError::Tool {
        tool: tool.into(),
        kind,
        message,
    }
}

/// The grant a host tool that works on the workspace has there; a call with none is denied.
pub(crate) fn workspace_access(
    tool: &str,
    workspace: &Path,
    grants: &rawko_capability::FsGrants,
) -> Result<rawko_capability::Access, rawko_runtime::ToolCallError> {
    grants.access(workspace).ok_or_else(|| {
        host_error(
            tool,
            rawko_runtime::tool::GuestErrorKind::Denied,
            format!(
                "no filesystem access to the workspace {}: {tool} needs it granted",
                workspace.display()
            ),
        )
    })
}

/// A host tool's input: JSON, valid against the tool's schema, read as `T`.
pub(crate) fn parse_input<T: serde::de::DeserializeOwned>(
    info: &ToolInfo,
    input: &str,
) -> Result<T, rawko_runtime::ToolCallError> {
    let invalid = |message: String| rawko_runtime::ToolCallError::InvalidInput {
        tool: info.name.clone(),
        message,
    };
    let value: serde_json::Value =
        serde_json::from_str(input).map_err(|e| invalid(format!("not valid JSON: {e}")))?;
    info.validate(&value).map_err(|e| invalid(e.to_string()))?;
    serde_json::from_value(value).map_err(|e| invalid(e.to_string()))
}

/// A provider as the user knows it.
fn describe(p: Provider<'_>) -> String {
    match p {
        Provider::Host(_) => "rawko itself".into(),
        Provider::Plugin(p) if BUILTIN_TOOL_PLUGINS.iter().any(|b| b.name == p.name()) => {
            format!("the built-in plugin {}", p.name())
        }
        Provider::Plugin(p) => format!("plugin {}", p.name()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rawko_builtins::{ANTHROPIC, BASH_FILTER, OPENAI, REPLAY, is_builtin_name};

    /// The catalogue of built-in tools (which agents, the trust rules and `rawko acp` read) and
    /// the tools rawko serves name the same tools in the same order: the file tools' plugin's,
    /// then the host's own, each host tool with the class and kind it gives itself.
    #[test]
    fn the_catalogue_names_the_tools_rawko_serves() {
        use rawko_agents::catalogue;
        let mut served: Vec<String> = BUILTIN_TOOL_PLUGINS
            .iter()
            .flat_map(|b| {
                rawko_distribution::examine(b.wasm)
                    .unwrap()
                    .manifest
                    .provides
                    .tools
            })
            .collect();
        let file_tools: Vec<&str> = catalogue::FILE_TOOLS.iter().map(|t| t.name).collect();
        assert_eq!(served, file_tools);
        for t in host::host_tools() {
            let name = &t.info().name;
            let entry = catalogue::builtin(name)
                .unwrap_or_else(|| panic!("host tool {name} is not in the catalogue"));
            assert_eq!(t.access(), entry.access, "{name}");
            assert_eq!(t.acp_kind(), entry.acp_kind, "{name}");
            served.push(name.clone());
        }
        let catalogued: Vec<&str> = catalogue::catalogue().iter().map(|t| t.name).collect();
        assert_eq!(served, catalogued);
    }

    /// The first-party plugins carry manifests that hold against their components, as any
    /// installed plugin must.
    #[test]
    fn builtin_plugins_carry_valid_manifests() {
        for b in BUILTIN_TOOL_PLUGINS {
            let examined =
                rawko_distribution::examine(b.wasm).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(examined.manifest.name, b.name);
            assert_eq!(examined.manifest.kinds, vec![Kind::Tool]);
        }
        let examined = rawko_distribution::examine(BASH_FILTER.wasm).unwrap();
        assert_eq!(examined.manifest.name, BASH_FILTER.name);
        assert_eq!(examined.manifest.kinds, vec![Kind::BashFilter]);
        // Config names a built-in adapter plugin by its short name; its manifest names it as the
        // plugin it is when installed, which must not take the short name.
        for b in [OPENAI, ANTHROPIC, REPLAY] {
            let examined =
                rawko_distribution::examine(b.wasm).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(examined.manifest.name, format!("rawko-{}", b.name));
            assert_eq!(examined.manifest.kinds, vec![Kind::Adapter]);
            assert_eq!(
                examined.manifest.provides.adapters,
                vec![b.name.to_string()]
            );
            assert!(is_builtin_name(b.name) && !is_builtin_name(&examined.manifest.name));
        }
    }
}
