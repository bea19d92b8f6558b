//! What a plugin brings with it from a stranger: the manifest YAML, the component's custom
//! section that carries it, the OCI manifest a registry answers, an OCI reference and a
//! registry's authentication challenge. Invariants: no panic or stall; a reference that parses
//! prints as itself and parses again to the same; a chosen layer always has a sha256 digest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rawko_distribution::manifest::{ComponentInfo, Manifest, bare_component};
use rawko_distribution::oci::{self, Reference};

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    match pick % 5 {
        0 => {
            let _ = Manifest::parse(rest);
        }
        1 => {
            // Through the component: the section is found, read and parsed.
            let info = ComponentInfo::read(&bare_component(rest)).expect("a well-formed component");
            if let Ok(m) = info.manifest() {
                let _ = info.check(&m);
            }
            // And arbitrary bytes as a component.
            if let Ok(info) = ComponentInfo::read(rest)
                && let Ok(m) = info.manifest()
            {
                let _ = info.check(&m);
            }
        }
        2 => {
            if let Ok(chosen) = oci::choose_layer("oci://r/p:t", rest) {
                assert!(oci::is_sha256_digest(&chosen.layer_digest));
            }
        }
        3 => {
            let text = String::from_utf8_lossy(rest);
            if let Ok(r) = Reference::parse(&text) {
                let shown = r.to_string();
                let again = Reference::parse(&shown).expect("a printed reference parses");
                assert_eq!(again, r, "{shown}");
            }
        }
        _ => {
            let text = String::from_utf8_lossy(rest);
            let (scheme, params) = oci::parse_challenge(&text);
            assert!(!scheme.contains(' '), "{scheme:?}");
            let _ = params;
        }
    }
});
