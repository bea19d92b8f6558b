//! Long-running programs rawko talks to over stdio (MCP servers, ACP agents, coding CLIs): found
//! the way a shell would, and started in the kernel sandbox with the allow-listed environment.

use std::path::{Path, PathBuf};

use crate::Mode;

/// A program that is not where its command says: what is missing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotFound {
    #[error("{} is not a program", .0.display())]
    NotAProgram(PathBuf),
    #[error("`{0}` is not installed (not found in PATH)")]
    NotInstalled(String),
}

/// `command` as a path: with a `/`, relative to `workspace`; else the first runnable match in
/// `path_dirs`. The error says what is missing.
pub fn resolve(
    command: &str,
    workspace: &Path,
    path_dirs: &[PathBuf],
) -> Result<PathBuf, NotFound> {
    use std::os::unix::fs::PermissionsExt;
    let runnable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if command.contains('/') {
        let p = workspace.join(command);
        return if runnable(&p) {
            Ok(p)
        } else {
            Err(NotFound::NotAProgram(p))
        };
    }
    path_dirs
        .iter()
        .map(|d| d.join(command))
        .find(|p| runnable(p))
        .ok_or_else(|| NotFound::NotInstalled(command.to_string()))
}

/// One program to start.
#[derive(Debug, Clone)]
pub struct Program<'a> {
    /// The `rawko` binary: the sandbox helper and the reaper.
    pub launcher: &'a Path,
    /// As written in the configuration; found with [`resolve`].
    pub command: &'a str,
    pub args: &'a [String],
    /// Names of variables passed through from rawko's environment.
    pub pass_env: &'a [String],
    pub mode: Mode,
    pub network: bool,
    /// Without the kernel sandbox (`--no-sandbox`): under the reaper only.
    pub unconfined: bool,
    pub workspace: &'a Path,
    /// The program's private temporary directory (its `TMPDIR`).
    pub tmp: &'a Path,
    pub path_dirs: &'a [PathBuf],
    /// Processes it may hold at once; the sandbox's default when `None`.
    pub processes: Option<u64>,
}

impl Program<'_> {
    /// The command that starts the program in its sandbox (mode `full` or `unconfined`: under
    /// the reaper, which still takes its process group down with it), in the workspace, with
    /// the sandbox's environment allow-list plus the named variables. Stdio is the caller's.
    pub fn command(&self) -> Result<std::process::Command, NotFound> {
        let program = resolve(self.command, self.workspace, self.path_dirs)?;
        // As a shell passes it: the command as written, so a program that finds itself by
        // its `argv[0]` (a virtualenv's python) finds where it really is.
        let arg0 = self.command.to_string();
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        let mut cmd = if self.unconfined || self.mode == Mode::Full {
            crate::reaper::command(self.launcher, &program, &arg0, &args)
        } else {
            let home = std::env::home_dir();
            let mut policy =
                crate::Policy::new(self.mode, self.workspace, self.tmp, home.as_deref());
            policy.network = self.network;
            if let Some(n) = self.processes {
                policy.limits.processes = n;
            }
            policy.command(self.launcher, &program, &arg0, &args)
        };
        cmd.env_clear()
            .envs(crate::base_env(
                self.path_dirs,
                Some(self.tmp),
                Some(self.workspace),
            ))
            .current_dir(self.workspace);
        for name in self.pass_env {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        Ok(cmd)
    }
}

/// The end of what a program writes to stderr, kept for error messages: at most
/// [`StderrTail::KEEP`] bytes, the rest dropped as it comes.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(std::sync::Arc<std::sync::Mutex<String>>);

impl StderrTail {
    /// Bytes kept.
    pub const KEEP: usize = 2_000;

    /// Read `from` to its end, keeping its tail.
    pub async fn keep(self, mut from: impl tokio::io::AsyncRead + Unpin) {
        use tokio::io::AsyncReadExt;
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let Ok(mut s) = self.0.lock() else { break };
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.len() > Self::KEEP * 2 {
                let mut cut = s.len() - Self::KEEP;
                while !s.is_char_boundary(cut) {
                    cut += 1;
                }
                s.drain(..cut);
            }
        }
    }

    /// What was kept, trimmed, made safe to show and cut to [`StderrTail::KEEP`] bytes.
    pub fn text(&self) -> String {
        self.0
            .lock()
            .map(|s| rawko_text::block(s.trim(), Self::KEEP).into_owned())
            .unwrap_or_default()
    }

    /// `message`, with the end of what the program wrote to stderr when there is any.
    pub fn with(&self, message: String) -> String {
        let tail = self.text();
        if tail.is_empty() {
            message
        } else {
            format!("{message}; its stderr ends: {tail}")
        }
    }
}
