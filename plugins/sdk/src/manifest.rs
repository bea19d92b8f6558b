//! The plugin manifest, carried inside the component.
//!
//! rawko decides whether to install a plugin from what the plugin says it is and needs (name,
//! version, kinds, the `rawko:plugin` WIT versions it supports, each capability with a reason),
//! before running any of its code. [`manifest!`](macro@crate::manifest) copies the crate's `rawko-plugin.yaml` into a
//! custom section of the compiled module; componentization keeps custom sections of the core
//! module, so `rawko plugin inspect` and `install` read it straight from the `.wasm`.

/// Name of the custom section that holds the manifest.
pub const SECTION: &str = "rawko-manifest";

/// Embed the crate's manifest (by default `rawko-plugin.yaml` next to `Cargo.toml`) in the
/// component, once per plugin:
///
/// ```ignore
/// rawko_plugin_sdk::manifest!();
/// // or, with another file name relative to the crate's root:
/// rawko_plugin_sdk::manifest!("plugin.yaml");
/// ```
///
/// The file is checked by the host, not here: `rawko plugin inspect FILE.wasm` shows what rawko
/// makes of it.
#[macro_export]
macro_rules! manifest {
    () => {
        $crate::manifest!("rawko-plugin.yaml");
    };
    ($file:literal) => {
        // Native builds (tests, benchmarks) have no use for the section.
        #[cfg(target_arch = "wasm32")]
        const _: () = {
            const BYTES: &[u8] = ::core::include_bytes!(::core::concat!(
                ::core::env!("CARGO_MANIFEST_DIR"),
                "/",
                $file
            ));
            #[used]
            #[unsafe(link_section = "rawko-manifest")]
            static MANIFEST: [u8; BYTES.len()] = $crate::__private::manifest_bytes(BYTES);
        };
    };
}

/// `bytes` as an array, for a static whose size is known only from `include_bytes!`.
#[doc(hidden)]
pub const fn manifest_bytes<const N: usize>(bytes: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = bytes[i];
        i += 1;
    }
    out
}
