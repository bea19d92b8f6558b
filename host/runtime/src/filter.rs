//! Bash-filter plugins: loading one and asking it for a verdict in a fresh sandbox. The host's
//! side of the `shell` import filters use to parse nested scripts and resolve programs is the
//! `shell` capability ([`crate::shell`]).
//!
//! A filter gets no filesystem, no environment and no network; the `shell` import answers only
//! with what rawko's own parser and resolver would decide, so a filter judges with the same
//! reading of a command that the executor will run.

use std::sync::Arc;

use crate::bindings::bash_filter::BashFilterPre;
use crate::bindings::{filter as wf, shell as ws};
use crate::limits::{FILTER_BUDGET, MAX_FILTER_TEXT};
use crate::runtime::{Runtime, RuntimeError};
use crate::sandbox::{Failure, Sandbox};
use crate::shell::{ShellContext, ShellCtx, command_to_wit, path_str};
use crate::state::HostState;
use rawko_capability::FsGrants;
use rawko_shell::verdict::{CommandVerdict, Decision, FilterVerdict};
use rawko_shell::{ParsedCommand, Policy, Resolver};

/// A command line as every filter of a chain is asked about it: in the WIT's types, converted
/// once for the whole chain, with the context the `shell` import answers from.
#[derive(Debug)]
pub struct FilterQuery {
    command: ws::Command,
    policy: wf::Policy,
    cx: Arc<ShellContext>,
}

impl FilterQuery {
    pub fn new(command: &ParsedCommand, policy: &Policy, resolver: &Resolver) -> Self {
        FilterQuery {
            command: command_to_wit(command),
            policy: policy_to_wit(policy),
            cx: Arc::new(ShellContext {
                resolver: resolver.clone(),
                policy: policy.clone(),
            }),
        }
    }
}

/// Why a filter gave no verdict. The chain treats it as a denial.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FilterError {
    #[error("bash filter {plugin} failed: {message}")]
    Failed { plugin: String, message: String },
}

/// A loaded bash-filter plugin.
pub struct FilterPlugin {
    name: Arc<str>,
    digest: String,
    pre: BashFilterPre<HostState>,
}

impl std::fmt::Debug for FilterPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterPlugin")
            .field("name", &self.name)
            .field("digest", &self.digest)
            .finish_non_exhaustive()
    }
}

