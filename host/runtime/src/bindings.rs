//! Host-side bindings for the `rawko:plugin` WIT package (`wit/since_v0.1.0`), generated in one
//! place.
//!
//! Each world gets its own module; WASI types come from `wasmtime-wasi` and the interfaces that
//! worlds share are generated once (in `tool`) and reused by the others through `with`.

/// The `tool` world: the `tools` export, plus the shared `types` and `log` interfaces.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.0",
        world: "rawko:plugin/tool",
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
        },
    });
}

/// The `adapter` world: the `llm` export, and the `http` and `progress` imports. HTTP calls
/// wait on the network, so they are async on the host (the guest still sees a blocking call).
pub mod adapter {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.0",
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
            "rawko:plugin/http.response": crate::http::HttpResponse,
        },
    });
}

pub use adapter::exports::rawko::plugin::llm;
pub use adapter::rawko::plugin::{http, progress};
pub use tool::exports::rawko::plugin::tools;
pub use tool::rawko::plugin::log;
pub use tool::rawko::plugin::types;

/// The `bash-filter` world: the `filter` export and the host's `shell` import. `log` is the one
/// generated for `tool`.
pub mod bash_filter {
    wasmtime::component::bindgen!({
        path: "../../wit/since_v0.1.0",
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
