//! From command text to [`ParsedCommand`], with brush-parser doing the reading.
//!
//! The walk visits every simple command wherever it is (lists, pipelines, compound commands,
//! function bodies, command and process substitutions, here-documents), removes quotes,
//! expands globs inside the workspace, resolves each program, and tracks `cd` so that every
//! command knows the directory it runs in. What no policy can judge is collected in
//! `unsupported`; what rawko's executor does not run is noted on the command or the stage.

use std::path::{Path, PathBuf};

use brush_parser::ast;
use brush_parser::word::{Parameter, ParameterExpr, WordPiece, WordPieceWithSource};

use super::glob::{self, GlobError, QChar};
use super::model::*;
use super::resolve::Resolver;

mod limits;
mod panics;
mod shells;
#[cfg(test)]
mod tests;

pub use limits::MAX_HERE_SUBSTITUTIONS;
use limits::{
    check_here_documents, expansion_depth, here_body_too_complex, nesting_depth, paren_depth,
};
pub use panics::CaughtPanic;
pub use shells::hands_text_to_a_shell;

/// Longest command line accepted.
pub const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// Deepest nesting of groups, substitutions and compound commands accepted. The parser
/// recurses per level; this keeps it far from the end of the stack.
pub const MAX_NESTING: usize = 32;
/// Most `(` open at once (besides `$(`). The parser's time grows exponentially with unclosed
/// `(` (each may start a subshell or arithmetic, and it tries both): `cat <((((...` with 22 of them took
/// seconds, 30 would take hours. No real command nests that deep.
pub const MAX_PAREN_DEPTH: usize = 10;
/// Most parameter expansions inside one another (`${a[${b[${c}]}]}` is three). The word
/// parser's time grows about seventeen-fold with each level (five took seconds).
pub const MAX_EXPANSION_DEPTH: usize = 3;

/// Why a command line could not be parsed at all.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ParseError {
    #[error("the command is {0} bytes long; at most {MAX_COMMAND_BYTES} are accepted")]
    TooLong(usize),
    #[error("the command nests more than {MAX_NESTING} levels deep")]
    TooDeep,
    #[error("the command has more than {MAX_PAREN_DEPTH} parentheses open at once")]
    TooManyParens,
    #[error("the command has a control character ({0:?}) other than tab and newline")]
    ControlCharacter(char),
    #[error("a here-document (`<<`) has an empty delimiter")]
    EmptyHereDelimiter,
    #[error("a here-document (`<<{0}`) has no line that ends it")]
    UnterminatedHereDocument(String),
    #[error("the command nests parameter expansions more than {MAX_EXPANSION_DEPTH} deep")]
    TooManyExpansions,
    #[error("the command is empty")]
    Empty,
    #[error("not valid shell syntax: {0}")]
    Syntax(String),
    #[error(
        "`{0}>`: a file-descriptor number larger than {max} is refused (the shell parser cannot read it, and no shell has that many files open)",
        max = i32::MAX
    )]
    FdNumberTooLarge(String),
    #[error(
        "`~{0}`: a directory-stack index larger than {max} is refused (the shell parser cannot read it); quote the word (`'~…'`) if it is meant as text",
        max = usize::MAX
    )]
    DirStackIndexTooLarge(String),
    #[error(
        "the shell parser failed on this command (an internal error in it, {0}), so it is refused; write the command more plainly"
    )]
    ParserFailed(CaughtPanic),
    #[error(
        "the command is too complex to judge: the shell parser did not finish within {} s",
        .0.as_secs_f32()
    )]
    TooComplex(std::time::Duration),
    #[error("too many earlier commands are still being parsed; this one is refused")]
    ParserBusy,
}

pub use crate::budget::PARSE_BUDGET;

/// What a parse needs to know about where the command will run.
#[derive(Debug, Clone, Copy)]
pub struct ParseOptions<'a> {
    pub resolver: &'a Resolver,
    /// Globs are expanded only inside it.
    pub workspace: &'a Path,
    /// Expand globs (for a command rawko runs itself), or leave them dynamic (for the script of
    /// a nested shell, which expands them itself).
    pub expand_globs: bool,
}

/// The parser's settings: what `bash -c` starts with (no extglob, bash rather than POSIX
/// syntax), for tools that parse as rawko does.
pub fn parser_options() -> brush_parser::ParserOptions {
    brush_parser::ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion_at_word_start: true,
        tilde_expansion_after_colon: false,
        parser_impl: brush_parser::ParserImpl::Peg,
    }
}