impl FilterPlugin {
    /// Compile (or load from the cache) and link a bash-filter plugin.
    pub async fn load(rt: &Runtime, name: &str, wasm: &[u8]) -> Result<Self, RuntimeError> {
        let (compiled, pre) = rt.link(name, wasm, rt.filter_linker())?;
        let pre = BashFilterPre::new(pre).map_err(|e| RuntimeError::Load {
            plugin: name.to_string(),
            message: format!(
                "is not a bash-filter plugin (no `rawko:plugin/filter@{}` export): {e:#}",
                rawko_wit::VERSION
            ),
        })?;
        Ok(FilterPlugin {
            name: name.into(),
            digest: compiled.digest,
            pre,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// SHA-256 of the component's bytes.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Ask the filter about the query's command under its policy, in a fresh sandbox.
    pub async fn check(&self, rt: &Runtime, q: &FilterQuery) -> Result<FilterVerdict, FilterError> {
        let fail = |message: String| FilterError::Failed {
            plugin: self.name.to_string(),
            message,
        };
        let budget = FILTER_BUDGET;
        let mut sandbox = Sandbox::new(rt, &self.name, &FsGrants::none(), budget)
            .map_err(|e| fail(e.to_string()))?;
        sandbox.state_mut().shell = ShellCtx::new(q.cx.clone());
        let pre = &self.pre;
        let outcome = sandbox
            .run(async |store| {
                let instance = pre.instantiate_async(&mut *store).await?;
                instance
                    .rawko_plugin_filter()
                    .call_check(&mut *store, &q.command, &q.policy)
                    .await
            })
            .await;
        match outcome {
            Ok(v) => verdict_from_wit(v, q.command.commands.len()).map_err(fail),
            Err(Failure::Budget(kind)) => Err(fail(format!(
                "it exceeded its {kind} budget ({})",
                kind.limit(&budget)
            ))),
            Err(Failure::Trap(message)) => Err(fail(format!(
                "it crashed: {}",
                Failure::with_stderr(message, &sandbox.stderr_tail())
            ))),
        }
    }
}

fn text(s: String) -> String {
    rawko_text::line(&s, MAX_FILTER_TEXT).into_owned()
}

fn decision(d: wf::Decision) -> Decision {
    match d {
        wf::Decision::Allow => Decision::Allow,
        wf::Decision::Ask => Decision::Ask,
        wf::Decision::Deny => Decision::Deny,
    }
}

/// A filter's verdict, checked: indexes must name commands, and the overall decision is at
/// least as strict as the strictest per-command one.
fn verdict_from_wit(v: wf::Verdict, commands: usize) -> Result<FilterVerdict, String> {
    let mut out = Vec::with_capacity(v.commands.len());
    for c in v.commands {
        let index = usize::try_from(c.index).unwrap_or(usize::MAX);
        if index >= commands {
            return Err(format!(
                "it returned a verdict for command {index}, but the command line has {commands}"
            ));
        }
        out.push(CommandVerdict {
            index,
            decision: decision(c.decision),
            rule: text(c.rule),
            reason: text(c.reason),
        });
    }
    let strictest = out.iter().map(|c| c.decision).max();
    let mut overall = decision(v.decision);
    let mut reason = text(v.reason);
    if let Some(s) = strictest
        && s > overall
    {
        overall = s;
        if let Some(c) = out.iter().find(|c| c.decision == s) {
            reason = c.reason.clone();
        }
    }
    Ok(FilterVerdict {
        decision: overall,
        reason,
        commands: out,
    })
}

fn policy_to_wit(p: &Policy) -> wf::Policy {
    wf::Policy {
        allowed_commands: p.allowed_commands.clone(),
        blocked_patterns: p.blocked_patterns.clone(),
        read_paths: p.read_paths.iter().map(|d| path_str(d)).collect(),
        write_paths: p.write_paths.iter().map(|d| path_str(d)).collect(),
        workspace: path_str(&p.workspace),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(index: u32, decision: wf::Decision, reason: &str) -> wf::CommandVerdict {
        wf::CommandVerdict {
            index,
            decision,
            rule: "r".into(),
            reason: reason.into(),
        }
    }

    /// What a hostile or careless filter may answer, and what the host makes of it.
    #[test]
    fn a_filter_cannot_allow_what_it_denies_or_judge_commands_that_are_not_there() {
        // An overall `allow` over a per-command `deny` is a deny, with the command's reason.
        let v = verdict_from_wit(
            wf::Verdict {
                decision: wf::Decision::Allow,
                reason: "looks fine".into(),
                commands: vec![
                    command(0, wf::Decision::Allow, "ok"),
                    command(1, wf::Decision::Deny, "rm is not allowed"),
                ],
            },
            2,
        )
        .unwrap();
        assert_eq!(v.decision, Decision::Deny);
        assert_eq!(v.reason, "rm is not allowed");
        let v = verdict_from_wit(
            wf::Verdict {
                decision: wf::Decision::Allow,
                reason: "looks fine".into(),
                commands: vec![command(0, wf::Decision::Ask, "needs a person")],
            },
            1,
        )
        .unwrap();
        assert_eq!(v.decision, Decision::Ask);

        // A verdict about a command the line does not have is no verdict.
        for index in [1, u32::MAX] {
            let e = verdict_from_wit(
                wf::Verdict {
                    decision: wf::Decision::Allow,
                    reason: String::new(),
                    commands: vec![command(index, wf::Decision::Allow, "ok")],
                },
                1,
            )
            .unwrap_err();
            assert!(e.contains("the command line has 1"), "{e}");
        }

        // Its words reach the user's terminal only sanitized and capped.
        let v = verdict_from_wit(
            wf::Verdict {
                decision: wf::Decision::Deny,
                reason: format!("\u{1b}[2J{}", "x".repeat(10 * MAX_FILTER_TEXT)),
                commands: Vec::new(),
            },
            0,
        )
        .unwrap();
        assert!(!v.reason.contains('\u{1b}'), "{:?}", &v.reason[..20]);
        assert!(
            v.reason.len() <= MAX_FILTER_TEXT + '…'.len_utf8(),
            "{}",
            v.reason.len()
        );
    }
}
