//! The `shell` capability: what a bash filter's `shell` import answers, from rawko's own parser
//! and resolver, so a filter judges with the same reading of a command that the executor will
//! run. Also the conversions of parsed commands into the WIT's types.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use wasmtime::component::{HasData, Linker};

use crate::bindings::shell as ws;
use rawko_shell::{Context, ParsedCommand, Policy, RedirectKind, Resolver, Word};

/// What the `shell` import answers from: the resolver and policy of the command being judged.
#[derive(Debug)]
pub struct ShellContext {
    pub resolver: Resolver,
    pub policy: Policy,
}

impl ShellContext {
    /// `cwd` as given by a filter: absolute, or taken relative to the workspace.
    fn cwd(&self, cwd: &str) -> PathBuf {
        rawko_shell::resolve::normalize(&self.policy.workspace.join(cwd))
    }
}

/// One call's `shell` context: the command being judged, or nothing for a plugin that is not
/// judging one (every question is then answered as if nothing resolved).
#[derive(Debug, Default)]
pub struct ShellCtx {
    cx: Option<Arc<ShellContext>>,
}

impl ShellCtx {
    pub fn new(cx: Arc<ShellContext>) -> Self {
        ShellCtx { cx: Some(cx) }
    }
}

/// The `shell` capability, for [`HasData`]: its host functions see a call's [`ShellCtx`].
pub struct Shell;

impl HasData for Shell {
    type Data<'a> = &'a mut ShellCtx;
}

/// Link the `shell` import, answering from the [`ShellCtx`] `get` projects from the store's
/// data.
pub fn add_to_linker<T: 'static>(
    linker: &mut Linker<T>,
    get: fn(&mut T) -> &mut ShellCtx,
) -> wasmtime::Result<()> {
    ws::add_to_linker::<T, Shell>(linker, get)
}

impl ws::Host for ShellCtx {
    fn parse(&mut self, script: String, cwd: String) -> Result<ws::Command, String> {
        let Some(cx) = self.cx.clone() else {
            return Err("the host has no command context for this call".into());
        };
        let opts = rawko_shell::ParseOptions {
            resolver: &cx.resolver,
            workspace: &cx.policy.workspace,
            expand_globs: false,
        };
        rawko_shell::parse(&script, &cx.cwd(&cwd), &opts)
            .map(|p| command_to_wit(&p))
            .map_err(|e| e.to_string())
    }

    fn resolve_program(&mut self, program: String, cwd: String) -> ws::Program {
        match self.cx.clone() {
            Some(cx) => program_to_wit(&cx.resolver.program(&program, &cx.cwd(&cwd))),
            None => ws::Program {
                name: program,
                path: None,
            },
        }
    }

    fn resolve_path(&mut self, path: String, cwd: String) -> String {
        match self.cx.clone() {
            Some(cx) => path_str(&cx.resolver.path(&path, &cx.cwd(&cwd))),
            None => path,
        }
    }

    fn blocked_pattern(&mut self, text: String) -> Option<String> {
        let cx = self.cx.as_ref()?;
        cx.policy.blocked_by(&text).map(str::to_string)
    }
}

/// A path as the WIT carries it.
pub fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn word_to_wit(w: &Word) -> ws::Word {
    match w {
        Word::Literal(s) => ws::Word::Literal(s.clone()),
        Word::Dynamic(s) => ws::Word::Dynamic(s.clone()),
    }
}

/// A parsed command as the WIT describes it.
pub fn command_to_wit(c: &ParsedCommand) -> ws::Command {
    ws::Command {
        raw: c.raw.clone(),
        commands: c
            .commands
            .iter()
            .map(|sc| ws::SimpleCommand {
                argv: sc.argv.iter().map(word_to_wit).collect(),
                program: program_to_wit(&sc.program),
                assignments: sc.assignments.iter().map(word_to_wit).collect(),
                redirects: sc
                    .redirects
                    .iter()
                    .map(|r| ws::Redirect {
                        kind: match r.kind {
                            RedirectKind::Read => ws::RedirectKind::Read,
                            RedirectKind::Write => ws::RedirectKind::Write,
                            RedirectKind::Append => ws::RedirectKind::Append,
                            RedirectKind::ReadWrite => ws::RedirectKind::ReadWrite,
                            RedirectKind::Duplicate => ws::RedirectKind::Duplicate,
                            RedirectKind::HereString => ws::RedirectKind::HereString,
                            RedirectKind::HereDoc => ws::RedirectKind::HereDoc,
                        },
                        fd: r.fd,
                        target: word_to_wit(&r.target),
                        path: r.path.as_deref().map(path_str),
                    })
                    .collect(),
                cwd: path_str(&sc.cwd),
                nesting: sc
                    .nesting
                    .iter()
                    .map(|n| match n {
                        Context::Pipeline => ws::Context::Pipeline,
                        Context::Subshell => ws::Context::Subshell,
                        Context::BraceGroup => ws::Context::BraceGroup,
                        Context::CommandSubstitution => ws::Context::CommandSubstitution,
                        Context::ProcessSubstitution => ws::Context::ProcessSubstitution,
                        Context::Background => ws::Context::Background,
                        Context::Condition => ws::Context::Condition,
                        Context::CompoundBody => ws::Context::CompoundBody,
                        Context::FunctionBody => ws::Context::FunctionBody,
                        Context::HereDocument => ws::Context::HereDocument,
                        Context::Coprocess => ws::Context::Coprocess,
                    })
                    .collect(),
                text: sc.text.clone(),
            })
            .collect(),
        unsupported: c.unsupported.clone(),
    }
}

fn program_to_wit(p: &rawko_shell::Program) -> ws::Program {
    ws::Program {
        name: p.name.clone(),
        path: p.path.as_deref().map(path_str),
    }
}
