//! Host-side bindings for the `rawko:plugin` WIT package, generated in one place from its
//! newest version (`wit/since_v0.1.1`).
//!
//! Each world gets its own module; WASI types come from `wasmtime-wasi` and the interfaces that
//! worlds share are generated once (in `tool`) and reused by the others through `with`.
//!
//! Plugins built against an older released version load with these same bindings: wasmtime
//! matches imports and exports semver-compatibly (`rawko:plugin/llm@0.1.0` is found as
//! `@0.1.1`), and each 0.1.x only adds to the one before, so an old plugin's types are the new
//! ones. What a later version added, an older plugin lacks: an adapter's `embeddings` export is
//! looked up on its own and may be missing (see the `adapter` module).

/// The `tool` world: the `tools` export and the `output` import, plus the shared `types` and
/// `log` interfaces. A piece of output past the call's budget traps, so `output` is trappable.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.1",
        world: "rawko:plugin/tool",
        imports: { "rawko:plugin/output": trappable },
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
        },
    });
}

/// The `adapter` world: the `llm` and `embeddings` exports, and the `http` and `progress`
/// imports. HTTP calls wait on the network, so they are async on the host (the guest still sees
/// a blocking call). The world's own `Adapter`/`AdapterPre` would insist on every export; the
/// host loads each export interface through its `GuestIndices` instead.
pub mod adapter {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.1",
        world: "rawko:plugin/adapter",
        imports: {
            "rawko:plugin/http": async | trappable,
            default: trappable,
        },
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
            "rawko:plugin/types": super::tool::rawko::plugin::types,
            "rawko:plugin/log": super::tool::rawko::plugin::log,
            "rawko:plugin/http.response": rawko_capability::http::Incoming,
        },
    });
}

pub use adapter::exports::rawko::plugin::{embeddings, llm};
pub use adapter::rawko::plugin::{http, progress};
pub use tool::exports::rawko::plugin::tools;
pub use tool::rawko::plugin::log;
pub use tool::rawko::plugin::output;
pub use tool::rawko::plugin::types;

/// The `bash-filter` world: the `filter` export and the host's `shell` import. `log` is the one
/// generated for `tool`.
pub mod bash_filter {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.1",
        world: "rawko:plugin/bash-filter",
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
            "rawko:plugin/log": super::tool::rawko::plugin::log,
        },
    });
}

pub use bash_filter::exports::rawko::plugin::filter;
pub use bash_filter::rawko::plugin::shell;
