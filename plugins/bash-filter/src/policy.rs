//! Judging one parsed command line under an agent's policy.
//!
//! Each simple command is judged on its own: its redirections, the paths its arguments name,
//! then its program. Transparent wrappers (`env`, `timeout`, `nice`, `nohup`, `stdbuf`,
//! `command`, `builtin`, `exec`, `busybox`, `xargs`, `watch`, `script -c`, `bash -c`) are opened
//! and only the command inside must be allowed; `sudo`, `su`, `doas`, `find`, `rg`, `git` must
//! themselves be allowed and what they run is judged as well. Programs whose arguments can run
//! commands or write files (git, sed, awk, find, rg, tar, the file-writing utilities) are read
//! argument by argument; when their arguments are only known at run time, they are denied.

use std::path::Path;

use rawko_plugin_sdk::bash_filter::{
    Command, CommandVerdict, Decision, Policy, Program, Redirect, RedirectKind, SimpleCommand,
    Verdict, Word,
};
use rawko_plugin_sdk::path::normalize;

use crate::opts::{self, Spec};
use crate::pattern::{Pattern, Subject};
use crate::{awk, sed};

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

/// Files anyone may read or write without a grant.
const ALWAYS_READABLE: &[&str] = &["/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"];
const ALWAYS_WRITABLE: &[&str] = &["/dev/null"];

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

    fn redirect(&self, r: &Redirect, text: &str) -> Result<(), Denial> {
        let what = format!("`{}`", short(text));
        match r.kind {
            RedirectKind::Read => match (&r.target, &r.path) {
                (Word::Literal(_), Some(p)) => self.readable(p, &what),
                _ => deny(
                    "unjudgeable",
                    format!(
                        "{what} reads from `{}`, only known when it runs",
                        r.target.text()
                    ),
                ),
            },
            RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite => {
                match (&r.target, &r.path) {
                    (Word::Literal(_), Some(p)) => self.writable(p, &what),
                    _ => deny(
                        "unjudgeable",
                        format!(
                            "{what} writes to `{}`, only known when it runs",
                            r.target.text()
                        ),
                    ),
                }
            }
            RedirectKind::Duplicate => match &r.target {
                Word::Literal(t) if t == "-" || t.chars().all(|c| c.is_ascii_digit()) => Ok(()),
                other => deny(
                    "unjudgeable",
                    format!("{what} duplicates the descriptor `{}`", other.text()),
                ),
            },
            RedirectKind::HereString | RedirectKind::HereDoc => Ok(()),
        }
    }

    fn inside(path: &str, dirs: &[String]) -> bool {
        dirs.iter().any(|d| {
            path == d
                || d == "/"
                || path
                    .strip_prefix(d.as_str())
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    }

    fn readable(&self, path: &str, what: &str) -> Result<(), Denial> {
        if ALWAYS_READABLE.contains(&path)
            || Self::inside(path, &self.policy.read_paths)
            || Self::inside(path, &self.policy.write_paths)
        {
            return Ok(());
        }
        let granted = if self.policy.read_paths.is_empty() {
            "this agent may read no files".to_string()
        } else {
            format!("readable: {}", self.policy.read_paths.join(", "))
        };
        deny(
            "readPaths",
            format!("{what} reads {path}, outside the paths this agent may read ({granted})"),
        )
    }

    fn writable(&self, path: &str, what: &str) -> Result<(), Denial> {
        if ALWAYS_WRITABLE.contains(&path) {
            return Ok(());
        }
        if self.policy.write_paths.is_empty() {
            return deny(
                "writePaths",
                format!("{what} writes {path}, and this agent may not write anything"),
            );
        }
        if !Self::inside(path, &self.policy.write_paths) {
            return deny(
                "writePaths",
                format!(
                    "{what} writes {path}, outside the paths this agent may write ({})",
                    self.policy.write_paths.join(", ")
                ),
            );
        }
        let rawko_dir = format!("{}/.rawko", self.policy.workspace);
        if path.split('/').any(|c| c == ".git")
            || path == rawko_dir
            || path.starts_with(&format!("{rawko_dir}/"))
        {
            return deny(
                "protectedPaths",
                format!(
                    "{what} writes {path}: files under .git (hooks, config) and .rawko decide what runs later, and commands may not change them"
                ),
            );
        }
        Ok(())
    }

    fn resolve(&self, path: &str, cwd: &str) -> String {
        self.host.resolve_path(path, cwd)
    }

    /// Arguments that name files outside the workspace's tree (absolute, or climbing out with
    /// `..`) must be readable.
    fn path_args(&self, cmd: &Cmd) -> Result<(), Denial> {
        for w in cmd.words.iter().skip(1) {
            let Word::Literal(arg) = w else { continue };
            let what = || format!("`{}` (argument `{arg}`)", short(&cmd.normalized()));
            for candidate in path_candidates(arg) {
                let real = self.resolve(candidate, &cmd.cwd);
                self.readable(&real, &what())?;
            }
            // A relative path that leads out through a symlink.
            let relative = arg.split_once('=').map_or(arg.as_str(), |(_, v)| v);
            if !relative.is_empty() && !relative.starts_with('-') && !relative.starts_with('/') {
                let real = self.resolve(relative, &cmd.cwd);
                if real != lexical(&cmd.cwd, relative) {
                    self.readable(&real, &format!("{} (through a symlink)", what()))?;
                }
            }
        }
        Ok(())
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

    /// Wrappers that are allowed whenever what they run is.
    fn transparent(&self, cmd: &Cmd, depth: usize) -> Option<Judged> {
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

    fn su(&self, cmd: &Cmd, depth: usize) -> Judged {
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

    fn find(&self, cmd: &Cmd, depth: usize) -> Judged {
        let args = self.literal_args(cmd)?;
        let mut i = 0;
        while i < args.len() && matches!(args[i].as_str(), "-H" | "-L" | "-P") {
            i += 1;
        }
        if args
            .get(i)
            .is_some_and(|a| a == "-D" || a.starts_with("-O"))
        {
            i += if args[i] == "-D" { 2 } else { 1 };
        }
        let mut roots = Vec::new();
        while i < args.len() && !args[i].starts_with('-') && args[i] != "(" && args[i] != "!" {
            roots.push(args[i].clone());
            i += 1;
        }
        if roots.is_empty() {
            roots.push(".".into());
        }
        let mut rules = Vec::new();
        while i < args.len() {
            match args[i].as_str() {
                action @ ("-exec" | "-execdir" | "-ok" | "-okdir") => {
                    let start = i + 1;
                    let Some(end) = (start..args.len()).find(|&j| args[j] == ";" || args[j] == "+")
                    else {
                        return deny(
                            "wrapper: find",
                            format!("`find {action}` has no terminating `;` or `+`"),
                        );
                    };
                    let words: Vec<Word> = args[start..end]
                        .iter()
                        .map(|a| {
                            if a.contains("{}") {
                                Word::Dynamic(a.clone())
                            } else {
                                Word::Literal(a.clone())
                            }
                        })
                        .collect();
                    let open = args[end] == "+";
                    let wrapper = format!("find {action}");
                    rules.push(self.via(
                        &wrapper,
                        self.inner(cmd, words, cmd.cwd.clone(), vec![], open),
                        depth,
                    )?);
                    i = end + 1;
                }
                "-delete" => {
                    for r in &roots {
                        self.writable(&self.resolve(r, &cmd.cwd), "`find -delete`")?;
                    }
                    i += 1;
                }
                "-fprint" | "-fprint0" | "-fls" | "-fprintf" => {
                    let Some(f) = args.get(i + 1) else {
                        return deny("wrapper: find", format!("`find {}` needs a file", args[i]));
                    };
                    self.writable(&self.resolve(f, &cmd.cwd), &format!("`find {}`", args[i]))?;
                    i += if args[i] == "-fprintf" { 3 } else { 2 };
                }
                _ => i += 1,
            }
        }
        Ok(rules.join("; "))
    }

    fn sed(&self, cmd: &Cmd) -> Result<(), Denial> {
        let args = self.literal_args(cmd)?;
        let refuse = |e: String| Denial {
            rule: "sed".into(),
            reason: format!("`{}`: {e}", short(&cmd.normalized())),
        };
        let mut scripts = Vec::new();
        let mut operands = Vec::new();
        let mut in_place = false;
        let mut i = 0;
        let mut only_operands = false;
        while i < args.len() {
            let a = &args[i];
            if only_operands || !a.starts_with('-') || a == "-" {
                operands.push(a.clone());
            } else if a == "--" {
                only_operands = true;
            } else if let Some(long) = a.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                match name {
                    "expression" => scripts.push(match value {
                        Some(v) => v,
                        None => {
                            i += 1;
                            args.get(i)
                                .cloned()
                                .ok_or_else(|| refuse("--expression needs a script".into()))?
                        }
                    }),
                    "file" => {
                        return Err(refuse(
                            "`--file` reads the script from a file, which cannot be checked".into(),
                        ));
                    }
                    "in-place" => in_place = true,
                    "line-length" => {
                        if value.is_none() {
                            i += 1;
                        }
                    }
                    "quiet" | "silent" | "regexp-extended" | "separate" | "unbuffered"
                    | "null-data" | "zero-terminated" | "posix" | "debug" | "sandbox"
                    | "follow-symlinks" | "binary" => {}
                    other => return Err(refuse(format!("unknown option `--{other}`"))),
                }
            } else {
                let cluster: Vec<char> = a[1..].chars().collect();
                let mut j = 0;
                while j < cluster.len() {
                    match cluster[j] {
                        'n' | 'r' | 'E' | 's' | 'u' | 'z' | 'b' => {}
                        'i' => {
                            in_place = true;
                            break;
                        }
                        'e' | 'l' => {
                            let rest: String = cluster[j + 1..].iter().collect();
                            let value = if rest.is_empty() {
                                i += 1;
                                args.get(i).cloned().ok_or_else(|| {
                                    refuse(format!("`-{}` needs a value", cluster[j]))
                                })?
                            } else {
                                rest
                            };
                            if cluster[j] == 'e' {
                                scripts.push(value);
                            }
                            break;
                        }
                        'f' => {
                            return Err(refuse(
                                "`-f` reads the script from a file, which cannot be checked".into(),
                            ));
                        }
                        c => return Err(refuse(format!("unknown option `-{c}`"))),
                    }
                    j += 1;
                }
            }
            i += 1;
        }
        if scripts.is_empty() && !operands.is_empty() {
            scripts.push(operands.remove(0));
        }
        for s in &scripts {
            let fx = sed::scan(s).map_err(|e| Denial {
                rule: "sed".into(),
                reason: format!(
                    "the sed script {s:?} cannot be read ({e}), so what it does cannot be checked"
                ),
            })?;
            if fx.executes {
                return deny(
                    "sed: e",
                    format!("the sed script {s:?} runs shell commands (`e`)"),
                );
            }
            for w in &fx.writes {
                if w != "/dev/stdout" && w != "/dev/stderr" {
                    self.writable(&self.resolve(w, &cmd.cwd), &format!("the sed script {s:?}"))?;
                }
            }
            for r in &fx.reads {
                self.readable(&self.resolve(r, &cmd.cwd), &format!("the sed script {s:?}"))?;
            }
        }
        if in_place {
            for f in &operands {
                self.writable(&self.resolve(f, &cmd.cwd), "`sed -i`")?;
            }
        }
        Ok(())
    }

    fn awk(&self, cmd: &Cmd) -> Result<(), Denial> {
        let args = self.literal_args(cmd)?;
        let refuse = |e: &str| deny("awk", format!("`{}`: {e}", short(&cmd.normalized())));
        let mut programs = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let a = &args[i];
            if a == "--" {
                i += 1;
                break;
            }
            if !a.starts_with('-') || a == "-" {
                break;
            }
            let (name, attached) = if let Some(long) = a.strip_prefix("--") {
                match long.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (long.to_string(), None),
                }
            } else {
                let n: String = a[1..2].to_string();
                let rest = &a[2..];
                (n, (!rest.is_empty()).then(|| rest.to_string()))
            };
            let mut value = || -> Option<String> {
                attached.clone().or_else(|| {
                    i += 1;
                    args.get(i).cloned()
                })
            };
            match name.as_str() {
                "F" | "field-separator" | "v" | "assign" => {
                    value();
                }
                "e" | "source" => programs.extend(value()),
                "f" | "file" => {
                    return refuse("`-f` reads the program from a file, which cannot be checked");
                }
                "i" | "include" | "l" | "load" | "E" | "exec" => {
                    return refuse(
                        "it loads program code from a file or extension, which cannot be checked",
                    );
                }
                "o" | "pretty-print" | "p" | "profile" | "d" | "dump-variables" => {
                    return refuse("it writes a file of its own");
                }
                "b"
                | "c"
                | "C"
                | "D"
                | "g"
                | "M"
                | "n"
                | "N"
                | "O"
                | "P"
                | "r"
                | "s"
                | "S"
                | "t"
                | "V"
                | "characters-as-bytes"
                | "traditional"
                | "posix"
                | "sandbox"
                | "lint"
                | "bignum"
                | "optimize"
                | "re-interval"
                | "version" => {}
                other => return refuse(&format!("unknown option `{other}`")),
            }
            i += 1;
        }
        if programs.is_empty() {
            match args.get(i) {
                Some(p) => programs.push(p.clone()),
                None => return Ok(()),
            }
        }
        for p in &programs {
            if let Some(why) = awk::escapes(p) {
                return deny("awk", format!("the awk program {p:?} {why}"));
            }
        }
        Ok(())
    }

    fn rg(&self, cmd: &Cmd, depth: usize) -> Judged {
        let args = self.literal_args(cmd)?;
        let mut rules = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let pre = if args[i] == "--pre" {
                i += 1;
                args.get(i).cloned()
            } else {
                args[i].strip_prefix("--pre=").map(str::to_string)
            };
            if let Some(pre) = pre {
                // rg runs the preprocessor once per file, with the file as its argument.
                let inner =
                    self.inner(cmd, vec![Word::Literal(pre)], cmd.cwd.clone(), vec![], true);
                rules.push(self.via("rg --pre", inner, depth)?);
            }
            i += 1;
        }
        Ok(rules.join("; "))
    }

    fn git(&self, cmd: &Cmd) -> Result<(), Denial> {
        let args = self.literal_args(cmd)?;
        let mut cwd = cmd.cwd.clone();
        let mut i = 0;
        let git_deny =
            |rule: &str, why: String| deny(rule, format!("`{}`: {why}", short(&cmd.normalized())));
        while i < args.len() {
            let a = args[i].as_str();
            let (name, attached) = match a.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n, Some(v)),
                _ => (a, None),
            };
            match name {
                "-c" | "--config-env" => {
                    return git_deny("git -c", "`git -c` sets configuration, which can make git run commands (core.pager, core.sshCommand, alias.*)".into());
                }
                _ if a.starts_with("-c") && a.len() > 2 && !a.starts_with("--") => {
                    return git_deny(
                        "git -c",
                        "`git -c` sets configuration, which can make git run commands".into(),
                    );
                }
                "--exec-path" => {
                    return git_deny(
                        "git --exec-path",
                        "`--exec-path` makes git run its helper programs from another directory"
                            .into(),
                    );
                }
                "-p" | "--paginate" => {
                    return git_deny("git --paginate", "`--paginate` runs a pager program".into());
                }
                "-C" | "--git-dir" | "--work-tree" | "--namespace" | "--attr-source" => {
                    let value = match attached {
                        Some(v) => v.to_string(),
                        None => {
                            i += 1;
                            args.get(i).cloned().ok_or_else(|| Denial {
                                rule: "git".into(),
                                reason: format!("`git {name}` needs a value"),
                            })?
                        }
                    };
                    if name != "--namespace" && name != "--attr-source" {
                        let real = self.resolve(&value, &cwd);
                        self.readable(&real, &format!("`git {name} {value}`"))?;
                        if name == "-C" {
                            cwd = real;
                        }
                    }
                }
                "-P"
                | "--no-pager"
                | "--bare"
                | "--no-replace-objects"
                | "--literal-pathspecs"
                | "--glob-pathspecs"
                | "--noglob-pathspecs"
                | "--icase-pathspecs"
                | "--no-optional-locks"
                | "--no-lazy-fetch"
                | "--no-advice"
                | "--version"
                | "--help"
                | "-h"
                | "-v"
                | "--list-cmds"
                | "--html-path"
                | "--man-path"
                | "--info-path" => {}
                _ if a.starts_with('-') => {
                    return git_deny("git", format!("unknown global option `{a}`"));
                }
                _ => break,
            }
            i += 1;
        }
        let Some(sub) = args.get(i) else {
            return Ok(());
        };
        let rest = &args[i + 1..];
        if !GIT_COMMANDS.contains(&sub.as_str()) {
            return git_deny(
                "git aliases",
                format!(
                    "`git {sub}` is not a built-in git command: an alias or an external `git-{sub}` program could run anything"
                ),
            );
        }
        let any = |pred: &dyn Fn(&str) -> bool| rest.iter().any(|a| pred(a));
        let runs = |what: &str| git_deny(&format!("git {sub}"), format!("`git {sub}` {what}"));
        match sub.as_str() {
            "config" => {
                let reads = any(&|a| {
                    matches!(
                        a,
                        "--get"
                            | "--get-all"
                            | "--get-regexp"
                            | "--get-urlmatch"
                            | "--list"
                            | "-l"
                            | "get"
                            | "list"
                    )
                });
                if !reads {
                    return runs(
                        "that sets a value can make later git commands run code (core.pager, core.fsmonitor, alias.*); only reading the configuration is allowed",
                    );
                }
            }
            "submodule" if any(&|a| a == "foreach") => {
                return runs("foreach runs a shell command in every submodule");
            }
            "bisect" if rest.first().is_some_and(|a| a == "run") => {
                return runs("run runs a command");
            }
            "rebase"
                if any(&|a| {
                    a == "-x"
                        || a == "--exec"
                        || a.starts_with("--exec=")
                        || (a.starts_with("-x") && !a.starts_with("--"))
                }) =>
            {
                return runs("--exec runs a shell command after each commit");
            }
            "filter-branch" | "difftool" | "mergetool" | "instaweb" | "web--browse" | "daemon"
            | "credential" | "credential-store" | "credential-cache" | "send-email"
            | "fsmonitor--daemon" | "upload-pack" | "receive-pack" | "shell" | "remote-ext"
            | "remote-fd" | "archimport" | "cvsimport" | "cvsserver" | "p4" | "svn" => {
                return runs("runs programs it takes from its arguments or configuration");
            }
            "grep"
                if any(&|a| {
                    a == "-O"
                        || a.starts_with("--open-files-in-pager")
                        || (a.starts_with("-O") && !a.starts_with("--"))
                }) =>
            {
                return runs("--open-files-in-pager runs a pager program");
            }
            _ => {}
        }
        let mut j = 0;
        while j < rest.len() {
            let a = rest[j].as_str();
            if a.starts_with("--upload-pack")
                || a.starts_with("--receive-pack")
                || a.starts_with("--exec=")
                || a == "--exec"
                || (a == "-u"
                    && matches!(
                        sub.as_str(),
                        "clone" | "fetch" | "pull" | "ls-remote" | "archive"
                    ))
            {
                return runs(&format!("`{a}` runs a program named in the command"));
            }
            if a.contains("ext::") || a.contains("fd::") {
                return runs(&format!("`{a}` uses a transport that runs a command"));
            }
            let output = if a == "--output"
                || (a == "-o" && matches!(sub.as_str(), "format-patch" | "archive"))
                || (a == "--output-directory" && sub == "format-patch")
            {
                j += 1;
                rest.get(j).cloned()
            } else {
                a.strip_prefix("--output=")
                    .or_else(|| a.strip_prefix("--output-directory="))
                    .map(str::to_string)
            };
            if let Some(out) = output {
                self.writable(&self.resolve(&out, &cwd), &format!("`git {sub} {a}`"))?;
            }
            j += 1;
        }
        Ok(())
    }

    fn tar(&self, cmd: &Cmd) -> Result<(), Denial> {
        let args = self.literal_args(cmd)?;
        for a in &args {
            for bad in [
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--rsh-command",
                "--info-script",
                "--new-volume-script",
                "--rmt-command",
            ] {
                if a.starts_with(bad) {
                    return deny(
                        "tar",
                        format!("`tar {bad}` runs a program named in the command"),
                    );
                }
            }
            if a.starts_with("-I")
                || a == "-F"
                || (a.starts_with('-') && !a.starts_with("--") && a.contains('F'))
            {
                return deny(
                    "tar",
                    format!("`tar {a}` runs a program named in the command"),
                );
            }
        }
        // Old-style first argument (`czf`) reads like a cluster of short options.
        let mut words: Vec<String> = args.clone();
        if let Some(first) = words.first_mut()
            && !first.starts_with('-')
            && first.chars().all(|c| c.is_ascii_alphabetic())
        {
            first.insert(0, '-');
        }
        let (mut extract, mut create, mut file, mut dir) = (false, false, None, None);
        let mut i = 0;
        while i < words.len() {
            let a = words[i].as_str();
            match a {
                "--extract" | "--get" => extract = true,
                "--create" | "--append" | "--update" | "--concatenate" | "--delete" => {
                    create = true
                }
                _ if a.starts_with("--file=") => file = Some(a["--file=".len()..].to_string()),
                _ if a.starts_with("--directory=") => {
                    dir = Some(a["--directory=".len()..].to_string())
                }
                "--file" | "--directory" => {
                    i += 1;
                    let v = words.get(i).cloned();
                    if a == "--file" { file = v } else { dir = v }
                }
                _ if a.starts_with('-') && !a.starts_with("--") => {
                    let mut takes = Vec::new();
                    for c in a[1..].chars() {
                        match c {
                            'x' => extract = true,
                            'c' | 'r' | 'u' | 'A' => create = true,
                            'f' | 'C' => takes.push(c),
                            _ => {}
                        }
                    }
                    for c in takes {
                        i += 1;
                        let v = words.get(i).cloned();
                        if c == 'f' { file = v } else { dir = v }
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let cwd = match &dir {
            Some(d) => self.resolve(d, &cmd.cwd),
            None => cmd.cwd.clone(),
        };
        if extract {
            self.writable(&cwd, "`tar` extracting")?;
        }
        if create
            && let Some(f) = &file
            && f != "-"
        {
            self.writable(&self.resolve(f, &cmd.cwd), "`tar` creating an archive")?;
        }
        Ok(())
    }

    /// Programs that write or remove the files their arguments name.
    fn writes(&self, cmd: &Cmd) -> Result<(), Denial> {
        let name = cmd.name();
        let kind = match name {
            "tee" | "rm" | "rmdir" | "unlink" | "touch" | "mkdir" | "truncate" | "shred"
            | "chmod" | "chown" | "chgrp" | "mv" | "mkfifo" | "mknod" => Writes::AllOperands,
            "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "zstd" | "unzstd" | "lz4"
            | "compress" | "uncompress" => Writes::UnlessStdout,
            "cp" | "ln" | "install" | "rsync" | "scp" => Writes::LastOperand,
            "dd" => Writes::Dd,
            "sort" | "curl" | "wget" | "patch" | "unzip" | "split" | "csplit" | "uniq"
            | "rename" => Writes::Special,
            _ => return Ok(()),
        };
        let args = self.literal_args(cmd)?;
        let what = format!("`{}`", short(&cmd.normalized()));
        let w = |p: &str| self.writable(&self.resolve(p, &cmd.cwd), &what);
        let operands: Vec<&String> = {
            let mut out = Vec::new();
            let mut only = false;
            for a in &args {
                if only || !a.starts_with('-') || a == "-" {
                    out.push(a);
                } else if a == "--" {
                    only = true;
                }
            }
            out
        };
        let long_value = |names: &[&str]| -> Vec<String> {
            let mut out = Vec::new();
            for (k, a) in args.iter().enumerate() {
                for n in names {
                    if a == n {
                        if let Some(v) = args.get(k + 1) {
                            out.push(v.clone());
                        }
                    } else if let Some(v) = a.strip_prefix(&format!("{n}=")) {
                        out.push(v.to_string());
                    } else if n.len() == 2
                        && !n.starts_with("--")
                        && a.starts_with(n)
                        && a.len() > 2
                        && !a.starts_with("--")
                    {
                        out.push(a[2..].to_string());
                    }
                }
            }
            out
        };
        match kind {
            Writes::AllOperands => operands.iter().try_for_each(|p| w(p)),
            Writes::UnlessStdout => {
                if args.iter().any(|a| {
                    matches!(
                        a.as_str(),
                        "-c" | "--stdout" | "--to-stdout" | "-l" | "--list" | "-t" | "--test"
                    )
                }) {
                    Ok(())
                } else {
                    operands.iter().try_for_each(|p| w(p))
                }
            }
            Writes::LastOperand => {
                for t in long_value(&["-t", "--target-directory"]) {
                    w(&t)?;
                }
                match operands.last() {
                    Some(last)
                        if operands.len() > 1
                            || !long_value(&["-t", "--target-directory"]).is_empty() =>
                    {
                        w(last)
                    }
                    Some(_) => w("."),
                    None => Ok(()),
                }
            }
            Writes::Dd => {
                for a in &args {
                    if let Some(f) = a.strip_prefix("of=") {
                        w(f)?;
                    }
                    if let Some(f) = a.strip_prefix("if=") {
                        self.readable(&self.resolve(f, &cmd.cwd), &what)?;
                    }
                }
                Ok(())
            }
            Writes::Special => match name {
                "sort" => long_value(&["-o", "--output"])
                    .iter()
                    .try_for_each(|p| w(p)),
                "uniq" => operands.get(1).map_or(Ok(()), |p| w(p)),
                "curl" => {
                    for p in long_value(&["-o", "--output"]) {
                        w(&p)?;
                    }
                    if args.iter().any(|a| {
                        a == "-O" || a == "--remote-name" || a == "--remote-name-all" || a == "-J"
                    }) {
                        let dirs = long_value(&["--output-dir"]);
                        w(dirs.last().map(String::as_str).unwrap_or("."))?;
                    }
                    Ok(())
                }
                "wget" => {
                    let docs = long_value(&["-O", "--output-document"]);
                    if docs.is_empty() {
                        let dirs = long_value(&["-P", "--directory-prefix"]);
                        if !args.iter().any(|a| a == "--spider") {
                            w(dirs.last().map(String::as_str).unwrap_or("."))?;
                        }
                    }
                    docs.iter().filter(|d| *d != "-").try_for_each(|p| w(p))
                }
                "unzip" => {
                    if args
                        .iter()
                        .any(|a| a == "-l" || a == "-p" || a == "-t" || a == "-v" || a == "-Z")
                    {
                        return Ok(());
                    }
                    let dirs = long_value(&["-d"]);
                    w(dirs.last().map(String::as_str).unwrap_or("."))
                }
                // patch, split, csplit and rename write files named by their input or a prefix:
                // the whole directory they work in must be writable.
                _ => {
                    for p in long_value(&["-o", "--output", "-d", "--directory"]) {
                        w(&p)?;
                    }
                    w(".")
                }
            },
        }
    }
}

enum Writes {
    AllOperands,
    UnlessStdout,
    LastOperand,
    Dd,
    Special,
}

/// Shells whose `-c` runs a script given on the command line.
const SHELLS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash",
];

/// The script of `SHELL [options] -c SCRIPT`, `None` when the shell reads a file or stdin.
fn shell_script(args: &[String]) -> Result<Option<String>, String> {
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

/// The parts of an argument that name a path outside the tree the command works in: absolute
/// paths and paths that climb out with `..`, alone or as the value of `--opt=`, `key=` or `-o`.
fn path_candidates(arg: &str) -> Vec<&str> {
    let looks = |s: &str| {
        s.starts_with('/')
            || s == ".."
            || s.starts_with("../")
            || s.contains("/../")
            || s.ends_with("/..")
    };
    let mut out = Vec::new();
    if looks(arg) {
        out.push(arg);
    }
    if let Some((_, v)) = arg.split_once('=')
        && looks(v)
    {
        out.push(v);
    }
    if arg.len() > 2 && arg.starts_with('-') && !arg.starts_with("--") && looks(&arg[2..]) {
        out.push(&arg[2..]);
    }
    out
}

/// `rel` joined to `cwd` (absolute) with `.` and `..` removed, without looking at the
/// filesystem: the host's own lexical reading, so where its resolved path differs, a symlink
/// made the difference.
fn lexical(cwd: &str, rel: &str) -> String {
    normalize(&Path::new(cwd).join(rel))
        .to_string_lossy()
        .into_owned()
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

const ENV: Spec = Spec {
    short_value: "uCS",
    short_flag: "i0v",
    long_value: &["unset", "chdir", "split-string"],
    long_flag: &[
        "ignore-environment",
        "null",
        "debug",
        "default-signal",
        "ignore-signal",
        "block-signal",
        "list-signal-handling",
    ],
    refuse: &[
        ("S", "splits a string into a new command line"),
        ("split-string", "splits a string into a new command line"),
    ],
    ..opts::EMPTY
};

const TIMEOUT: Spec = Spec {
    short_value: "sk",
    short_flag: "v",
    long_value: &["signal", "kill-after"],
    long_flag: &["preserve-status", "foreground", "verbose"],
    ..opts::EMPTY
};

const NICE: Spec = Spec {
    short_value: "n",
    short_flag: "",
    long_value: &["adjustment"],
    long_flag: &[],
    numeric: true,
    ..opts::EMPTY
};

const STDBUF: Spec = Spec {
    short_value: "ioe",
    short_flag: "",
    long_value: &["input", "output", "error"],
    long_flag: &[],
    ..opts::EMPTY
};

const EXEC: Spec = Spec {
    short_value: "a",
    short_flag: "cl",
    long_value: &[],
    long_flag: &[],
    ..opts::EMPTY
};

const COMMAND: Spec = Spec {
    short_value: "",
    short_flag: "pvV",
    long_value: &[],
    long_flag: &[],
    ..opts::EMPTY
};

const XARGS: Spec = Spec {
    short_value: "aEdILnPs",
    short_flag: "0prtxeil",
    long_value: &[
        "arg-file",
        "delimiter",
        "eof",
        "replace",
        "max-lines",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ],
    long_flag: &[
        "null",
        "interactive",
        "no-run-if-empty",
        "verbose",
        "exit",
        "show-limits",
        "open-tty",
    ],
    ..opts::EMPTY
};

const WATCH: Spec = Spec {
    short_value: "nq",
    short_flag: "bcCdegtwxpr",
    long_value: &["interval", "equexit"],
    long_flag: &[
        "beep",
        "color",
        "no-color",
        "differences",
        "chgexit",
        "errexit",
        "no-title",
        "no-wrap",
        "exec",
        "precise",
        "no-rerun",
    ],
    ..opts::EMPTY
};

const SCRIPT: Spec = Spec {
    short_value: "cEIOBTm",
    short_flag: "aefqt",
    long_value: &[
        "command",
        "echo",
        "log-in",
        "log-out",
        "log-io",
        "log-timing",
        "logging-format",
    ],
    long_flag: &["append", "return", "flush", "force", "quiet", "timing"],
    permute: true,
    ..opts::EMPTY
};

const SUDO: Spec = Spec {
    short_value: "ugpCDhrtTUR",
    short_flag: "AbEHnPSkKlv",
    long_value: &[
        "user",
        "group",
        "prompt",
        "close-from",
        "chdir",
        "host",
        "role",
        "type",
        "command-timeout",
        "other-user",
        "chroot",
    ],
    long_flag: &[
        "askpass",
        "background",
        "preserve-env",
        "set-home",
        "non-interactive",
        "preserve-groups",
        "stdin",
        "reset-timestamp",
        "remove-timestamp",
        "list",
        "validate",
    ],
    refuse: &[
        (
            "i",
            "runs the command through a login shell, which re-reads it",
        ),
        ("s", "runs the command through a shell, which re-reads it"),
        ("e", "edits files as another user"),
        (
            "login",
            "runs the command through a login shell, which re-reads it",
        ),
        (
            "shell",
            "runs the command through a shell, which re-reads it",
        ),
        ("edit", "edits files as another user"),
    ],
    ..opts::EMPTY
};

const DOAS: Spec = Spec {
    short_value: "uC",
    short_flag: "Ln",
    long_value: &[],
    long_flag: &[],
    refuse: &[("s", "starts a shell")],
    ..opts::EMPTY
};

const SU: Spec = Spec {
    short_value: "cgGsw",
    short_flag: "lmpfP",
    long_value: &[
        "command",
        "group",
        "supp-group",
        "shell",
        "whitelist-environment",
        "session-command",
    ],
    long_flag: &["login", "preserve-environment", "pty"],
    permute: true,
    ..opts::EMPTY
};

/// git's built-in commands; anything else is an alias or an external program.
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "citool",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-store",
    "daemon",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "fetch",
    "fetch-pack",
    "filter-branch",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "grep",
    "hash-object",
    "help",
    "index-pack",
    "init",
    "instaweb",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "pack-objects",
    "pack-refs",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "remote",
    "remote-ext",
    "remote-fd",
    "repack",
    "replace",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-email",
    "shell",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "web--browse",
    "whatchanged",
    "worktree",
    "write-tree",
    "archimport",
    "cvsimport",
    "cvsserver",
    "p4",
    "svn",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_scripts_are_found_after_options() {
        let v = |s: &str| s.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(shell_script(&v("-c ls")).unwrap().as_deref(), Some("ls"));
        assert_eq!(shell_script(&v("-lc ls x")).unwrap().as_deref(), Some("ls"));
        assert_eq!(
            shell_script(&v("-e -o pipefail -c ls")).unwrap().as_deref(),
            Some("ls")
        );
        assert_eq!(shell_script(&v("script.sh")).unwrap(), None);
        assert!(shell_script(&v("-s")).is_err());
        assert!(shell_script(&v("--rcfile x -c ls")).is_err());
    }

    #[test]
    fn lexical_paths_ignore_the_filesystem() {
        assert_eq!(lexical("/ws/src", "../a/./b"), "/ws/a/b");
        assert_eq!(lexical("/ws", "x/"), "/ws/x");
        assert_eq!(lexical("/", ".."), "/");
    }

    #[test]
    fn path_candidates_find_escapes() {
        assert_eq!(path_candidates("/etc/passwd"), ["/etc/passwd"]);
        assert_eq!(path_candidates("--file=/etc/x"), ["/etc/x"]);
        assert_eq!(path_candidates("if=../x"), ["../x"]);
        assert_eq!(path_candidates("-o/tmp/x"), ["/tmp/x"]);
        assert!(path_candidates("src/main.rs").is_empty());
        assert!(path_candidates("a && b").is_empty());
    }
}
