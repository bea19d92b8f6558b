//! The filter chain: rawko's built-in policy first, then the bash-filter plugins named in
//! `config.yaml` (`bash.filters`, as `.wasm` files or installed plugins' names), in order. Any deny wins, and a filter that fails denies.
//! `ask` needs a person: it is put to the user when stdin and stderr are a terminal and denied
//! otherwise.

use std::io::IsTerminal;
use std::path::Path;

use rawko_distribution::{Kind, MAX_PLUGIN_BYTES as MAX_FILTER_BYTES, PluginStore};
use rawko_runtime::filter::FilterQuery;
use rawko_runtime::{FilterPlugin, Runtime, RuntimeError};
use rawko_shell::parse::{ParseOptions, parse};
use rawko_shell::verdict::{CheckReport, Decision, FilterOutcome, FilterVerdict};
use rawko_shell::{ParsedCommand, Policy, Resolver};

/// The name the built-in policy filter reports under.
pub const BUILTIN: &str = "rawko-policy";

/// The loaded filters, in the order they run.
#[derive(Debug)]
pub struct Chain {
    filters: Vec<FilterPlugin>,
}

impl Chain {
    /// The built-in policy, then each of `plugins` (name, component bytes).
    pub async fn load(rt: &Runtime, plugins: &[(String, Vec<u8>)]) -> Result<Self, RuntimeError> {
        let mut filters =
            vec![FilterPlugin::load(rt, BUILTIN, rawko_builtins::BASH_FILTER.wasm).await?];
        for (name, wasm) in plugins {
            filters.push(FilterPlugin::load(rt, name, wasm).await?);
        }
        Ok(Chain { filters })
    }

    /// The filters' names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.filters.iter().map(FilterPlugin::name).collect()
    }

    /// Parse `raw` as a command line run from the workspace and ask every filter about it.
    pub async fn check(
        &self,
        rt: &Runtime,
        raw: &str,
        policy: &Policy,
        resolver: &Resolver,
    ) -> CheckReport {
        let opts = ParseOptions {
            resolver,
            workspace: &policy.workspace,
            expand_globs: true,
        };
        let parsed = match parse(raw, &policy.workspace, &opts) {
            Ok(p) => p,
            Err(e) => {
                return CheckReport {
                    decision: Decision::Deny,
                    decided_by: "parser".into(),
                    reason: e.to_string(),
                    command: None,
                    filters: Vec::new(),
                };
            }
        };
        self.check_parsed(rt, parsed, policy, resolver).await
    }

    /// Ask every filter about an already parsed command line.
    pub async fn check_parsed(
        &self,
        rt: &Runtime,
        parsed: ParsedCommand,
        policy: &Policy,
        resolver: &Resolver,
    ) -> CheckReport {
        let query = FilterQuery::new(&parsed, policy, resolver);
        let mut outcomes = Vec::new();
        for f in &self.filters {
            let verdict = match f.check(rt, &query).await {
                Ok(v) => v,
                Err(e) => FilterVerdict {
                    decision: Decision::Deny,
                    reason: e.to_string(),
                    commands: Vec::new(),
                },
            };
            let denied = verdict.decision == Decision::Deny;
            outcomes.push(FilterOutcome {
                filter: f.name().to_string(),
                verdict,
            });
            if denied {
                break;
            }
        }
        let mut report = combine(outcomes, parsed);
        // The host does not take any filter's word for a command it knows cannot be judged.
        if report.decision != Decision::Deny
            && let Some(u) = report.command.as_ref().and_then(|c| c.unsupported.first())
        {
            report.reason = format!("the command contains {u}");
            report.decision = Decision::Deny;
            report.decided_by = "rawko".into();
        }
        report
    }
}

fn combine(outcomes: Vec<FilterOutcome>, parsed: ParsedCommand) -> CheckReport {
    let strictest = outcomes
        .iter()
        .map(|o| o.verdict.decision)
        .max()
        .unwrap_or(Decision::Deny);
    let (decided_by, reason) = match outcomes.iter().find(|o| o.verdict.decision == strictest) {
        Some(o) if strictest != Decision::Allow => (o.filter.clone(), o.verdict.reason.clone()),
        Some(_) => ("every filter".into(), "every filter allows it".into()),
        None => ("rawko".into(), "no filter ran".into()),
    };
    CheckReport {
        decision: strictest,
        decided_by,
        reason,
        command: Some(parsed),
        filters: outcomes,
    }
}

