//! What the install-time checks cost: reading a component's manifest, imports and exports
//! without running it, holding them against each other, and hashing the bytes.
//!
//! ```sh
//! cargo bench -p rawko --bench distribution
//! ```

use rawko_builtins::TOOLS;
use rawko_distribution::{self as distribution, ComponentInfo};

fn main() {
    divan::main();
}

/// Parse the first-party tools component (about 1 MiB) down to its manifest section.
#[divan::bench]
fn read_component_info() -> ComponentInfo {
    ComponentInfo::read(divan::black_box(TOOLS.wasm)).unwrap()
}

/// Parse and check the manifest against the imports and exports already read.
#[divan::bench]
fn check_manifest(bencher: divan::Bencher) {
    let info = ComponentInfo::read(TOOLS.wasm).unwrap();
    bencher.bench(|| {
        let m = divan::black_box(&info).manifest().unwrap();
        info.check(&m).unwrap()
    });
}

/// The whole of `examine`: read, parse, check, and the SHA-256 of the bytes.
#[divan::bench]
fn examine() -> distribution::Examined {
    distribution::examine(divan::black_box(TOOLS.wasm)).unwrap()
}
