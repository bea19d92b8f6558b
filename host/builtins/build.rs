//! Builds rawko's first-party plugins for `wasm32-wasip2` so the binary can embed them.

include!("../../plugins/wasm-build.rs");

fn main() {
    let packages = [
        "rawko-tools",
        "rawko-bash-filter",
        "rawko-adapter-openai",
        "rawko-adapter-anthropic",
        "rawko-adapter-replay",
    ];
    for (package, built) in packages.iter().zip(build_plugins(&packages)) {
        stage(&built, &format!("{}.wasm", package.replace('-', "_")));
    }
}