/// Parse `raw` as a shell started in `cwd` would.
pub fn parse(raw: &str, cwd: &Path, opts: &ParseOptions<'_>) -> Result<ParsedCommand, ParseError> {
    if raw.len() > MAX_COMMAND_BYTES {
        return Err(ParseError::TooLong(raw.len()));
    }
    if nesting_depth(raw) > MAX_NESTING {
        return Err(ParseError::TooDeep);
    }
    if paren_depth(raw) > MAX_PAREN_DEPTH {
        return Err(ParseError::TooManyParens);
    }
    if expansion_depth(raw) > MAX_EXPANSION_DEPTH {
        return Err(ParseError::TooManyExpansions);
    }
    if let Some(c) = raw
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
    {
        return Err(ParseError::ControlCharacter(c));
    }
    // brush-parser 0.4's tokenizer loops for ever on some malformed here-documents (`a <<'' x`,
    // `$(c<$<< l x`), allocating until the process dies; only well-formed ones reach it.
    check_here_documents(raw)?;
    panics::check_numbers(raw)?;
    // Words, quotes, pipes, lists and redirections parse in linear time; the parser's
    // backtracking (the stalls the fuzzers found) comes with parentheses, `$` expansions,
    // backquotes and here-documents. Those parses run under a time budget, on owned copies of
    // what they read; the others here, without the thread hop.
    if !raw.contains(['$', '`', '(']) && !raw.contains("<<") {
        return parse_now(raw, cwd, opts);
    }
    let (raw, cwd) = (raw.to_string(), cwd.to_path_buf());
    let (resolver, workspace, expand_globs) = (
        opts.resolver.clone(),
        opts.workspace.to_path_buf(),
        opts.expand_globs,
    );
    let parsed = crate::budget::run(PARSE_BUDGET, move || {
        let opts = ParseOptions {
            resolver: &resolver,
            workspace: &workspace,
            expand_globs,
        };
        parse_now(&raw, &cwd, &opts)
    });
    match parsed {
        Ok(r) => r,
        Err(crate::budget::Overrun::TooSlow) => Err(ParseError::TooComplex(PARSE_BUDGET)),
        Err(crate::budget::Overrun::Exhausted) => Err(ParseError::ParserBusy),
    }
}

/// The parse proper, once the checks in front of the parser have passed.
fn parse_now(raw: &str, cwd: &Path, opts: &ParseOptions<'_>) -> Result<ParsedCommand, ParseError> {
    let mut w = Walker {
        opts,
        commands: Vec::new(),
        unsupported: Vec::new(),
        depth: 0,
    };
    let mut cwd = cwd.to_path_buf();
    // A command a model sends must never take rawko down: what brush-parser is known to panic
    // on was refused above, and a panic no check foresaw is a refusal like any syntax error,
    // kept off the terminal.
    let script = panics::catch_quietly(|| w.source(raw, &mut cwd, &[]))
        .map_err(ParseError::ParserFailed)?
        .map_err(ParseError::Syntax)?;
    if w.commands.is_empty() && w.unsupported.is_empty() {
        return Err(ParseError::Empty);
    }
    Ok(ParsedCommand {
        raw: raw.to_string(),
        commands: w.commands,
        unsupported: w.unsupported,
        script,
    })
}

/// How a word is used, which decides what expansions apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// A command's word: globs expand to any number of words.
    Argument,
    /// A redirection target: one word; a glob there is not supported.
    Target,
    /// An assignment value or here-string: one word, no globbing.
    Single,
}

/// A word after expansion, and why the executor could not run it, if it could not.
struct Expanded {
    words: Vec<Word>,
    blocker: Option<String>,
}

struct Walker<'o, 'a> {
    opts: &'o ParseOptions<'a>,
    commands: Vec<SimpleCommand>,
    unsupported: Vec<String>,
    depth: usize,
}

fn with(nesting: &[Context], c: Context) -> Vec<Context> {
    let mut v = nesting.to_vec();
    v.push(c);
    v
}

impl Walker<'_, '_> {
    fn source(
        &mut self,
        src: &str,
        cwd: &mut PathBuf,
        nesting: &[Context],
    ) -> Result<Script, String> {
        let mut parser =
            brush_parser::Parser::new(std::io::Cursor::new(src.as_bytes()), &parser_options());
        let program = parser.parse_program().map_err(|e| e.to_string())?;
        let mut items = Vec::new();
        for list in &program.complete_commands {
            items.extend(self.list(src, list, cwd, nesting).0);
        }
        Ok(Script(items))
    }

    /// Parse and walk text found inside the command (a substitution), noting failures.
    fn nested(&mut self, text: &str, cwd: &Path, nesting: &[Context]) {
        if self.depth >= MAX_NESTING {
            self.unsupported
                .push(format!("substitutions nested more than {MAX_NESTING} deep"));
            return;
        }
        self.depth += 1;
        let mut cwd = cwd.to_path_buf();
        if let Err(e) = self.source(text, &mut cwd, nesting) {
            self.unsupported
                .push(format!("cannot parse the substitution `{text}`: {e}"));
        }
        self.depth -= 1;
    }

