//! Reads every `rawko:plugin` version under `wit/since_v*/` with wit-parser and writes, for the
//! newest one, each world's imports and exports as Rust constants, so the host checks plugins
//! against the WIT itself rather than against a hand-kept list or a text search.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use wit_parser::{Resolve, WorldItem, WorldKey};

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../wit");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut versions: Vec<(semver::Version, PathBuf)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("reading {}: {e}", root.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let v = name.strip_prefix("since_v")?;
            Some((semver::Version::parse(v).ok()?, e.path()))
        })
        .collect();
    versions.sort();
    assert!(!versions.is_empty(), "no wit/since_v* directory");

    let mut out = String::new();
    let mut supported = Vec::new();
    let mut newest = None;
    for (dir_version, dir) in versions {
        let (resolve, pkg) = load(&dir);
        let declared = resolve.packages[pkg].name.version.as_ref();
        assert_eq!(
            declared,
            Some(&dir_version),
            "{} declares rawko:plugin@{declared:?}",
            dir.display()
        );
        supported.push(dir_version.to_string());
        newest = Some((resolve, pkg));
    }
    let (resolve, pkg) = newest.expect("checked above");
    writeln!(
        out,
        "/// The `rawko:plugin` version this rawko's bindings are generated from."
    )
    .unwrap();
    writeln!(
        out,
        "pub const VERSION: &str = {:?};",
        supported.last().unwrap()
    )
    .unwrap();
    writeln!(
        out,
        "/// Every `rawko:plugin` version this rawko implements, oldest first."
    )
    .unwrap();
    writeln!(out, "pub const SUPPORTED: &[&str] = &{supported:?};").unwrap();
    writeln!(out, "/// The worlds of [`VERSION`].").unwrap();
    writeln!(out, "pub const WORLDS: &[World] = &[").unwrap();
    let mut worlds: Vec<_> = resolve.packages[pkg].worlds.iter().collect();
    worlds.sort_by_key(|(name, _)| name.as_str());
    for (name, id) in worlds {
        let world = &resolve.worlds[*id];
        let names = |items: &wit_parser::IndexMap<WorldKey, WorldItem>| -> Vec<String> {
            let mut v: Vec<String> = items
                .iter()
                .filter_map(|(key, item)| match item {
                    WorldItem::Interface { id, .. } => Some(match resolve.id_of(*id) {
                        Some(id) => unversioned(&id),
                        None => match key {
                            WorldKey::Name(n) => n.clone(),
                            WorldKey::Interface(_) => unreachable!("a named interface has an id"),
                        },
                    }),
                    _ => None,
                })
                .collect();
            v.sort();
            v.dedup();
            v
        };
        writeln!(
            out,
            "    World {{ name: {name:?}, imports: &{:?}, exports: &{:?} }},",
            names(&world.imports),
            names(&world.exports)
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
    writeln!(
        out,
        "/// Every interface of [`VERSION`] and its dependencies, with its functions."
    )
    .unwrap();
    writeln!(out, "pub const INTERFACES: &[Interface] = &[").unwrap();
    let mut interfaces: Vec<(String, Vec<String>)> = resolve
        .interfaces
        .iter()
        .filter_map(|(id, iface)| {
            let name = unversioned(&resolve.id_of(id)?);
            let mut funcs: Vec<String> = iface.functions.keys().cloned().collect();
            funcs.sort();
            Some((name, funcs))
        })
        .collect();
    interfaces.sort();
    for (name, funcs) in interfaces {
        writeln!(
            out,
            "    Interface {{ name: {name:?}, functions: &{funcs:?} }},"
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
    let dest = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("worlds.rs");
    std::fs::write(dest, out).unwrap();
}

fn load(dir: &Path) -> (Resolve, wit_parser::PackageId) {
    let mut resolve = Resolve::default();
    let (pkg, _) = resolve
        .push_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e:#}", dir.display()));
    (resolve, pkg)
}

/// `ns:pkg/interface@1.2.3` without its version.
fn unversioned(id: &str) -> String {
    id.split('@').next().unwrap_or(id).to_string()
}
