//! Builds rawko's first-party plugins for `wasm32-wasip2` so the binary can embed them.

include!("../plugins/wasm-build.rs");

fn main() {
    let built = build_plugins(&["rawko-tools", "rawko-bash-filter"]);
    stage(&built[0], "rawko_tools.wasm");
    stage(&built[1], "rawko_bash_filter.wasm");
}
