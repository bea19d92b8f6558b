//! Judging one parsed command line under an agent's policy.
//!
//! Each simple command is judged on its own: its redirections, the paths its arguments name,
//! then its program. Transparent wrappers (`env`, `timeout`, `nice`, `nohup`, `stdbuf`,
//! `command`, `builtin`, `exec`, `busybox`, `xargs`, `watch`, `script -c`, `bash -c`) are opened
//! and only the command inside must be allowed; `sudo`, `su`, `doas`, `find`, `rg`, `git` must
//! themselves be allowed and what they run is judged as well. Programs whose arguments can run
//! commands or write files (git, sed, awk, find, rg, tar, the file-writing utilities) are read
//! argument by argument; when their arguments are only known at run time, they are denied.

mod paths;
mod programs;
mod tables;
#[cfg(test)]
mod tests;
mod wrappers;

use rawko_plugin_sdk::bash_filter::{
    Command, CommandVerdict, Decision, Policy, Program, SimpleCommand, Verdict, Word,
};

use crate::opts;
use crate::pattern::{Pattern, Subject};
use tables::{DOAS, SUDO};

/// What the host answers; the plugin's imports, or a stand-in in tests.
pub trait Host {
    fn parse(&self, script: &str, cwd: &str) -> Result<Command, String>;
    fn resolve_program(&self, program: &str, cwd: &str) -> Program;
    fn resolve_path(&self, path: &str, cwd: &str) -> String;
    /// The first of the policy's blocked patterns that matches `text`, as written.
    fn blocked_pattern(&self, text: &str) -> Option<String>;
}

/// How deep wrappers and nested scripts may go.
const MAX_DEPTH: usize = 8;

/// Why a command is denied: the rule, and the words for the model.
#[derive(Debug, Clone)]
pub struct Denial {
    pub rule: String,
    pub reason: String,
}

fn deny<T>(rule: impl Into<String>, reason: impl Into<String>) -> Result<T, Denial> {
    Err(Denial {
        rule: rule.into(),
        reason: reason.into(),
    })
}

/// The rule that allowed a command, or why it is denied.
type Judged = Result<String, Denial>;

/// Judge `command` under `policy`.
pub fn check(command: &Command, policy: &Policy, host: &dyn Host) -> Verdict {
    let all = |rule: &str, reason: String| {
        let mut v = Verdict::deny(reason.clone());
        v.commands = (0..command.commands.len() as u32)
            .map(|index| CommandVerdict {
                index,
                decision: Decision::Deny,
                rule: rule.to_string(),
                reason: reason.clone(),
            })
            .collect();
        v
    };
    let checker = match Checker::new(policy, host) {
        Ok(c) => c,
        Err(d) => return all(&d.rule, d.reason),
    };
    if let Some(u) = command.unsupported.first() {
        return all("unjudgeable", format!("the command contains {u}"));
    }
    if let Err(d) = checker.blocked(&command.raw) {
        return all(&d.rule, d.reason);
    }
    let verdicts = command
        .commands
        .iter()
        .enumerate()
        .map(|(i, sc)| match checker.simple(sc, 0) {
            Ok(rule) => CommandVerdict {
                index: i as u32,
                decision: Decision::Allow,
                rule,
                reason: format!("`{}` is allowed", short(&sc.text)),
            },
            Err(d) => CommandVerdict {
                index: i as u32,
                decision: Decision::Deny,
                rule: d.rule,
                reason: d.reason,
            },
        })
        .collect();
    Verdict::from_commands(verdicts)
}

/// A command as the checker sees it: an outer one, or one found inside a wrapper.
#[derive(Debug, Clone)]
struct Cmd {
    assignments: Vec<Word>,
    words: Vec<Word>,
    program: Program,
    cwd: String,
    /// More arguments follow that are only known when it runs (`xargs`, `find -exec ... +`).
    open_ended: bool,
}

impl Cmd {
    fn name(&self) -> &str {
        &self.program.name
    }

    /// Name and arguments, for messages and `blockedPatterns`.
    fn normalized(&self) -> String {
        let mut parts: Vec<&str> = self.assignments.iter().map(Word::text).collect();
        if !self.words.is_empty() {
            parts.push(&self.program.name);
            parts.extend(self.words[1..].iter().map(Word::text));
        }
        let mut s = parts.join(" ");
        if self.open_ended {
            s.push_str(" ...");
        }
        s
    }

    /// The arguments known before it runs, and whether more (or unknown ones) follow.
    fn known_args(&self) -> (Vec<String>, bool) {
        let mut known = Vec::new();
        for w in self.words.iter().skip(1) {
            match w {
                Word::Literal(s) => known.push(s.clone()),
                Word::Dynamic(_) => return (known, true),
            }
        }
        (known, self.open_ended)
    }
}

struct Checker<'a> {
    host: &'a dyn Host,
    policy: &'a Policy,
    allowed: Vec<Pattern>,
}

impl<'a> Checker<'a> {
    fn new(policy: &'a Policy, host: &'a dyn Host) -> Result<Self, Denial> {
        Ok(Checker {
            host,
            policy,
            allowed: policy
                .allowed_commands
                .iter()
                .filter_map(|p| Pattern::parse(p))
                .collect(),
        })
    }

