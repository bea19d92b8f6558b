//! `rawko init`: give a workspace its own `.rawko/` with a commented `config.yaml` and copies
//! of the built-in agents to edit.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;

use crate::cli::trust::{ask, brought_list};
use crate::cli::{Context, print_out, terminal_safe};
use rawko_agents::builtin;
use rawko_agents::registry::workspace_dir;
use rawko_config::trust::Status;

/// Create .rawko/ with config.yaml and the default agents
#[derive(Debug, Args)]
#[command(
    after_help = "Writes .rawko/config.yaml and copies the built-in agents (and the JSON \
Schema editors validate them with) into .rawko/agents/, where they take precedence over the \
built-ins. Existing files are left alone unless --force is given."
)]
pub struct InitCmd {
    /// Overwrite files that already exist
    #[arg(long)]
    force: bool,
}

/// The `.rawko/.gitignore` that `rawko init` writes when there is none.
pub const GITIGNORE: &str = "# Written by `rawko init`: files rawko keeps here for this machine only.\n\
/knowledge.db\n/knowledge.db-*\n/*.db-wal\n/*.db-shm\n";

/// The `config.yaml` that `rawko init` writes: every setting explained, the optional ones
/// commented out. It must parse as a [`rawko_config::Config`] (a test checks).
pub const DEFAULT_CONFIG: &str = r#"# rawko settings for this workspace, written by `rawko init`.
#
# This file travels with the repository. It is laid over your own
# $XDG_CONFIG_HOME/rawko/config.yaml (same shape), key by key, once you trust the workspace;
# until then it may only narrow yours. It can never redefine an adapter your own config
# defines. Keep API keys out of both: name the environment variable that holds a key instead.

# Named adapter instances: the adapter is the capability, the agent is the role. An agent
# picks one with `adapter: NAME`; the others use `defaults.adapter`.
# adapters:
#   default:
#     plugin: openai                # openai | anthropic | replay | an installed adapter plugin
#     model: gpt-4.1
#     base_url: https://api.openai.com/v1
#     api_key_env: OPENAI_API_KEY   # rawko reads it and adds it to requests; the plugin never sees it
#     timeout: 120                  # seconds per request

# How the next agent is chosen: `fixed` follows each agent's transitions; `llm` asks an
# adapter to choose among the targets a transition allows.
arbiter:
  mode: fixed
  # adapter: default

# What an agent gets when its definition does not say.
defaults:
  # adapter: default
  limits:
    maxIterations: 20   # model round trips per agent state
    timeout: 600000     # milliseconds per agent state

# Bash-filter plugins to run, in order, after the built-in policy; any deny wins.
# bash:
#   filters: []
"#;

impl InitCmd {
    pub async fn execute(self, cx: &Context) -> anyhow::Result<ExitCode> {
        let ws = cx.workspace();
        let config_path = ws.join(".rawko").join(rawko_config::FILE_NAME);
        let agents_dir = workspace_dir(ws);

        let mut in_the_way = builtin::existing(&agents_dir);
        if config_path.exists() {
            in_the_way.insert(0, config_path.clone());
        }
        if !self.force && !in_the_way.is_empty() {
            let list: Vec<String> = in_the_way.iter().map(|p| shown(ws, p)).collect();
            eprintln!(
                "error: {} already exist{}; nothing was changed (use --force to overwrite)",
                list.join(", "),
                if list.len() == 1 { "s" } else { "" }
            );
            return Ok(ExitCode::from(1));
        }

        // What the workspace brought before this init: trusting it is the user's call.
        let trust = rawko_config::trust::TrustStore::new(&cx.dirs.data);
        let already_trusted = matches!(trust.status(ws)?, Status::Trusted(_));
        let foreign = rawko_config::trust::brought(ws);

        let verb = |p: &Path| {
            if in_the_way.iter().any(|x| x == p) {
                "replaced"
            } else {
                "created"
            }
        };
        let mut out = String::new();
        std::fs::create_dir_all(ws.join(".rawko"))
            .with_context(|| format!("cannot create {}", ws.join(".rawko").display()))?;
        // Never leave a config.yaml that rawko itself cannot read.
        rawko_config::Config::parse(&config_path, DEFAULT_CONFIG)?;
        std::fs::write(&config_path, DEFAULT_CONFIG)
            .with_context(|| format!("cannot write {}", config_path.display()))?;
        out.push_str(&format!(
            "{} {}\n",
            verb(&config_path),
            shown(ws, &config_path)
        ));
        let written = builtin::write_to(&agents_dir)
            .with_context(|| format!("cannot write the agents into {}", agents_dir.display()))?;
        for p in written {
            out.push_str(&format!("{} {}\n", verb(&p), shown(ws, &p)));
        }
        // What rawko keeps in .rawko/ for this machine only stays out of `git add -A`. (Run
        // state and trust live outside the workspace altogether.)
        let ignore = ws.join(".rawko").join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, GITIGNORE)
                .with_context(|| format!("cannot write {}", ignore.display()))?;
            out.push_str(&format!("created {}\n", shown(ws, &ignore)));
        }
        if already_trusted || foreign.is_empty() || ask_to_trust(ws, &foreign)? {
            trust
                .trust(ws, "rawko init")
                .context("cannot record that this workspace is trusted")?;
            out.push_str("trusted this workspace (its own agents and config take effect; `rawko trust --revoke` undoes it)\n");
        } else {
            out.push_str(&format!(
                "not trusted: the workspace already brought files of its own:\n{}\n\
                 review them, then run `rawko trust`; until then its agents get read-only tools\n",
                brought_list(&foreign)
            ));
        }
        out.push_str(
            "edit the agents in .rawko/agents/; `rawko agents list` shows which are in effect\n",
        );
        print_out(&out)?;
        Ok(ExitCode::SUCCESS)
    }
}

/// Ask on a terminal whether to trust a workspace that brought `foreign` files before init;
/// without a terminal, no.
fn ask_to_trust(ws: &Path, foreign: &[PathBuf]) -> anyhow::Result<bool> {
    if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
        return Ok(false);
    }
    ask(&format!(
        "{} already brings files of its own:\n{}\nTrust them (its agents get the tools they \
         ask for, its config takes effect)? [y/N] ",
        terminal_safe(&ws.display().to_string()),
        brought_list(foreign)
    ))
}

fn shown(ws: &Path, p: &Path) -> String {
    p.strip_prefix(ws).unwrap_or(p).display().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_config_parses_and_says_what_the_design_says() {
        let c =
            rawko_config::Config::parse(Path::new(".rawko/config.yaml"), DEFAULT_CONFIG).unwrap();
        assert_eq!(c.arbiter.unwrap().mode, rawko_config::ArbiterMode::Fixed);
        let limits = c.defaults.unwrap().limits.unwrap();
        assert_eq!(
            (limits.max_iterations, limits.timeout),
            (Some(20), Some(600_000))
        );
        // The commented-out adapter example is valid too, once uncommented.
        let uncommented: String = DEFAULT_CONFIG
            .lines()
            .skip_while(|l| !l.starts_with("# adapters:"))
            .take_while(|l| l.starts_with('#'))
            .map(|l| format!("{}\n", &l[2..]))
            .collect();
        let c = rawko_config::Config::parse(Path::new("x"), &uncommented).unwrap();
        assert_eq!(
            c.adapters["default"].api_key_env.as_deref(),
            Some("OPENAI_API_KEY")
        );
    }
}
