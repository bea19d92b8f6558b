//! A `config.yaml`, as the user's and as a workspace's (trusted or not). Invariants: no panic;
//! a parse error names the file and a line and column; an untrusted workspace layer never adds
//! an adapter, a default adapter, an arbiter or context settings to the user's.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rawko_config::{Config, Layers};

const USER: &str = "adapters:\n  mine:\n    plugin: openai\ndefaults:\n  adapter: mine\n  limits: { maxIterations: 10, maxTokens: 1000 }\n";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let ws = match Config::parse(Path::new("ws.yaml"), text) {
        Ok(c) => c,
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("ws.yaml"), "{msg}");
            return;
        }
    };
    let user = Config::parse(Path::new("user.yaml"), USER).expect("the user's config parses");
    let layers = Layers {
        user: Some(("user.yaml".into(), user.clone())),
        workspace: Some(("ws.yaml".into(), ws)),
    };
    let (untrusted, _ignored) = layers.effective(rawko_config::Trust::Untrusted);
    let merged = untrusted.merged();
    assert_eq!(merged.adapters.keys().collect::<Vec<_>>(), ["mine"]);
    assert_eq!(merged.adapters["mine"], user.adapters["mine"]);
    let d = merged.defaults.expect("the user's defaults stay");
    assert_eq!(d.adapter.as_deref(), Some("mine"));
    let l = d.limits.expect("the user's limits stay");
    assert!(l.max_iterations.is_some_and(|n| n <= 10));
    assert!(l.max_tokens.is_some_and(|n| n <= 1000));
    assert!(merged.arbiter.is_none() && merged.context.is_none());
    assert!(merged.model_aliases.is_empty());
    let (trusted, _) = layers.effective(rawko_config::Trust::Trusted);
    let _ = trusted.merged();
});
