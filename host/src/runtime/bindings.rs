//! Host-side bindings for the `rawko:plugin@0.1.0` WIT package, generated in one place.
//!
//! Each world gets its own module; WASI types come from `wasmtime-wasi` and the interfaces that
//! worlds share are generated once (in `tool`) and reused by the others through `with`.

/// The `tool` world: the `tools` export, plus the shared `types` and `log` interfaces.
pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "rawko:plugin/tool",
        exports: { default: async },
        with: {
            "wasi": wasmtime_wasi::p2::bindings,
        },
    });
}

pub use tool::exports::rawko::plugin::tools;
pub use tool::rawko::plugin::log;
pub use tool::rawko::plugin::types;

/// The `bash-filter` world: the `filter` export and the host's `shell` import. `log` is the one
/// generated for `tool`.
pub mod bash_filter {
    wasmtime::component::bindgen!({
        path: "../wit",
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
