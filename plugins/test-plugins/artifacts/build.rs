//! Builds the test plugins for `wasm32-wasip2` and writes, for each, a constant naming its
//! `.wasm`, plus the macro `foreach_test_plugin!` that lists them all (as wasmtime's
//! `test-programs-artifacts` does), so the integration tests can insist on a test per plugin.

include!("../../wasm-build.rs");

/// Every test plugin, by package name: the one list. Each gets a constant (`rawko-greeter` →
/// `GREETER`) and an entry in `foreach_test_plugin!` (→ `greeter`). The integration tests run
/// that macro over `assert_test_exists!` (in `tests/test_plugins.rs`), so a plugin listed here
/// without a test of that name there does not compile, and neither does a test naming a
/// plugin that is not listed here.
const PLUGINS: &[&str] = &[
    "rawko-hostile-tool",
    "rawko-hostile-adapter",
    "rawko-ask-filter",
    "rawko-greeter",
    "rawko-greeter-net",
    "rawko-greedy-tool",
    "rawko-future-tool",
    "rawko-socket-tool",
    // A first-party plugin, installed by tests as a stranger's would be.
    "rawko-adapter-openai",
];

/// `rawko-greeter-net` → `greeter_net`.
fn ident(package: &str) -> String {
    package.trim_start_matches("rawko-").replace('-', "_")
}

fn main() {
    let built = build_plugins(PLUGINS);
    let mut out = String::new();
    for (package, path) in PLUGINS.iter().zip(&built) {
        out.push_str(&format!(
            "/// `{package}`, built for wasm32-wasip2.\npub const {}: &str = {:?};\n",
            ident(package).to_uppercase(),
            path.display().to_string()
        ));
    }
    out.push_str(
        "\n/// Invokes `$mac!(name);` once for every test plugin, `name` being its package name\n\
         /// without `rawko-`, in snake case (`hostile_tool`, `greeter_net`, ...).\n\
         #[macro_export]\n\
         macro_rules! foreach_test_plugin {\n    ($mac:ident) => {\n",
    );
    for package in PLUGINS {
        out.push_str(&format!("        $mac!({});\n", ident(package)));
    }
    out.push_str("    };\n}\n");
    let file = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("artifacts.rs");
    std::fs::write(file, out).unwrap();
}
