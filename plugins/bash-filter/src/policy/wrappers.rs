//! Wrappers that run another command (`env`, `timeout`, `xargs`, `watch`, `script`, `su`,
//! `bash -c`, ...): opened here so that what they run is judged like any other command.

use rawko_plugin_sdk::bash_filter::{Program, Word};

use super::tables::{COMMAND, ENV, EXEC, NICE, SCRIPT, SHELLS, STDBUF, SU, TIMEOUT, WATCH, XARGS};
use super::{Checker, Cmd, Denial, Judged, deny, short};
use crate::opts;

impl Checker<'_> {
    /// Wrappers that are allowed whenever what they run is.
    pub(super) fn transparent(&self, cmd: &Cmd, depth: usize) -> Option<Judged> {
        let name = cmd.name();
        let wrapper = matches!(
            name,
            "env"
                | "timeout"
                | "nice"
                | "nohup"
                | "stdbuf"
                | "command"
                | "builtin"
                | "exec"
                | "busybox"
                | "xargs"
                | "watch"
                | "script"
        ) || SHELLS.contains(&name);
        if !wrapper {
            return None;
        }
        let args = match self.literal_args(cmd) {
            Ok(a) => a,
            Err(d) => return Some(Err(d)),
        };
        let refuse = |e: String| Denial {
            rule: format!("wrapper: {name}"),
            reason: format!("`{}`: {e}", short(&cmd.normalized())),
        };
        let lit = |v: &[String]| v.iter().cloned().map(Word::Literal).collect::<Vec<_>>();
        let cwd = cmd.cwd.clone();
        Some(match name {
            "env" => (|| {
                let p = opts::parse(&args, &ENV).map_err(refuse)?;
                let mut env = Vec::new();
                let mut rest = p.operands.as_slice();
                while let Some(first) = rest.first() {
                    if first.contains('=') && !first.starts_with('=') {
                        env.push(Word::Literal(first.clone()));
                        rest = &rest[1..];
                    } else {
                        break;
                    }
                }
                let cwd = match p.values(&["C", "chdir"]).last() {
                    Some(dir) => self.resolve(dir, &cmd.cwd),
                    None => cwd.clone(),
                };
                if rest.is_empty() {
                    return self.ordinary(cmd, depth);
                }
                self.via("env", self.inner(cmd, lit(rest), cwd, env, false), depth)
            })(),
            "timeout" => (|| {
                let p = opts::parse(&args, &TIMEOUT).map_err(refuse)?;
                if p.operands.len() < 2 {
                    return self.ordinary(cmd, depth);
                }
                self.via(
                    "timeout",
                    self.inner(cmd, lit(&p.operands[1..]), cwd.clone(), vec![], false),
                    depth,
                )
            })(),
            "nice" | "stdbuf" | "exec" | "command" | "nohup" | "builtin" => (|| {
                let spec = match name {
                    "nice" => &NICE,
                    "stdbuf" => &STDBUF,
                    "exec" => &EXEC,
                    "command" => &COMMAND,
                    _ => &opts::EMPTY,
                };
                let p = opts::parse(&args, spec).map_err(refuse)?;
                if p.operands.is_empty() || (name == "command" && p.has(&["v", "V"])) {
                    return self.ordinary(cmd, depth);
                }
                self.via(
                    name,
                    self.inner(cmd, lit(&p.operands), cwd.clone(), vec![], false),
                    depth,
                )
            })(),
            "busybox" => match args.first() {
                Some(applet) if !applet.starts_with('-') => {
                    let mut inner = self.inner(cmd, lit(&args), cwd.clone(), vec![], false);
                    inner.program = Program {
                        name: applet.rsplit('/').next().unwrap_or(applet).to_string(),
                        path: cmd.program.path.clone(),
                    };
                    self.via("busybox", inner, depth)
                }
                _ => self.ordinary(cmd, depth),
            },
            "xargs" => (|| {
                let p = opts::parse(&args, &XARGS).map_err(refuse)?;
                for f in p.values(&["a", "arg-file"]) {
                    self.readable(&self.resolve(f, &cmd.cwd), "`xargs -a`")?;
                }
                let words = if p.operands.is_empty() {
                    vec![Word::Literal("echo".into())]
                } else {
                    lit(&p.operands)
                };
                self.via(
                    "xargs",
                    self.inner(cmd, words, cwd.clone(), vec![], true),
                    depth,
                )
            })(),
            "watch" => (|| {
                let p = opts::parse(&args, &WATCH).map_err(refuse)?;
                if p.operands.is_empty() {
                    return self.ordinary(cmd, depth);
                }
                if p.has(&["x", "exec"]) {
                    self.via(
                        "watch",
                        self.inner(cmd, lit(&p.operands), cwd.clone(), vec![], false),
                        depth,
                    )
                } else {
                    // watch hands its arguments, joined by spaces, to `sh -c`.
                    self.script("watch", &p.operands.join(" "), &cwd, depth)
                }
            })(),
            "script" => (|| {
                let p = opts::parse(&args, &SCRIPT).map_err(refuse)?;
                let Some(command) = p.values(&["c", "command"]).last() else {
                    return deny(
                        "wrapper: script",
                        "without -c, `script` starts an interactive shell, whose commands cannot be checked",
                    );
                };
                let log = p
                    .operands
                    .first()
                    .map(String::as_str)
                    .unwrap_or("typescript");
                self.writable(&self.resolve(log, &cwd), "`script` (its typescript file)")?;
                for f in p.values(&[
                    "I",
                    "O",
                    "B",
                    "T",
                    "log-in",
                    "log-out",
                    "log-io",
                    "log-timing",
                ]) {
                    self.writable(&self.resolve(f, &cwd), "`script` (its log file)")?;
                }
                self.script("script -c", command, &cwd, depth)
            })(),
            shell => match shell_script(&args) {
                Ok(Some(script)) => self.script(&format!("{shell} -c"), &script, &cwd, depth),
                Ok(None) => self.ordinary(cmd, depth),
                Err(e) => Err(refuse(e)),
            },
        })
    }

    pub(super) fn su(&self, cmd: &Cmd, depth: usize) -> Judged {
        let args = self.literal_args(cmd)?;
        let p = opts::parse(&args, &SU).map_err(|e| Denial {
            rule: "wrapper: su".into(),
            reason: format!("`{}`: {e}", short(&cmd.normalized())),
        })?;
        let Some(command) = p.values(&["c", "command", "session-command"]).last() else {
            return deny(
                "wrapper: su",
                "without -c, `su` starts an interactive shell, whose commands cannot be checked",
            );
        };
        let user_and_args: Vec<&String> = p.operands.iter().filter(|o| *o != "-").collect();
        if user_and_args.len() > 1 {
            return deny("wrapper: su", "`su` passes extra arguments to the shell");
        }
        if let Some(shell) = p.values(&["s", "shell"]).last() {
            let prog = self.host.resolve_program(shell, &cmd.cwd);
            if !SHELLS.contains(&prog.name.as_str()) {
                return deny(
                    "wrapper: su",
                    format!(
                        "`su -s {shell}` runs the command with a program that is not a known shell"
                    ),
                );
            }
        }
        self.script("su -c", command, &cmd.cwd, depth)
    }
}

