//! `rawko bash check`: the filter chain's verdict on a command line, with the rule and the
//! filter behind each decision; and the shell setup `tool call Bash` shares.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::cli::lookup::usable_agent;
use crate::cli::policy::{PolicyFlags, ShellSetup, grants_from};
use crate::cli::{BadInput, Context, print_json, print_out};
use rawko_agents::Agent;
use rawko_capability::{Access, FsGrants};
use rawko_shell::exec;
use rawko_shell::verdict::{CheckReport, CommandVerdict, Decision};

/// Check shell commands against a policy
#[derive(Debug, Args)]
pub struct BashCmd {
    #[command(subcommand)]
    action: BashAction,
}

#[derive(Debug, Subcommand)]
enum BashAction {
    /// Show the filter chain's verdict on a command line: each simple command with the rule
    /// that allowed or denied it, and which filter decided. Exit 0 when allowed, 1 when denied
    /// or when a filter asks
    #[command(after_help = "Examples:\n  \
        rawko bash check --agent developer -- 'cargo test && git status'\n  \
        rawko bash check --read . --allow 'git *' -- 'git status && rm -rf x'\n  \
        rawko bash check --read . --write . --allow 'make test' --json -- 'make test 2>&1'\n\n\
        With --agent, the policy is that agent's: its allowed commands and blocked patterns \
        (tools.bashFilter, kodelet allowed_commands; none listed means no command), the \
        workspace readable, and writable when the agent may change files. An agent that may \
        not call Bash is denied every command. Without --agent, the policy is the flags'.\n\n\
        Filters run in order: rawko's built-in policy, then the bash-filter plugins listed \
        under bash.filters in config.yaml (.wasm files, or names of installed bash-filter \
        plugins). Any deny wins. A command rawko's executor cannot \
        run is reported as denied by `executor`.")]
    Check(CheckArgs),
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// Judge with this agent's shell policy and filesystem access (from the agent search path)
    #[arg(long, value_name = "NAME", conflicts_with_all = ["read", "write", "allow", "block"])]
    agent: Option<String>,
    /// A directory commands may read (relative to the workspace); repeatable
    #[arg(long = "read", value_name = "DIR")]
    read: Vec<PathBuf>,
    /// A directory commands may write (and read); repeatable. Without any, nothing may be written
    #[arg(long = "write", value_name = "DIR")]
    write: Vec<PathBuf>,
    #[command(flatten)]
    policy: PolicyFlags,
    /// Print the verdict as JSON
    #[arg(long)]
    json: bool,
    /// The command line, after `--` (several words are joined with spaces)
    #[arg(last = true, required = true, value_name = "COMMAND")]
    command: Vec<String>,
}

impl BashCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        match self.action {
            BashAction::Check(args) => check(cx, args).await,
        }
    }
}

/// An agent's shell policy as flags, and its grants: the workspace, writable when the agent may
/// change files. `None` when the agent may not call `Bash` at all.
fn agent_policy(cx: &Context, agent: &Agent) -> anyhow::Result<Option<(FsGrants, PolicyFlags)>> {
    if !agent.may_call("Bash") {
        return Ok(None);
    }
    let access = if agent.can_write() {
        Access::ReadWrite
    } else {
        Access::ReadOnly
    };
    let mut grants = FsGrants::none();
    grants.protect_workspace(cx.workspace());
    grants
        .grant(cx.workspace(), Path::new("."), access)
        .map_err(|e| BadInput::new(e.to_string()))?;
    let flags = PolicyFlags {
        allow: agent.bash.allowed_commands.clone().unwrap_or_default(),
        block: agent.bash.blocked_patterns.clone(),
    };
    Ok(Some((grants, flags)))
}

