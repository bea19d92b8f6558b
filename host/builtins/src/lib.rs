//! The first-party plugins embedded in rawko: the file tools, the built-in shell policy and the
//! built-in adapters, each compiled for `wasm32-wasip2` by this crate's build script. What the
//! host must know about the built-in adapters beyond their bytes is in `rawko_adapters`.

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

/// The provider name of the tools the host implements itself (`Bash`, `Git`).
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
