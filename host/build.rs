//! Builds rawko's first-party plugins for `wasm32-wasip2` so the binary can embed them.

include!("../plugins/wasm-build.rs");

fn main() {
    let built = build_plugins(&["rawko-tools"]);
    stage(&built[0], "rawko_tools.wasm");
}
