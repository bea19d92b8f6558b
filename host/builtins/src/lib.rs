//! The first-party plugins embedded in rawko: the file tools, the built-in shell policy and the
//! built-in adapters, each compiled for `wasm32-wasip2` by this crate's build script. What the
//! host must know about the built-in adapters beyond their bytes is in `rawko_adapters`.

/// A plugin embedded in the binary at build time. The plugins are `static`s, not `const`s: a
/// constant is copied into every place that uses it, and with it the megabytes it refers to
/// (the file tools were in the binary five times over).
#[derive(Debug, Clone, Copy)]
pub struct Builtin {
    pub name: &'static str,
    pub wasm: &'static [u8],
    /// Lowercase hex SHA-256 of `wasm`, computed by the build script.
    pub sha256: &'static str,
}

/// The first-party file tools: Read, Write, Edit, Glob, Grep, LS.
pub static TOOLS: Builtin = Builtin {
    name: "rawko-tools",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_tools.wasm")),
    sha256: include_str!(concat!(env!("OUT_DIR"), "/rawko_tools.wasm.sha256")),
};

/// The built-in shell policy, first in every bash filter chain.
pub static BASH_FILTER: Builtin = Builtin {
    name: "rawko-policy",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_bash_filter.wasm")),
    sha256: include_str!(concat!(env!("OUT_DIR"), "/rawko_bash_filter.wasm.sha256")),
};

/// Every built-in tool plugin.
pub static BUILTIN_TOOL_PLUGINS: &[Builtin] = &[TOOLS];

/// The OpenAI Chat Completions adapter (and compatible servers).
pub static OPENAI: Builtin = Builtin {
    name: "openai",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_openai.wasm")),
    sha256: include_str!(concat!(
        env!("OUT_DIR"),
        "/rawko_adapter_openai.wasm.sha256"
    )),
};

/// The Anthropic Messages API adapter.
pub static ANTHROPIC: Builtin = Builtin {
    name: "anthropic",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_anthropic.wasm")),
    sha256: include_str!(concat!(
        env!("OUT_DIR"),
        "/rawko_adapter_anthropic.wasm.sha256"
    )),
};

/// The adapter that plays back a recording.
pub static REPLAY: Builtin = Builtin {
    name: "replay",
    wasm: include_bytes!(concat!(env!("OUT_DIR"), "/rawko_adapter_replay.wasm")),
    sha256: include_str!(concat!(
        env!("OUT_DIR"),
        "/rawko_adapter_replay.wasm.sha256"
    )),
};

/// Every plugin embedded in rawko.
pub static ALL: &[Builtin] = &[TOOLS, BASH_FILTER, OPENAI, ANTHROPIC, REPLAY];

/// The provider name of the tools the host implements itself (`Bash`, `Git`).
pub const HOST: &str = "host";

/// Whether `name` is taken by rawko itself: a built-in plugin, a built-in adapter plugin that
/// config names by it, or the host's own tools. An installed plugin may not take it, so a name
/// always means one thing.
pub fn is_builtin_name(name: &str) -> bool {
    name == HOST || ALL.iter().any(|b| b.name == name)
}

#[cfg(test)]
mod tests {
    use sha2::Digest;

    #[test]
    fn each_digest_is_the_sha256_of_its_bytes() {
        for b in super::ALL {
            let digest: String = sha2::Sha256::digest(b.wasm)
                .iter()
                .map(|x| format!("{x:02x}"))
                .collect();
            assert_eq!(b.sha256, digest, "{}", b.name);
        }
    }
}