/// Settle an `ask`: put the question to the installed asker ([`crate::ask`]), else to the user
/// when stdin and stderr are a terminal; deny otherwise. Other decisions pass through.
pub fn settle_ask(report: &mut CheckReport) {
    if report.decision != Decision::Ask {
        return;
    }
    let question = crate::ask::Question {
        who: report.decided_by.clone(),
        what: report
            .command
            .as_ref()
            .map(|c| c.raw.clone())
            .unwrap_or_default(),
        reason: report.reason.clone(),
    };
    if let Some(yes) = crate::ask::installed(&question) {
        if yes {
            report.decision = Decision::Allow;
            report.reason = format!("the user agreed ({})", report.reason);
        } else {
            report.decision = Decision::Deny;
            report.reason = format!("the user declined ({})", report.reason);
        }
        return;
    }
    if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        // The exact command, on one line, every control character shown: a carriage return or
        // an escape sequence in it must not rewrite what the user is asked to approve.
        eprint!(
            "{} asks before running `{}`: {}\nRun it? [y/N] ",
            rawko_text::line(&report.decided_by, 200),
            rawko_text::line(
                report
                    .command
                    .as_ref()
                    .map(|c| c.raw.as_str())
                    .unwrap_or(""),
                4000
            ),
            rawko_text::line(&report.reason, 1000)
        );
        let mut line = String::new();
        if std::io::stdin().read_line(&mut line).is_ok() && matches!(line.trim(), "y" | "Y" | "yes")
        {
            report.decision = Decision::Allow;
            report.reason = format!("the user agreed ({})", report.reason);
            return;
        }
        report.decision = Decision::Deny;
        report.reason = format!("the user declined ({})", report.reason);
        return;
    }
    report.decision = Decision::Deny;
    report.reason = format!(
        "{} asks for confirmation ({}), and nobody is at a terminal to give it",
        report.decided_by, report.reason
    );
}

/// A bash filter named in a config that could not be read: which one, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FilterFileError(pub String);

/// Read the filter plugins named in `bash.filters`: each is a `.wasm` file (absolute, or
/// relative to the directory `base` of the config file that names it) or the name of an
/// installed bash-filter plugin in `store`. A name is a file when it ends in `.wasm` or holds a
/// `/`; an installed plugin's bytes are checked against the lockfile's digest.
pub fn read_filter_files(
    base: &Path,
    names: &[String],
    store: &PluginStore,
) -> Result<Vec<(String, Vec<u8>)>, FilterFileError> {
    names
        .iter()
        .map(|n| {
            let path = base.join(n);
            let is_file = n.ends_with(".wasm") || n.contains('/');
            if !is_file {
                return read_installed(n, store);
            }
            if path.extension().is_none_or(|e| e != "wasm") {
                return Err(format!(
                    "bash filter {n:?}: name a bash-filter plugin's .wasm file (absolute, or relative to the config file) or an installed bash-filter plugin"
                ));
            }
            let wasm = rawko_capability::fs::read_regular(&path, MAX_FILTER_BYTES)
                .map_err(|e| format!("bash filter {}: {e}", path.display()))?;
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| n.clone());
            Ok((name, wasm))
        })
        .collect::<Result<_, String>>()
        .map_err(FilterFileError)
}

/// The installed bash-filter plugin `name`, by its name.
fn read_installed(name: &str, store: &PluginStore) -> Result<(String, Vec<u8>), String> {
    let installed = store
        .get(name)
        .map_err(|e| format!("bash filter `{name}`: {e}"))?
        .ok_or_else(|| {
            format!(
                "bash filter `{name}`: no plugin of that name is installed (see `rawko plugin list`), \
                 and it is not a .wasm file"
            )
        })?;
    if !installed.kinds().contains(&Kind::BashFilter) {
        let kinds: Vec<&str> = installed.kinds().iter().map(|k| k.as_str()).collect();
        return Err(format!(
            "bash filter `{name}`: the installed plugin is a {} plugin, not a bash filter",
            kinds.join(", ")
        ));
    }
    let wasm = installed
        .wasm()
        .map_err(|e| format!("bash filter `{name}`: {e}"))?;
    Ok((name.to_string(), wasm))
}
