//! The guest SDK for rawko plugins.
//!
//! A rawko plugin is a WebAssembly component built for `wasm32-wasip2` against the
//! `rawko:plugin` WIT package. This crate hides the generated bindings: a tool plugin is a set of
//! types implementing [`tool::Tool`] plus one [`export_tools!`](crate::export_tools) line; a bash filter is a type
//! implementing `bash_filter::Filter` plus one `export_filter!` line.
//!
//! ```ignore
//! use rawko_plugin_sdk::tool::{Context, Tool, ToolError};
//!
//! #[derive(serde::Deserialize, schemars::JsonSchema)]
//! #[serde(deny_unknown_fields)]
//! struct HelloInput {
//!     /// Who to greet.
//!     name: String,
//! }
//!
//! struct Hello;
//!
//! impl Tool for Hello {
//!     const NAME: &'static str = "Hello";
//!     const DESCRIPTION: &'static str = "Greets someone.";
//!     type Input = HelloInput;
//!
//!     fn call(input: HelloInput, _cx: &Context) -> Result<String, ToolError> {
//!         Ok(format!("hello, {}", input.name))
//!     }
//! }
//!
//! rawko_plugin_sdk::export_tools!(Hello);
//! // Embeds `rawko-plugin.yaml`, the manifest `rawko plugin install` checks and shows.
//! rawko_plugin_sdk::manifest!();
//! ```
//!
//! An adapter plugin implements [`adapter::Adapter`] on provider-neutral [`llm`] types (and,
//! where its provider has them, [`embeddings`]) and registers it with
//! [`export_adapter!`](crate::export_adapter); [`sse`] parses streamed replies. The [`llm`],
//! [`embeddings`], [`recording`] and [`sse`] modules need no feature, so the host shares them.
//!
//! Each plugin kind is behind a cargo feature (`tool`, `adapter`, `bash-filter`) because a
//! component carries the type information of every world linked into it: a plugin enables
//! exactly the one it implements. `tool-types` is the [`tool`] module without bindings, for a
//! native build of a tool crate's code (a host running the same tools in process).

#[cfg(all(
    target_arch = "wasm32",
    not(any(feature = "tool", feature = "adapter", feature = "bash-filter"))
))]
compile_error!(
    "rawko-plugin-sdk: enable the feature for the kind of plugin you are writing: `tool`, `adapter` or `bash-filter`"
);

#[cfg(all(
    target_arch = "wasm32",
    any(
        all(feature = "tool", feature = "adapter"),
        all(feature = "tool", feature = "bash-filter"),
        all(feature = "adapter", feature = "bash-filter"),
    )
))]
compile_error!(
    "rawko-plugin-sdk: a plugin implements one kind; enable only one of `tool`, `adapter`, `bash-filter` \
     (build plugins of different kinds in separate cargo invocations)"
);

// The generated bindings name this crate by its path, also from inside it.
extern crate self as rawko_plugin_sdk;

pub mod embeddings;
pub mod llm;
pub mod log;
pub mod manifest;
pub mod path;
pub mod recording;
pub mod sse;

#[cfg(feature = "adapter")]
pub mod adapter;
#[cfg(feature = "tool-types")]
pub mod tool;

#[cfg(feature = "bash-filter")]
pub mod bash_filter;

/// The version of the `rawko:plugin` WIT package these bindings were generated from.
pub const WIT_VERSION: &str = "0.1.1";

#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "tool")]
    pub mod tool {
        pub mod bindings {
            wit_bindgen::generate!({
                world: "tool",
                path: "../../wit/since_v0.1.1",
                generate_all,
                pub_export_macro: true,
                export_macro_name: "__export_tool_world",
                default_bindings_module: "rawko_plugin_sdk::__private::tool::bindings",
                runtime_path: "rawko_plugin_sdk::__private::wit_bindgen::rt",
                bitflags_path: "rawko_plugin_sdk::__private::wit_bindgen::rt::bitflags",
            });
        }
        pub use crate::tool::__dispatch::{dispatch, spec, unknown};
        pub use bindings::exports::rawko::plugin::tools::{
            CallContext as WitCallContext, Guest as ToolsGuest, ToolError as WitToolError,
        };
        pub use bindings::rawko::plugin::types::ToolSpec as WitToolSpec;
    }

    #[cfg(feature = "adapter")]
    pub mod adapter {
        pub mod bindings {
            wit_bindgen::generate!({
                world: "adapter",
                path: "../../wit/since_v0.1.1",
                generate_all,
                pub_export_macro: true,
                export_macro_name: "__export_adapter_world",
                default_bindings_module: "rawko_plugin_sdk::__private::adapter::bindings",
                runtime_path: "rawko_plugin_sdk::__private::wit_bindgen::rt",
                bitflags_path: "rawko_plugin_sdk::__private::wit_bindgen::rt::bitflags",
            });
        }
        pub use crate::adapter::__dispatch::{dispatch, dispatch_embed};
        pub use bindings::exports::rawko::plugin::embeddings::{
            EmbedRequest as WitEmbedRequest, EmbedResponse as WitEmbedResponse,
            Guest as EmbeddingsGuest,
        };
        pub use bindings::exports::rawko::plugin::llm::{
            AdapterError as WitAdapterError, Guest as LlmGuest, Request as WitRequest,
            Response as WitResponse,
        };
    }

    #[cfg(feature = "bash-filter")]
    pub mod bash_filter {
        pub mod bindings {
            wit_bindgen::generate!({
                world: "bash-filter",
                path: "../../wit/since_v0.1.1",
                generate_all,
                pub_export_macro: true,
                export_macro_name: "__export_bash_filter_world",
                default_bindings_module: "rawko_plugin_sdk::__private::bash_filter::bindings",
                runtime_path: "rawko_plugin_sdk::__private::wit_bindgen::rt",
                bitflags_path: "rawko_plugin_sdk::__private::wit_bindgen::rt::bitflags",
            });
        }
        pub use bindings::exports::rawko::plugin::filter::Guest as FilterGuest;
    }

    pub use crate::manifest::manifest_bytes;
    #[cfg(any(feature = "tool", feature = "adapter", feature = "bash-filter"))]
    pub use wit_bindgen;
}
