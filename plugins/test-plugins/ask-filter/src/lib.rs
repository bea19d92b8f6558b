//! A bash filter for tests of the chain: it denies any command line with the word
//! `forbidden-by-plugin`, asks about one with `please-ask`, and allows the rest. It also calls
//! the host's parser, so a test can see that the import works from a third-party filter.

use rawko_plugin_sdk::bash_filter::{
    Command, CommandVerdict, Decision, Filter, Policy, Verdict, parse,
};

struct MarkerFilter;

impl Filter for MarkerFilter {
    fn check(command: &Command, policy: &Policy) -> Verdict {
        if parse("true", &policy.workspace).is_err() {
            return Verdict::deny("the host's parser is unreachable");
        }
        let verdicts = command
            .commands
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let has = |w: &str| c.argv.iter().any(|a| a.text() == w);
                let (decision, reason) = if has("forbidden-by-plugin") {
                    (Decision::Deny, "the org policy forbids this marker")
                } else if has("please-ask") {
                    (Decision::Ask, "this marker needs a person to agree")
                } else {
                    (Decision::Allow, "no marker")
                };
                CommandVerdict {
                    index: i as u32,
                    decision,
                    rule: "markers".into(),
                    reason: reason.into(),
                }
            })
            .collect();
        Verdict::from_commands(verdicts)
    }
}

rawko_plugin_sdk::export_filter!(MarkerFilter);
rawko_plugin_sdk::manifest!();