    /// The host matches: it compiled the patterns when the policy was made (and refused one
    /// that does not compile), so a fresh instance need not compile them on every call.
    fn blocked(&self, text: &str) -> Result<(), Denial> {
        if self.policy.blocked_patterns.is_empty() {
            return Ok(());
        }
        match self.host.blocked_pattern(text) {
            Some(p) => deny(
                format!("blockedPatterns: {p}"),
                format!("`{}` matches the blocked pattern {p:?}", short(text)),
            ),
            None => Ok(()),
        }
    }

    /// One simple command of a parsed command line (the outer one or a nested script's).
    fn simple(&self, sc: &SimpleCommand, depth: usize) -> Judged {
        for r in &sc.redirects {
            self.redirect(r, &sc.text)?;
        }
        if sc.argv.is_empty() {
            return Ok("redirection only".into());
        }
        self.judge(
            Cmd {
                assignments: sc.assignments.clone(),
                words: sc.argv.clone(),
                program: sc.program.clone(),
                cwd: sc.cwd.clone(),
                open_ended: false,
            },
            depth,
        )
    }

    fn judge(&self, cmd: Cmd, depth: usize) -> Judged {
        if depth > MAX_DEPTH {
            return deny(
                "nesting",
                format!("wrappers and nested scripts go more than {MAX_DEPTH} levels deep"),
            );
        }
        self.blocked(&cmd.normalized())?;
        let Some(first) = cmd.words.first() else {
            return Ok("empty command".into());
        };
        if let Word::Dynamic(t) = first {
            return deny(
                "unjudgeable",
                format!("the program `{t}` is only known when it runs"),
            );
        }
        if let Some(a) = cmd
            .assignments
            .iter()
            .find(|a| matches!(a, Word::Dynamic(_)))
        {
            return deny(
                "unjudgeable",
                format!("the assignment `{}` is only known when it runs", a.text()),
            );
        }
        match cmd.name() {
            "cd" => return self.cd(&cmd),
            "eval" => {
                return deny("eval", "`eval` runs its arguments as a new command line");
            }
            "source" | "." => {
                return deny(
                    "wrapper: source",
                    "`source` runs a script file whose content cannot be checked",
                );
            }
            _ => {}
        }
        if let Some(judged) = self.transparent(&cmd, depth) {
            return judged;
        }
        self.ordinary(&cmd, depth)
    }

    fn cd(&self, cmd: &Cmd) -> Judged {
        match cmd.words.as_slice() {
            [_, Word::Literal(dir)] => {
                let real = self.resolve(dir, &cmd.cwd);
                self.readable(&real, &format!("`cd {dir}`"))?;
                Ok("cd into a readable directory".into())
            }
            _ => deny("cd", "`cd` takes exactly one directory here"),
        }
    }

    fn allowed(&self, cmd: &Cmd) -> Judged {
        let (args, open_ended) = cmd.known_args();
        let assignments: Vec<String> = cmd
            .assignments
            .iter()
            .map(|w| w.text().to_string())
            .collect();
        let subject = Subject {
            assignments: &assignments,
            name: cmd.name(),
            path: cmd.program.path.as_deref(),
            args: &args,
            open_ended,
        };
        let resolve = |w: &str| self.resolve(w, &self.policy.workspace);
        if let Some(p) = self.allowed.iter().find(|p| p.matches(&subject, &resolve)) {
            return Ok(format!("allowedCommands: {}", p.raw));
        }
        let mut why = format!("`{}` is not allowed", short(&cmd.normalized()));
        let argv0 = cmd.words[0].text();
        if cmd.program.path.is_none() {
            why.push_str(&format!(" (`{argv0}` is not a program on PATH)"));
        } else if cmd.name().starts_with('/') {
            why.push_str(&format!(
                " (`{argv0}` is the file {}, not a program on PATH)",
                cmd.name()
            ));
        } else if !assignments.is_empty() {
            why.push_str(
                " (environment assignments before a command must be spelled out in the pattern)",
            );
        } else if open_ended {
            why.push_str(&format!(
                " (its arguments are only known when it runs, so only an open pattern such as `{} *` could allow it)",
                cmd.name()
            ));
        }
        if self.allowed.is_empty() {
            why.push_str("; this agent may run no commands");
        } else {
            let list: Vec<&str> = self
                .allowed
                .iter()
                .take(12)
                .map(|p| p.raw.as_str())
                .collect();
            why.push_str(&format!("; allowed: {}", list.join(", ")));
        }
        deny("allowedCommands", why)
    }

    /// Every argument, which must be known: for programs whose arguments can run commands or
    /// write files.
    fn literal_args(&self, cmd: &Cmd) -> Result<Vec<String>, Denial> {
        let (args, unknown) = cmd.known_args();
        if unknown {
            return deny(
                "unjudgeable",
                format!(
                    "`{}`: some arguments of `{}` are only known when it runs, and its arguments can run commands or write files",
                    short(&cmd.normalized()),
                    cmd.name()
                ),
            );
        }
        Ok(args)
    }

