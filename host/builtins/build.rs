//! Builds rawko's first-party plugins for `wasm32-wasip2` so the binary can embed them.

include!("../../plugins/wasm-build.rs");

use sha2::Digest;

fn main() {
    let packages = [
        "rawko-tools",
        "rawko-bash-filter",
        "rawko-adapter-openai",
        "rawko-adapter-anthropic",
        "rawko-adapter-replay",
    ];
    for (package, built) in packages.iter().zip(build_plugins(&packages)) {
        let staged = stage(&built, &format!("{}.wasm", package.replace('-', "_")));
        // The SHA-256 the compiled-plugin cache keys each by, computed once here rather than
        // at every start of rawko (hashing the embedded plugins was a quarter of `tools list`).
        let bytes = std::fs::read(&staged).expect("the staged plugin");
        let digest: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let mut file = staged.into_os_string();
        file.push(".sha256");
        std::fs::write(&file, digest).expect("writing the plugin's digest");
    }
}
