//! Whether the workspace's own files are trusted, and the yes/no prompt: what a workspace brings,
//! the decision a run takes about it, and the question on the terminal that `run`, `init` and
//! `plugin install` ask.

use std::io::{BufRead, IsTerminal, Write};

use crate::cli::{Context, terminal_safe};
use rawko_config::Trust;
use rawko_config::trust::{Status, TrustStore};

/// What a workspace brings, one indented line per file (at most 20), for people.
pub fn brought_list(brought: &[std::path::PathBuf]) -> String {
    let mut lines: Vec<String> = brought
        .iter()
        .take(20)
        .map(|p| format!("  {}", terminal_safe(&p.display().to_string())))
        .collect();
    if brought.len() > 20 {
        lines.push(format!("  and {} more", brought.len() - 20));
    }
    lines.join("\n")
}

/// Whether this workspace's own `.rawko/` files are trusted for this run: remembered (and
/// unchanged since), given with `--trust` (remembered too), or asked on a terminal when the
/// workspace brings agents or config of its own, showing what it brings.
pub(crate) fn decide_trust(cx: &Context, flag: bool, may_prompt: bool) -> anyhow::Result<Trust> {
    let store = TrustStore::new(&cx.dirs.data);
    let ws = cx.workspace();
    if flag {
        store.trust(ws, "--trust")?;
        return Ok(Trust::Trusted);
    }
    let changed = match store.status(ws)? {
        Status::Trusted(_) => return Ok(Trust::Trusted),
        Status::Changed(_) => true,
        Status::Untrusted => false,
    };
    let brought = rawko_config::trust::brought(ws);
    if brought.is_empty() {
        return Ok(Trust::Untrusted);
    }
    if may_prompt && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        let why = if changed {
            "changed since you trusted it"
        } else {
            "brings agents or config of its own"
        };
        let question = format!(
            "{} {why}:\n{}\nUntil you trust it, its agents get read-only tools\nand its config \
             only narrows yours. Trust this workspace? [y/N] ",
            terminal_safe(&ws.display().to_string()),
            brought_list(&brought)
        );
        if ask(&question)? {
            store.trust(ws, "prompt")?;
            return Ok(Trust::Trusted);
        }
        return Ok(Trust::Untrusted);
    }
    if changed {
        eprintln!("warning: {}", crate::cli::changed_since_trusted());
    }
    tracing::info!("workspace is not trusted: its own agents get read-only tools");
    Ok(Trust::Untrusted)
}

/// Ask a yes/no question on the terminal; anything but y/yes is no.
pub fn ask(question: &str) -> anyhow::Result<bool> {
    let mut err = std::io::stderr().lock();
    write!(err, "{}", crate::cli::terminal_safe(question))?;
    err.flush()?;
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    let answer = line.trim().to_ascii_lowercase();
    Ok(answer == "y" || answer == "yes")
}