    /// A command found inside another, resolved the way the host resolves `argv[0]`.
    fn inner(
        &self,
        outer: &Cmd,
        words: Vec<Word>,
        cwd: String,
        extra_env: Vec<Word>,
        open: bool,
    ) -> Cmd {
        let program = match words.first() {
            Some(Word::Literal(p)) => self.host.resolve_program(p, &cwd),
            Some(Word::Dynamic(t)) => Program {
                name: t.clone(),
                path: None,
            },
            None => Program {
                name: String::new(),
                path: None,
            },
        };
        let mut assignments = outer.assignments.clone();
        assignments.extend(extra_env);
        Cmd {
            assignments,
            words,
            program,
            cwd,
            open_ended: open || outer.open_ended,
        }
    }

    fn via(&self, wrapper: &str, inner: Cmd, depth: usize) -> Judged {
        if inner.words.is_empty() {
            return deny(
                format!("wrapper: {wrapper}"),
                format!("`{wrapper}` is given no command to run"),
            );
        }
        self.judge(inner, depth + 1)
            .map(|r| format!("{wrapper} → {r}"))
            .map_err(|d| Denial {
                rule: d.rule,
                reason: format!("inside `{wrapper}`: {}", d.reason),
            })
    }

    /// A nested script (`bash -c SCRIPT`, `watch CMD`): parsed by the host, every command in it
    /// judged.
    fn script(&self, wrapper: &str, script: &str, cwd: &str, depth: usize) -> Judged {
        if depth >= MAX_DEPTH {
            return deny(
                "nesting",
                format!("nested scripts go more than {MAX_DEPTH} levels deep"),
            );
        }
        let parsed = self.host.parse(script, cwd).map_err(|e| Denial {
            rule: format!("wrapper: {wrapper}"),
            reason: format!(
                "the script `{}` given to `{wrapper}` cannot be parsed: {e}",
                short(script)
            ),
        })?;
        if let Some(u) = parsed.unsupported.first() {
            return deny(
                "unjudgeable",
                format!(
                    "the script `{}` given to `{wrapper}` contains {u}",
                    short(script)
                ),
            );
        }
        self.blocked(script)?;
        let mut rules = Vec::new();
        for sc in &parsed.commands {
            let r = self.simple(sc, depth + 1).map_err(|d| Denial {
                rule: d.rule,
                reason: format!("inside `{wrapper}`: {}", d.reason),
            })?;
            if !rules.contains(&r) {
                rules.push(r);
            }
        }
        Ok(format!("{wrapper} → {}", rules.join("; ")))
    }

    /// A wrapper used without a command to wrap: an ordinary program.
    fn ordinary(&self, cmd: &Cmd, depth: usize) -> Judged {
        let rule = self.allowed(cmd)?;
        self.path_args(cmd)?;
        self.specific(cmd, &rule, depth)
    }

    /// What allowed programs may still not do with their arguments.
    fn specific(&self, cmd: &Cmd, rule: &str, depth: usize) -> Judged {
        let name = cmd.name();
        let with_inner = |inner: Judged| inner.map(|r| format!("{rule}; {r}"));
        match name {
            "sudo" | "doas" => {
                let args = self.literal_args(cmd)?;
                let spec = if name == "sudo" { &SUDO } else { &DOAS };
                let p = opts::parse(&args, spec).map_err(|e| Denial {
                    rule: format!("wrapper: {name}"),
                    reason: format!("`{}`: {e}", short(&cmd.normalized())),
                })?;
                let mut env = Vec::new();
                let mut rest = p.operands.as_slice();
                while let Some(first) = rest
                    .first()
                    .filter(|f| f.contains('=') && !f.starts_with('='))
                {
                    env.push(Word::Literal(first.clone()));
                    rest = &rest[1..];
                }
                if rest.is_empty() {
                    return Ok(rule.to_string());
                }
                let cwd = match p.values(&["D", "chdir"]).last() {
                    Some(d) => self.resolve(d, &cmd.cwd),
                    None => cmd.cwd.clone(),
                };
                let words = rest.iter().cloned().map(Word::Literal).collect();
                with_inner(self.via(name, self.inner(cmd, words, cwd, env, false), depth))
            }
            "su" => with_inner(self.su(cmd, depth)),
            "find" => with_inner(self.find(cmd, depth)),
            "sed" | "gsed" => self.sed(cmd).map(|()| rule.to_string()),
            "awk" | "gawk" | "mawk" | "nawk" => self.awk(cmd).map(|()| rule.to_string()),
            "git" => self.git(cmd).map(|()| rule.to_string()),
            "rg" => with_inner(self.rg(cmd, depth)),
            "tar" => self.tar(cmd).map(|()| rule.to_string()),
            _ => self.writes(cmd).map(|()| rule.to_string()),
        }
    }
}

/// At most 120 characters of `s`, on one line.
fn short(s: &str) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one.chars().count() > 120 {
        let cut: String = one.chars().take(117).collect();
        format!("{cut}...")
    } else {
        one
    }
}
