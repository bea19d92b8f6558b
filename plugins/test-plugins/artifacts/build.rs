//! Builds the test plugins for `wasm32-wasip2` and writes a constant naming each `.wasm`.

include!("../../wasm-build.rs");

/// Every test plugin, by package name. A test names one through the constant generated for it,
/// so a plugin listed here without a test using it is easy to spot, and a test naming a plugin
/// that is not listed here does not compile.
const PLUGINS: &[&str] = &[
    "rawko-hostile-tool",
    "rawko-hostile-adapter",
    "rawko-ask-filter",
    "rawko-greeter",
    "rawko-greeter-net",
    "rawko-greedy-tool",
    "rawko-future-tool",
    // A first-party plugin, installed by tests as a stranger's would be.
    "rawko-adapter-openai",
];

fn main() {
    let built = build_plugins(PLUGINS);
    let mut consts = String::new();
    for (package, path) in PLUGINS.iter().zip(&built) {
        let name = package
            .trim_start_matches("rawko-")
            .replace('-', "_")
            .to_uppercase();
        consts.push_str(&format!(
            "/// `{package}`, built for wasm32-wasip2.\npub const {name}: &str = {:?};\n",
            path.display().to_string()
        ));
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("artifacts.rs");
    std::fs::write(out, consts).unwrap();
}