async fn check(cx: &Context, args: CheckArgs) -> anyhow::Result<ExitCode> {
    let raw = args.command.join(" ");
    let (grants, flags) = match &args.agent {
        None => (
            grants_from(cx, &args.read, &args.write)?,
            args.policy.clone(),
        ),
        Some(name) => {
            let agent = usable_agent(cx, name)?;
            match agent_policy(cx, &agent)? {
                Some(p) => p,
                None => {
                    let report = CheckReport {
                        decision: Decision::Deny,
                        decided_by: "agent".into(),
                        reason: format!(
                            "agent '{name}' may not call the Bash tool (its tools.allowed / tools.blocked)"
                        ),
                        command: None,
                        filters: Vec::new(),
                    };
                    return print_report(&report, args.json);
                }
            }
        }
    };
    let rt = cx.runtime()?;
    let shell = ShellSetup::new(cx, &rt, &grants, &flags).await?;
    let mut report = shell
        .chain
        .check(&rt, &raw, &shell.policy, &shell.resolver)
        .await;
    if report.decision == Decision::Allow
        && let Some(parsed) = &report.command
        && let Err(why) = exec::runnable(parsed)
    {
        report.decision = Decision::Deny;
        report.decided_by = "executor".into();
        report.reason = format!("rawko's executor does not run this command: {why}");
    }
    print_report(&report, args.json)
}

/// Print the verdict; exit 0 when allowed, 1 otherwise.
fn print_report(report: &CheckReport, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        print_json(&to_json(report))?;
    } else {
        print_out(&to_text(report))?;
    }
    Ok(if report.decision == Decision::Allow {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// For each simple command, the strictest verdict any filter gave it, and the filter.
fn per_command(report: &CheckReport) -> Vec<Option<(String, &CommandVerdict)>> {
    let n = report.command.as_ref().map_or(0, |c| c.commands.len());
    let mut out: Vec<Option<(String, &CommandVerdict)>> = vec![None; n];
    for f in &report.filters {
        for v in &f.verdict.commands {
            let slot = &mut out[v.index];
            if slot
                .as_ref()
                .is_none_or(|(_, cur)| v.decision > cur.decision)
            {
                *slot = Some((f.filter.clone(), v));
            }
        }
    }
    out
}

fn to_text(report: &CheckReport) -> String {
    let mut s = format!(
        "{}: {} (decided by {})\n",
        report.decision, report.reason, report.decided_by
    );
    let Some(parsed) = &report.command else {
        return s;
    };
    let verdicts = per_command(report);
    for (i, c) in parsed.commands.iter().enumerate() {
        let text: String = c
            .text
            .chars()
            .map(|ch| if ch.is_control() { ' ' } else { ch })
            .collect();
        match &verdicts[i] {
            Some((filter, v)) => {
                s.push_str(&format!(
                    "  {:<5}  {text}\n         [{filter}] {}",
                    v.decision, v.rule
                ));
                if v.decision != Decision::Allow {
                    s.push_str(&format!(": {}", v.reason));
                }
                s.push('\n');
            }
            None => s.push_str(&format!("  -      {text}\n")),
        }
    }
    for u in &parsed.unsupported {
        s.push_str(&format!("  cannot be judged: {u}\n"));
    }
    s
}

fn to_json(report: &CheckReport) -> serde_json::Value {
    let verdicts = per_command(report);
    let commands: Vec<serde_json::Value> = report
        .command
        .iter()
        .flat_map(|p| p.commands.iter().enumerate())
        .map(|(i, c)| {
            let v = &verdicts[i];
            serde_json::json!({
                "index": i,
                "text": c.text,
                "program": c.program.name,
                "path": c.program.path,
                "argv": c.argv,
                "assignments": c.assignments,
                "redirects": c.redirects,
                "cwd": c.cwd,
                "nesting": c.nesting,
                "decision": v.as_ref().map(|(_, v)| v.decision),
                "rule": v.as_ref().map(|(_, v)| v.rule.clone()),
                "reason": v.as_ref().map(|(_, v)| v.reason.clone()),
                "filter": v.as_ref().map(|(f, _)| f.clone()),
            })
        })
        .collect();
    serde_json::json!({
        "decision": report.decision,
        "decided_by": report.decided_by,
        "reason": report.reason,
        "commands": commands,
        "unsupported": report.command.as_ref().map(|c| c.unsupported.clone()).unwrap_or_default(),
        "filters": report.filters,
    })
}
