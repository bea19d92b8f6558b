//! The plugins rawko ships inside its binary, and the set of tools a command can call: tools
//! from wasm plugins and tools the host provides itself (`Bash`). The built-in adapters are
//! described in [`crate::adapters::builtin`].

use std::path::Path;

use crate::distribution::{Kind, Store, fs_limit};
use crate::runtime::{Runtime, RuntimeError, ToolInfo, ToolPlugin};

/// A plugin embedded in the binary at build time.
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    pub name: &'static str,
    pub wasm: &'static [u8],
}

/// The first-party file tools: Read, Write, Edit, Glob, Grep, LS.
pub const TOOLS: Builtin = Builtin {
    name: "rawko-tools",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_tools.wasm")),
};

/// The built-in shell policy, first in every bash filter chain.
pub const BASH_FILTER: Builtin = Builtin {
    name: "rawko-policy",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_bash_filter.wasm")),
};

/// Every built-in tool plugin.
pub const BUILTIN_TOOL_PLUGINS: &[Builtin] = &[TOOLS];

/// The OpenAI Chat Completions adapter (and compatible servers).
pub const OPENAI: Builtin = Builtin {
    name: "openai",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_openai.wasm")),
};

/// The Anthropic Messages API adapter.
pub const ANTHROPIC: Builtin = Builtin {
    name: "anthropic",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_anthropic.wasm")),
};

/// The adapter that plays back a recording.
pub const REPLAY: Builtin = Builtin {
    name: "replay",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_replay.wasm")),
};

/// What a [`Provider::Host`] reports as its name.
pub const HOST: &str = "host";

/// Whether `name` is taken by rawko itself: a built-in plugin, a built-in adapter plugin that
/// config names by it, or the host's own tools. An installed plugin may not take it, so a name
/// always means one thing.
pub fn is_builtin_name(name: &str) -> bool {
    name == HOST
        || [TOOLS, BASH_FILTER, OPENAI, ANTHROPIC, REPLAY]
            .iter()
            .any(|b| b.name == name)
}

/// A tool the host implements itself rather than a plugin.
#[derive(Debug)]
pub struct HostTool {
    pub info: ToolInfo,
}

/// Where a tool comes from.
#[derive(Debug, Clone, Copy)]
pub enum Provider<'a> {
    Plugin(&'a ToolPlugin),
    Host(&'a HostTool),
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

/// Loaded tool plugins and host tools, and which one provides each tool name.
#[derive(Debug, Default)]
pub struct ToolSet {
    plugins: Vec<ToolPlugin>,
    host: Vec<HostTool>,
}

impl ToolSet {
    /// The built-in tool plugins and the host's own tools.
    pub async fn builtin(rt: &Runtime) -> Result<Self, RuntimeError> {
        let mut set = ToolSet::default();
        for b in BUILTIN_TOOL_PLUGINS {
            set.add(ToolPlugin::load(rt, b.name, b.wasm).await?);
        }
        set.host.push(HostTool {
            info: crate::shell::bash::info(),
        });
        Ok(set)
    }

    /// Load the built-in tool plugins, then every installed tool plugin in `data_dir`, each held
    /// to the filesystem the user granted it in `workspace`. Built-in tools keep their names; an
    /// installed plugin that cannot be loaded is reported and left out.
    pub async fn with_installed(
        rt: &Runtime,
        data_dir: &Path,
        workspace: &Path,
    ) -> Result<Self, RuntimeError> {
        let mut set = ToolSet::builtin(rt).await?;
        let installed = match Store::new(data_dir).installed() {
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
                Ok(plugin) => set.add(plugin.with_fs_limit(fs_limit(p.grants(), workspace))),
                Err(e) => tracing::warn!("installed plugin {} is not loaded: {e}", p.name),
            }
        }
        Ok(set)
    }

    /// Add a plugin. Tool names already provided (by an earlier plugin or the host) keep their
    /// provider; the later duplicate is reported and ignored.
    pub fn add(&mut self, plugin: ToolPlugin) {
        for t in plugin.tools() {
            if let Some((other, _)) = self.find(&t.name) {
                tracing::warn!(
                    "plugin {} also provides tool `{}`; using the one from {}",
                    plugin.name(),
                    t.name,
                    other.name()
                );
            }
        }
        self.plugins.push(plugin);
    }

    /// The provider of tool `name`, and the tool. Host tools come first: a plugin cannot
    /// replace `Bash` with a tool of its own.
    pub fn find(&self, name: &str) -> Option<(Provider<'_>, &ToolInfo)> {
        self.host
            .iter()
            .find(|h| h.info.name == name)
            .map(|h| (Provider::Host(h), &h.info))
            .or_else(|| {
                self.plugins
                    .iter()
                    .find_map(|p| p.tool(name).map(|t| (Provider::Plugin(p), t)))
            })
    }

    /// Every callable tool with its provider, first provider winning.
    pub fn tools(&self) -> Vec<(Provider<'_>, &ToolInfo)> {
        let mut seen: std::collections::HashSet<&str> =
            self.host.iter().map(|h| h.info.name.as_str()).collect();
        let mut out: Vec<(Provider<'_>, &ToolInfo)> = Vec::new();
        for p in &self.plugins {
            for t in p.tools() {
                if seen.insert(&t.name) {
                    out.push((Provider::Plugin(p), t));
                }
            }
        }
        out.extend(self.host.iter().map(|h| (Provider::Host(h), &h.info)));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The first-party plugins carry manifests that hold against their components, as any
    /// installed plugin must.
    #[test]
    fn builtin_plugins_carry_valid_manifests() {
        for b in BUILTIN_TOOL_PLUGINS {
            let examined =
                crate::distribution::examine(b.wasm).unwrap_or_else(|e| panic!("{}: {e}", b.name));
            assert_eq!(examined.manifest.name, b.name);
            assert_eq!(examined.manifest.kinds, vec![Kind::Tool]);
        }
        let examined = crate::distribution::examine(BASH_FILTER.wasm).unwrap();
        assert_eq!(examined.manifest.name, BASH_FILTER.name);
        assert_eq!(examined.manifest.kinds, vec![Kind::BashFilter]);
        // Config names a built-in adapter plugin by its short name; its manifest names it as the
        // plugin it is when installed, which must not take the short name.
        for b in [OPENAI, ANTHROPIC, REPLAY] {
            let examined =
                crate::distribution::examine(b.wasm).unwrap_or_else(|e| panic!("{}: {e}", b.name));
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