/// The script of `SHELL [options] -c SCRIPT`, `None` when the shell reads a file or stdin.
pub(super) fn shell_script(args: &[String]) -> Result<Option<String>, String> {
    let mut with_c = false;
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" || a == "-" {
            i += 1;
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            match long {
                "norc" | "noprofile" | "login" | "posix" | "noediting" | "verbose"
                | "restricted" | "version" | "help" | "pretty-print" => {}
                "rcfile" | "init-file" => {
                    return Err(format!(
                        "`--{long}` runs a file of commands, which cannot be checked"
                    ));
                }
                other => return Err(format!("unknown option `--{other}`")),
            }
        } else if a.starts_with('-') || a.starts_with('+') {
            for c in a[1..].chars() {
                match c {
                    'c' => with_c = true,
                    's' => {
                        return Err(
                            "`-s` reads commands from stdin, which cannot be checked".into()
                        );
                    }
                    'o' | 'O' => i += 1,
                    'i' | 'l' | 'e' | 'x' | 'v' | 'u' | 'n' | 'f' | 'h' | 'a' | 'b' | 'k' | 'm'
                    | 'p' | 'r' | 't' | 'B' | 'C' | 'E' | 'H' | 'P' | 'T' => {}
                    other => return Err(format!("unknown option `-{other}`")),
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if !with_c {
        return Ok(None);
    }
    args.get(i)
        .cloned()
        .map(Some)
        .ok_or_else(|| "`-c` without a script".to_string())
}