    fn list(
        &mut self,
        src: &str,
        list: &ast::CompoundList,
        cwd: &mut PathBuf,
        nesting: &[Context],
    ) -> Script {
        let mut items = Vec::new();
        for ast::CompoundListItem(ao, sep) in &list.0 {
            let background = matches!(sep, ast::SeparatorOperator::Async);
            let nest = if background {
                with(nesting, Context::Background)
            } else {
                nesting.to_vec()
            };
            // A background job runs in a subshell: its `cd` does not carry over.
            let mut own_cwd;
            let cwd_for: &mut PathBuf = if background {
                own_cwd = cwd.clone();
                &mut own_cwd
            } else {
                cwd
            };
            let first = self.pipeline(src, &ao.first, cwd_for, &nest, !background);
            let rest = ao
                .additional
                .iter()
                .map(|x| match x {
                    ast::AndOr::And(p) => (
                        Connector::And,
                        self.pipeline(src, p, cwd_for, &nest, !background),
                    ),
                    ast::AndOr::Or(p) => (
                        Connector::Or,
                        self.pipeline(src, p, cwd_for, &nest, !background),
                    ),
                })
                .collect();
            items.push(ListItem {
                first,
                rest,
                background,
            });
        }
        Script(items)
    }

    fn pipeline(
        &mut self,
        src: &str,
        p: &ast::Pipeline,
        cwd: &mut PathBuf,
        nesting: &[Context],
        list_level: bool,
    ) -> Pipeline {
        let multi = p.seq.len() > 1;
        let nest = if multi {
            with(nesting, Context::Pipeline)
        } else {
            nesting.to_vec()
        };
        let stages = p
            .seq
            .iter()
            .map(|c| {
                if multi {
                    // Each stage of a pipeline runs in a subshell of its own.
                    let mut own = cwd.clone();
                    self.command(src, c, &mut own, &nest, false)
                } else {
                    self.command(src, c, cwd, &nest, list_level && !p.bang)
                }
            })
            .collect();
        Pipeline {
            negated: p.bang,
            timed: p.timed.is_some(),
            stages,
        }
    }

    fn command(
        &mut self,
        src: &str,
        c: &ast::Command,
        cwd: &mut PathBuf,
        nesting: &[Context],
        list_level: bool,
    ) -> Stage {
        match c {
            ast::Command::Simple(sc) => {
                Stage::Command(self.simple(src, sc, cwd, nesting, list_level))
            }
            ast::Command::Compound(cc, redirects) => {
                let first = self.commands.len();
                let stage = self.compound(src, cc, cwd, nesting, redirects.is_some());
                if let Some(r) = redirects {
                    self.redirect_all(r, first, cwd, nesting);
                }
                stage
            }
            ast::Command::Function(f) => {
                self.unsupported.push(format!(
                    "a function definition (`{}`): calling it would not run the program of that name",
                    f.fname.value
                ));
                let first = self.commands.len();
                let nest = with(nesting, Context::FunctionBody);
                let mut own = cwd.clone();
                self.compound(src, &f.body.0, &mut own, &nest, false);
                if let Some(r) = &f.body.1 {
                    self.redirect_all(r, first, cwd, nesting);
                }
                Stage::Other("a function definition".into())
            }
            ast::Command::ExtendedTest(e, redirects) => {
                self.unsupported.push(
                    "a `[[ ... ]]` test: its operands are evaluated as arithmetic, which can run commands"
                        .into(),
                );
                let first = self.commands.len();
                self.extended_test(&e.expr, cwd, nesting);
                if let Some(r) = redirects {
                    self.redirect_all(r, first, cwd, nesting);
                }
                Stage::Other("a `[[ ... ]]` test".into())
            }
        }
    }

    /// Redirections on a compound command apply to every command inside it; filters see them
    /// there. The executor does not run redirected compound commands.
    fn redirect_all(
        &mut self,
        r: &ast::RedirectList,
        first: usize,
        cwd: &Path,
        nesting: &[Context],
    ) {
        let parsed: Vec<(Redirect, Option<String>)> =
            r.0.iter().map(|r| self.redirect(r, cwd, nesting)).collect();
        for cmd in &mut self.commands[first..] {
            for (red, _) in &parsed {
                cmd.redirects.push(red.clone());
            }
            cmd.not_runnable
                .push("redirections on a compound command are not supported".into());
        }
    }

