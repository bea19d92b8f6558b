//! The `rawko:plugin` WIT package: which versions this rawko implements, and what each world of
//! the newest one imports and exports, read from `wit/since_v*/` with wit-parser at build time.
//!
//! Released versions are frozen: each lives in its own `wit/since_vX.Y.Z/` directory and never
//! changes (a test below holds every frozen file to its recorded digest). A change to the
//! contract is a new directory beside the old ones.

include!(concat!(env!("OUT_DIR"), "/worlds.rs"));

/// One world: the interfaces it imports and exports, as `ns:pkg/interface` without versions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct World {
    pub name: &'static str,
    pub imports: &'static [&'static str],
    pub exports: &'static [&'static str],
}

/// One interface: its functions, with resource methods named as the component model names them
/// (`[method]descriptor.open-at`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface {
    pub name: &'static str,
    pub functions: &'static [&'static str],
}

/// The interface named `name` (`ns:pkg/interface`, no version) in [`VERSION`].
pub fn interface(name: &str) -> Option<&'static Interface> {
    INTERFACES.iter().find(|i| i.name == name)
}

/// The world named `name` in [`VERSION`].
pub fn world(name: &str) -> Option<&'static World> {
    WORLDS.iter().find(|w| w.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};
    use std::path::{Path, PathBuf};

    /// Every file of every released version, with its SHA-256. A released version is frozen:
    /// plugins built against it must keep loading. Change the contract in a new `since_v`
    /// directory instead, and add its files here once it is released.
    const FROZEN: &[(&str, &str)] = &[
        (
            "since_v0.1.0/adapter.wit",
            "72bdd3932cd0f0728b60a94b11e74997f988a6852dad53c3c89316dd24f99c02",
        ),
        (
            "since_v0.1.0/bash-filter.wit",
            "973ac93c5539d82146c952abb15ae262dd1b73942719ec0afc9b813c8c0ffbdd",
        ),
        (
            "since_v0.1.0/deps/cli/cli.wit",
            "fb6ac5d23fcaf3d231142a3c2f9bb1e9bc1fe5af6f1f329f6b1a5555ce0d3873",
        ),
        (
            "since_v0.1.0/deps/clocks/clocks.wit",
            "6ed8aa65bb8cbe224a0b2cbac9fc1b3bd25bdb17eda5ae0d23c983ed31c447cc",
        ),
        (
            "since_v0.1.0/deps/filesystem/filesystem.wit",
            "e675f261017bf9b4fa7df5b9701023fe0249ede71021ac1bf978748e62edcda8",
        ),
        (
            "since_v0.1.0/deps/io/io.wit",
            "96e206d00076fa0480df32c5bcf255a3fa4862805ac2f6b8537a781cce54f433",
        ),
        (
            "since_v0.1.0/deps/random/random.wit",
            "48578c40213d5cab6650980905fa146a0be8c39c4433ee5e7e00637b87dbe08f",
        ),
        (
            "since_v0.1.0/deps/sockets/sockets.wit",
            "ad38dbf3b0bbdf34c0f2b608edcbfee04d71b443a63faff1f5e0053c3f84b377",
        ),
        (
            "since_v0.1.0/tool.wit",
            "eb486bb854a5b8e1c494a199cd53aa0ce8078a36e4816adcdcbbf64bc516b73f",
        ),
        (
            "since_v0.1.0/types.wit",
            "4db6add86246418554a9acaca7a3ac88708d45c91b227c21110f1ecb4e58633d",
        ),
        (
            "since_v0.1.0/worlds.wit",
            "5bac7efd3864119862be6e863e4b52da075d89af514abdf94305bc0f0f7d137e",
        ),
    ];

    fn files(dir: &Path, out: &mut Vec<PathBuf>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                files(&p, out);
            } else {
                out.push(p);
            }
        }
    }

    #[test]
    fn released_wit_versions_are_frozen() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../wit");
        let mut found = Vec::new();
        for release in ["since_v0.1.0"] {
            let mut list = Vec::new();
            files(&root.join(release), &mut list);
            for p in list {
                let rel = p
                    .strip_prefix(&root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let digest = format!("{:x}", Sha256::digest(std::fs::read(&p).unwrap()));
                found.push((rel, digest));
            }
        }
        found.sort();
        let listing: String = found
            .iter()
            .map(|(f, d)| format!("    ({f:?}, {d:?}),\n"))
            .collect();
        let expected: Vec<(String, String)> = FROZEN
            .iter()
            .map(|(f, d)| (f.to_string(), d.to_string()))
            .collect();
        assert!(
            found == expected,
            "a released WIT version changed; released versions are frozen. Put the change in a \
             new wit/since_vX.Y.Z directory. The files as they are now:\n{listing}"
        );
    }

    #[test]
    fn the_worlds_are_read_from_the_wit() {
        assert_eq!(SUPPORTED.last(), Some(&VERSION));
        // Plugins built against a released version keep loading.
        assert!(SUPPORTED.contains(&"0.1.0"));
        let tool = world("tool").expect("a tool world");
        assert!(tool.exports.contains(&"rawko:plugin/tools"));
        assert!(tool.imports.contains(&"rawko:plugin/log"));
        assert!(tool.imports.contains(&"wasi:filesystem/preopens"));
        assert!(!tool.imports.iter().any(|i| i.starts_with("wasi:sockets")));
        let adapter = world("adapter").expect("an adapter world");
        assert!(adapter.imports.contains(&"rawko:plugin/http"));
        assert!(adapter.exports.contains(&"rawko:plugin/llm"));
        // Since 0.1.1; its `use` of `llm` refers to the export, so `llm` is not imported.
        assert!(adapter.exports.contains(&"rawko:plugin/embeddings"));
        assert!(!adapter.imports.contains(&"rawko:plugin/llm"));
        assert_eq!(
            interface("rawko:plugin/embeddings").map(|i| i.functions),
            Some(&["embed"][..])
        );
        let filter = world("bash-filter").expect("a bash-filter world");
        assert!(filter.imports.contains(&"rawko:plugin/shell"));
        assert!(filter.exports.contains(&"rawko:plugin/filter"));
    }
}
