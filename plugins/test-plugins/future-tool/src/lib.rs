//! A tool plugin built against `rawko:plugin@0.9.0`, a version rawko does not implement. It does
//! not use the guest SDK (which is generated from the current WIT): its bindings come from its
//! own `wit/`, and its manifest is embedded by hand, as the SDK's `manifest!` would.

#[cfg(target_arch = "wasm32")]
mod bindings {
    wit_bindgen::generate!({ world: "tool", path: "wit" });

    struct Future;

    impl exports::rawko::plugin::tools::Guest for Future {
        fn list_tools() -> Vec<String> {
            vec!["Future".to_string()]
        }
    }

    export!(Future);
}

#[cfg(target_arch = "wasm32")]
#[used]
#[unsafe(link_section = "rawko-manifest")]
static MANIFEST: [u8; include_bytes!("../rawko-plugin.yaml").len()] =
    *include_bytes!("../rawko-plugin.yaml");