    fn compound(
        &mut self,
        src: &str,
        cc: &ast::CompoundCommand,
        cwd: &mut PathBuf,
        nesting: &[Context],
        redirected: bool,
    ) -> Stage {
        use ast::CompoundCommand as C;
        match cc {
            C::BraceGroup(g) => {
                let script = self.list(src, &g.list, cwd, &with(nesting, Context::BraceGroup));
                Stage::Group { script, redirected }
            }
            C::Subshell(s) => {
                let mut own = cwd.clone();
                let script = self.list(src, &s.list, &mut own, &with(nesting, Context::Subshell));
                Stage::Subshell { script, redirected }
            }
            C::ForClause(f) => {
                for v in f.values.iter().flatten() {
                    self.word(&v.value, cwd, nesting, Mode::Argument);
                }
                self.body(src, &f.body.list, cwd, nesting, Context::CompoundBody);
                Stage::Other("a `for` loop".into())
            }
            C::ArithmeticForClause(f) => {
                self.unsupported
                    .push("an arithmetic `for ((...))` loop: arithmetic can run commands".into());
                self.body(src, &f.body.list, cwd, nesting, Context::CompoundBody);
                Stage::Other("an arithmetic `for` loop".into())
            }
            C::CaseClause(c) => {
                self.word(&c.value.value, cwd, nesting, Mode::Single);
                for item in &c.cases {
                    for p in &item.patterns {
                        self.word(&p.value, cwd, nesting, Mode::Single);
                    }
                    if let Some(body) = &item.cmd {
                        self.body(src, body, cwd, nesting, Context::CompoundBody);
                    }
                }
                Stage::Other("a `case` statement".into())
            }
            C::IfClause(i) => {
                self.body(src, &i.condition, cwd, nesting, Context::Condition);
                self.body(src, &i.then, cwd, nesting, Context::CompoundBody);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.body(src, c, cwd, nesting, Context::Condition);
                    }
                    self.body(src, &e.body, cwd, nesting, Context::CompoundBody);
                }
                Stage::Other("an `if` statement".into())
            }
            C::WhileClause(w) | C::UntilClause(w) => {
                self.body(src, &w.0, cwd, nesting, Context::Condition);
                self.body(src, &w.1.list, cwd, nesting, Context::CompoundBody);
                Stage::Other("a `while` or `until` loop".into())
            }
            C::Arithmetic(_) => {
                self.unsupported
                    .push("an arithmetic command `((...))`: arithmetic can run commands".into());
                Stage::Other("an arithmetic command".into())
            }
            C::Coprocess(c) => {
                let mut own = cwd.clone();
                self.command(
                    src,
                    &c.body,
                    &mut own,
                    &with(nesting, Context::Coprocess),
                    false,
                );
                Stage::Other("a coprocess".into())
            }
        }
    }

    /// Walk part of a compound command the executor does not run; a `cd` in it does not move
    /// what follows.
    fn body(
        &mut self,
        src: &str,
        list: &ast::CompoundList,
        cwd: &Path,
        nesting: &[Context],
        context: Context,
    ) {
        let mut own = cwd.to_path_buf();
        self.list(src, list, &mut own, &with(nesting, context));
    }

    fn extended_test(&mut self, e: &ast::ExtendedTestExpr, cwd: &Path, nesting: &[Context]) {
        use ast::ExtendedTestExpr as E;
        match e {
            E::And(a, b) | E::Or(a, b) => {
                self.extended_test(a, cwd, nesting);
                self.extended_test(b, cwd, nesting);
            }
            E::Not(a) | E::Parenthesized(a) => self.extended_test(a, cwd, nesting),
            E::UnaryTest(_, w) => {
                self.word(&w.value, cwd, nesting, Mode::Single);
            }
            E::BinaryTest(_, a, b) => {
                self.word(&a.value, cwd, nesting, Mode::Single);
                self.word(&b.value, cwd, nesting, Mode::Single);
            }
        }
    }

    fn simple(
        &mut self,
        src: &str,
        sc: &ast::SimpleCommand,
        cwd: &mut PathBuf,
        nesting: &[Context],
        list_level: bool,
    ) -> usize {
        // Reserve the index first, so the list is in source order: this command, then what is
        // nested in its words.
        let index = self.commands.len();
        self.commands.push(SimpleCommand {
            argv: Vec::new(),
            program: Program {
                name: String::new(),
                path: None,
            },
            assignments: Vec::new(),
            redirects: Vec::new(),
            cwd: cwd.clone(),
            nesting: nesting.to_vec(),
            text: String::new(),
            not_runnable: Vec::new(),
        });
        let mut argv: Vec<Word> = Vec::new();
        let mut assignments: Vec<Word> = Vec::new();
        let mut redirects: Vec<Redirect> = Vec::new();
        let mut blockers: Vec<String> = Vec::new();
        let mut span: Option<(usize, usize)> = None;
        let mut note_span = |w: &ast::Word| {
            if let Some(loc) = &w.loc {
                let (s, e) = (loc.start.index, loc.end.index);
                span = Some(match span {
                    None => (s, e),
                    Some((a, b)) => (a.min(s), b.max(e)),
                });
            }
        };
        for item in sc.prefix.iter().flat_map(|p| p.0.iter()) {
            match item {
                ast::CommandPrefixOrSuffixItem::AssignmentWord(a, w) => {
                    note_span(w);
                    let (word, blocker) = self.assignment(a, &w.value, cwd, nesting);
                    assignments.push(word);
                    blockers.extend(blocker);
                }
                other => self.item(
                    other,
                    cwd,
                    nesting,
                    &mut argv,
                    &mut redirects,
                    &mut blockers,
                    &mut note_span,
                ),
            }
        }
        if let Some(w) = &sc.word_or_name {
            note_span(w);
            let e = self.word(&w.value, cwd, nesting, Mode::Argument);
            blockers.extend(e.blocker);
            argv.extend(e.words);
        }
        for item in sc.suffix.iter().flat_map(|s| s.0.iter()) {
            self.item(
                item,
                cwd,
                nesting,
                &mut argv,
                &mut redirects,
                &mut blockers,
                &mut note_span,
            );
        }

        // The parser counts characters, not bytes.
        let byte = |chars: usize| {
            src.char_indices()
                .map(|(at, _)| at)
                .chain(std::iter::once(src.len()))
                .nth(chars)
        };
        let text = span
            .and_then(|(s, e)| src.get(byte(s)?..byte(e)?))
            .map(str::to_string)
            .unwrap_or_else(|| {
                assignments
                    .iter()
                    .chain(&argv)
                    .map(Word::text)
                    .collect::<Vec<_>>()
                    .join(" ")
            });

        if argv.is_empty() && !assignments.is_empty() {
            self.unsupported.push(format!(
                "a variable assignment without a command (`{text}`): it changes what later words expand to"
            ));
        }
        let program = match argv.first() {
            Some(Word::Literal(name)) => self.opts.resolver.program(name, cwd),
            Some(Word::Dynamic(text)) => {
                self.unsupported.push(format!(
                    "an expansion in command position (`{text}`): the program is only known when it runs"
                ));
                Program {
                    name: text.clone(),
                    path: None,
                }
            }
            None => Program {
                name: String::new(),
                path: None,
            },
        };
        if program.name == "eval" && program.path.is_none() {
            self.unsupported.push(format!(
                "`eval` runs its arguments as a new command line (`{text}`)"
            ));
        }
        if !argv.is_empty() && program.path.is_none() && program.name != "cd" {
            blockers.push(format!(
                "`{}` is not a program on PATH (shell builtins other than `cd` are not available)",
                argv[0].text()
            ));
        }
        if argv.is_empty() && !redirects.is_empty() {
            blockers.push("a redirection without a command is not supported".into());
        }
        blockers.extend(hands_text_to_a_shell(&argv, &program));
        if program.name == "cd" {
            match (list_level, argv.as_slice()) {
                (true, [_, Word::Literal(dir)]) if !dir.starts_with('-') => {
                    let target = self.opts.resolver.path(dir, cwd);
                    *cwd = target;
                }
                _ => blockers.push(
                    "`cd` is supported only as a command of its own in a list, with one directory"
                        .into(),
                ),
            }
        }

        let cmd = &mut self.commands[index];
        cmd.argv = argv;
        cmd.program = program;
        cmd.assignments = assignments;
        cmd.redirects = redirects;
        cmd.text = text;
        cmd.not_runnable = blockers;
        index
    }

    #[allow(clippy::too_many_arguments)]
    fn item(
        &mut self,
        item: &ast::CommandPrefixOrSuffixItem,
        cwd: &Path,
        nesting: &[Context],
        argv: &mut Vec<Word>,
        redirects: &mut Vec<Redirect>,
        blockers: &mut Vec<String>,
        note_span: &mut impl FnMut(&ast::Word),
    ) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(r) => {
                if let ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Filename(w))
                | ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Duplicate(w))
                | ast::IoRedirect::HereString(_, w)
                | ast::IoRedirect::OutputAndError(w, _) = r
                {
                    note_span(w);
                }
                let (red, blocker) = self.redirect(r, cwd, nesting);
                redirects.push(red);
                blockers.extend(blocker);
            }
            // A word that looks like an assignment after the program is just an argument.
            ast::CommandPrefixOrSuffixItem::Word(w)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, w) => {
                note_span(w);
                let e = self.word(&w.value, cwd, nesting, Mode::Argument);
                blockers.extend(e.blocker);
                argv.extend(e.words);
            }
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, sub) => {
                self.body("", &sub.list, cwd, nesting, Context::ProcessSubstitution);
                let op = match kind {
                    ast::ProcessSubstitutionKind::Read => "<",
                    ast::ProcessSubstitutionKind::Write => ">",
                };
                argv.push(Word::Dynamic(format!("{op}(...)")));
                blockers.push("process substitution is not supported".into());
            }
        }
    }

    fn assignment(
        &mut self,
        a: &ast::Assignment,
        raw: &str,
        cwd: &Path,
        nesting: &[Context],
    ) -> (Word, Option<String>) {
        let name = match &a.name {
            ast::AssignmentName::VariableName(n) => n.clone(),
            ast::AssignmentName::ArrayElementName(_, _) => {
                self.unsupported.push(format!(
                    "an array element assignment (`{raw}`): its subscript is arithmetic, which can run commands"
                ));
                return (
                    Word::Dynamic(raw.into()),
                    Some("array assignments are not supported".into()),
                );
            }
        };
        match &a.value {
            ast::AssignmentValue::Scalar(w) => {
                let e = self.word(&w.value, cwd, nesting, Mode::Single);
                match e.words.as_slice() {
                    [Word::Literal(v)] if e.blocker.is_none() && !a.append => {
                        (Word::Literal(format!("{name}={v}")), None)
                    }
                    _ => (
                        Word::Dynamic(raw.into()),
                        Some(
                            e.blocker
                                .unwrap_or_else(|| "`+=` assignments are not supported".into()),
                        ),
                    ),
                }
            }
            ast::AssignmentValue::Array(items) => {
                for (k, v) in items {
                    if let Some(k) = k {
                        self.word(&k.value, cwd, nesting, Mode::Single);
                    }
                    self.word(&v.value, cwd, nesting, Mode::Single);
                }
                (
                    Word::Dynamic(raw.into()),
                    Some("array assignments are not supported".into()),
                )
            }
        }
    }

    fn redirect(
        &mut self,
        r: &ast::IoRedirect,
        cwd: &Path,
        nesting: &[Context],
    ) -> (Redirect, Option<String>) {
        use ast::IoFileRedirectKind as K;
        let fd_of = |fd: &Option<i32>| fd.and_then(|f| u32::try_from(f).ok());
        let file =
            |s: &mut Self, kind: RedirectKind, fd: Option<u32>, w: &ast::Word, both: bool| {
                let e = s.word(&w.value, cwd, nesting, Mode::Target);
                let target = e
                    .words
                    .into_iter()
                    .next()
                    .unwrap_or(Word::Literal(String::new()));
                let path = target.literal().map(|t| s.opts.resolver.path(t, cwd));
                (
                    Redirect {
                        kind,
                        fd,
                        target,
                        path,
                        both,
                    },
                    e.blocker,
                )
            };
        match r {
            ast::IoRedirect::File(fd, kind, target) => {
                let fd = fd_of(fd);
                match target {
                    ast::IoFileRedirectTarget::Filename(w) => {
                        let k = match kind {
                            K::Read | K::DuplicateInput => RedirectKind::Read,
                            K::Write | K::Clobber | K::DuplicateOutput => RedirectKind::Write,
                            K::Append => RedirectKind::Append,
                            K::ReadAndWrite => RedirectKind::ReadWrite,
                        };
                        file(self, k, fd, w, false)
                    }
                    ast::IoFileRedirectTarget::Fd(n) => (
                        Redirect {
                            kind: RedirectKind::Duplicate,
                            fd,
                            target: Word::Literal(n.to_string()),
                            path: None,
                            both: false,
                        },
                        None,
                    ),
                    ast::IoFileRedirectTarget::Duplicate(w) => {
                        let e = self.word(&w.value, cwd, nesting, Mode::Target);
                        let target = e
                            .words
                            .into_iter()
                            .next()
                            .unwrap_or(Word::Literal(String::new()));
                        match target.literal() {
                            Some(t) if t == "-" || t.chars().all(|c| c.is_ascii_digit()) => (
                                Redirect {
                                    kind: RedirectKind::Duplicate,
                                    fd,
                                    target,
                                    path: None,
                                    both: false,
                                },
                                e.blocker,
                            ),
                            // `>&file` (no descriptor) is `&>file`: stdout and stderr to a file.
                            Some(t) if fd.is_none() && matches!(kind, K::DuplicateOutput) => {
                                let path = Some(self.opts.resolver.path(t, cwd));
                                (
                                    Redirect {
                                        kind: RedirectKind::Write,
                                        fd: None,
                                        target,
                                        path,
                                        both: true,
                                    },
                                    e.blocker,
                                )
                            }
                            _ => (
                                Redirect {
                                    kind: RedirectKind::Duplicate,
                                    fd,
                                    target: Word::Dynamic(w.value.clone()),
                                    path: None,
                                    both: false,
                                },
                                Some(format!(
                                    "the descriptor duplication `{}` is not supported",
                                    w.value
                                )),
                            ),
                        }
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(k, sub) => {
                        self.body("", &sub.list, cwd, nesting, Context::ProcessSubstitution);
                        let kind = match k {
                            ast::ProcessSubstitutionKind::Read => RedirectKind::Read,
                            ast::ProcessSubstitutionKind::Write => RedirectKind::Write,
                        };
                        (
                            Redirect {
                                kind,
                                fd,
                                target: Word::Dynamic("(...)".into()),
                                path: None,
                                both: false,
                            },
                            Some("process substitution is not supported".into()),
                        )
                    }
                }
            }
            ast::IoRedirect::HereDocument(fd, doc) => {
                let mut text = doc.doc.value.clone();
                if doc.remove_tabs {
                    text = text
                        .split_inclusive('\n')
                        .map(|l| l.trim_start_matches('\t'))
                        .collect();
                }
                let (target, blocker) = if let Some(why) = doc
                    .requires_expansion
                    .then(|| here_body_too_complex(&text))
                    .flatten()
                {
                    self.unsupported
                        .push(format!("a here-document's body {why}"));
                    (
                        Word::Dynamic(text.clone()),
                        Some(format!("here-document body {why}")),
                    )
                } else if doc.requires_expansion {
                    match brush_parser::word::parse_heredoc(&text, &parser_options()) {
                        Ok(pieces) => {
                            let mut chars = Vec::new();
                            let mut dynamic = None;
                            let nest = with(nesting, Context::HereDocument);
                            self.pieces(&text, &pieces, true, &mut chars, &mut dynamic, cwd, &nest);
                            match dynamic {
                                None => (Word::Literal(chars.iter().map(|q| q.0).collect()), None),
                                Some(why) => (
                                    Word::Dynamic(text.clone()),
                                    Some(format!("{why} in a here-document is not supported")),
                                ),
                            }
                        }
                        Err(e) => {
                            self.unsupported
                                .push(format!("cannot parse a here-document: {e}"));
                            (
                                Word::Dynamic(text.clone()),
                                Some("unparsable here-document".into()),
                            )
                        }
                    }
                } else {
                    (Word::Literal(text), None)
                };
                (
                    Redirect {
                        kind: RedirectKind::HereDoc,
                        fd: fd_of(fd),
                        target,
                        path: None,
                        both: false,
                    },
                    blocker,
                )
            }
            ast::IoRedirect::HereString(fd, w) => {
                let e = self.word(&w.value, cwd, nesting, Mode::Single);
                let target = e
                    .words
                    .into_iter()
                    .next()
                    .unwrap_or(Word::Literal(String::new()));
                (
                    Redirect {
                        kind: RedirectKind::HereString,
                        fd: fd_of(fd),
                        target,
                        path: None,
                        both: false,
                    },
                    e.blocker,
                )
            }
            ast::IoRedirect::OutputAndError(w, append) => {
                let kind = if *append {
                    RedirectKind::Append
                } else {
                    RedirectKind::Write
                };
                file(self, kind, None, w, true)
            }
        }
    }

    /// Expand one word as written in the source.
    fn word(&mut self, raw: &str, cwd: &Path, nesting: &[Context], mode: Mode) -> Expanded {
        let dynamic = |why: String| Expanded {
            words: vec![Word::Dynamic(raw.to_string())],
            blocker: Some(format!("`{raw}`: {why} is not supported")),
        };
        let pieces = match brush_parser::word::parse(raw, &parser_options()) {
            Ok(p) => p,
            Err(e) => {
                self.unsupported
                    .push(format!("cannot parse the word `{raw}`: {e}"));
                return dynamic("an unparsable word".into());
            }
        };
        let mut chars: Vec<QChar> = Vec::with_capacity(raw.len());
        let mut why: Option<String> = None;
        self.pieces(raw, &pieces, false, &mut chars, &mut why, cwd, nesting);
        if let Some(why) = why {
            return dynamic(why);
        }
        if mode != Mode::Single && glob::has_brace_expansion(&chars) {
            return dynamic("brace expansion".into());
        }
        let plain = || chars.iter().map(|q| q.0).collect::<String>();
        if mode != Mode::Single && glob::is_pattern(&chars) {
            if mode == Mode::Target {
                return dynamic("a pattern in a redirection target".into());
            }
            if !self.opts.expand_globs {
                return Expanded {
                    words: vec![Word::Dynamic(raw.to_string())],
                    blocker: Some(format!("`{raw}`: a pattern for a nested shell to expand")),
                };
            }
            return match glob::expand(&chars, cwd, self.opts.workspace) {
                Ok(Some(found)) => Expanded {
                    words: found.into_iter().map(Word::Literal).collect(),
                    blocker: None,
                },
                Ok(None) => Expanded {
                    words: vec![Word::Literal(plain())],
                    blocker: None,
                },
                Err(GlobError::OutsideWorkspace) => dynamic(
                    "a pattern outside the workspace (rawko expands globs only inside it)".into(),
                ),
                Err(GlobError::TooMany) => dynamic(format!(
                    "a pattern matching more than {} paths",
                    glob::MAX_MATCHES
                )),
            };
        }
        Expanded {
            words: vec![Word::Literal(plain())],
            blocker: None,
        }
    }

    /// Append the characters of `pieces` to `out`, or set `why` to what makes the word only
    /// known at run time. Substitutions are walked for the commands inside them.
    #[allow(clippy::too_many_arguments)]
    fn pieces(
        &mut self,
        raw: &str,
        pieces: &[WordPieceWithSource],
        in_quotes: bool,
        out: &mut Vec<QChar>,
        why: &mut Option<String>,
        cwd: &Path,
        nesting: &[Context],
    ) {
        let set = |why: &mut Option<String>, w: &str| {
            if why.is_none() {
                *why = Some(w.to_string());
            }
        };
        for p in pieces {
            let source = raw.get(p.start_index..p.end_index).unwrap_or(raw);
            match &p.piece {
                WordPiece::Text(s) => out.extend(s.chars().map(|c| (c, in_quotes))),
                WordPiece::SingleQuotedText(s) => out.extend(s.chars().map(|c| (c, true))),
                WordPiece::AnsiCQuotedText(s) => {
                    if s.contains('\\') {
                        set(why, "an ANSI-C quoted string with escapes ($'...')");
                    } else {
                        out.extend(s.chars().map(|c| (c, true)));
                    }
                }
                WordPiece::DoubleQuotedSequence(inner) => {
                    self.pieces(raw, inner, true, out, why, cwd, nesting)
                }
                WordPiece::GettextDoubleQuotedSequence(inner) => {
                    set(why, "a locale-translated string ($\"...\")");
                    self.pieces(raw, inner, true, out, why, cwd, nesting)
                }
                WordPiece::TildeExpansion(_) => set(why, "tilde expansion"),
                WordPiece::ParameterExpansion(expr) => {
                    if !plain_parameter(expr) {
                        self.unsupported.push(format!(
                            "a parameter expansion with an operator (`{source}`): its result cannot be judged before it runs"
                        ));
                    }
                    set(why, "parameter expansion");
                }
                WordPiece::CommandSubstitution(s) => {
                    self.nested(s, cwd, &with(nesting, Context::CommandSubstitution));
                    set(why, "command substitution");
                }
                WordPiece::BackquotedCommandSubstitution(s) => {
                    let inner = unescape_backticks(s, in_quotes);
                    self.nested(&inner, cwd, &with(nesting, Context::CommandSubstitution));
                    set(why, "command substitution");
                }
                WordPiece::EscapeSequence(s) => {
                    let mut it = s.chars();
                    it.next();
                    let c: String = it.collect();
                    if c == "\n" {
                        continue;
                    }
                    if in_quotes && !matches!(c.as_str(), "$" | "`" | "\"" | "\\") {
                        out.push(('\\', true));
                    }
                    out.extend(c.chars().map(|c| (c, true)));
                }
                WordPiece::ArithmeticExpression(_) => {
                    self.unsupported.push(format!(
                        "an arithmetic expansion (`{source}`): arithmetic can run commands"
                    ));
                    set(why, "arithmetic expansion");
                }
            }
        }
    }
}

/// `$name`, `${name}`, `$1`, `$@`, `${a[@]}`: a value, nothing evaluated on the way.
fn plain_parameter(expr: &ParameterExpr) -> bool {
    matches!(
        expr,
        ParameterExpr::Parameter {
            parameter: Parameter::Named(_)
                | Parameter::Positional(_)
                | Parameter::Special(_)
                | Parameter::NamedWithAllIndices { .. },
            indirect: false,
        }
    )
}

/// The command inside backticks: `\\`, `` \` `` and `\$` lose their backslash (and `\"` too
/// inside double quotes).
fn unescape_backticks(s: &str, in_quotes: bool) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && let Some(&n) = chars.peek()
            && (matches!(n, '\\' | '`' | '$') || (in_quotes && n == '"'))
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(c);
    }
    out
}
