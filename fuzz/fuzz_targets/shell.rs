//! A command line a model sends to `Bash`. Invariants: no panic escapes the parser (the
//! parser's own panics are caught and refused), and no input stalls it or exhausts memory
//! (libFuzzer's timeout and RSS limit). With `RAWKO_FUZZ_ROUNDTRIP=1`, also: a command that
//! parses, printed back by the parser's own printer and parsed again, runs the same programs
//! with the same arguments. That one is off by default: brush-parser 0.4's printer is lossy in
//! many ways (see below, and `! !`, which it prints as `&`), and rawko never reads printed text,
//! so a printer bug is not a rawko bug and must not fail CI.
#![no_main]

use std::path::Path;
use std::sync::{Once, OnceLock};

use libfuzzer_sys::fuzz_target;
use rawko_shell::{ParseOptions, Resolver, parse};

static DEFAULT_HOOK: Once = Once::new();
static ROUNDTRIP: OnceLock<bool> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    // rawko catches the parser's panics at its boundary; libFuzzer's hook would abort on them
    // first, so panics unwind here as they do in rawko. One that escapes `parse` still aborts.
    DEFAULT_HOOK.call_once(|| drop(std::panic::take_hook()));
    let Ok(raw) = std::str::from_utf8(data) else {
        return;
    };
    if raw.len() > 4096 {
        return;
    }
    let ws = Path::new("/nonexistent-fuzz-workspace");
    let resolver = Resolver::new(Vec::new());
    let opts = ParseOptions {
        resolver: &resolver,
        workspace: ws,
        expand_globs: false,
    };
    let Ok(first) = parse(raw, ws, &opts) else {
        return;
    };
    if !*ROUNDTRIP.get_or_init(|| std::env::var_os("RAWKO_FUZZ_ROUNDTRIP").is_some()) {
        return;
    }
    // brush-parser 0.4's printer is lossy in known ways, left out of the round trip: it
    // re-indents the lines of compound commands, quoted text included (`echo "a\nb"` in a loop
    // body gains spaces), and prints a here-document followed by more commands on its line
    // (`cat <<EOF; x`) as `cat <<EOF\nEOF\n;\nx`; so only one-line commands are compared. And a
    // subshell right after `$(`, `<(` or `(` is printed without the space that kept it from
    // reading as arithmetic (`<( (x) )` prints as `<((x))`).
    if !first.unsupported.is_empty()
        || raw.contains(['\n', '\r'])
        || raw.contains("<<")
        || has_adjacent_parens(raw)
    {
        return;
    }
    let printed = std::panic::catch_unwind(|| {
        let mut parser = brush_parser::Parser::new(
            std::io::Cursor::new(raw.as_bytes()),
            &rawko_shell::parse::parser_options(),
        );
        // The program's own printer runs its complete commands together (brush-parser 0.4
        // prints no separator between them), so each is printed and they are joined as lines.
        parser.parse_program().ok().map(|p| {
            p.complete_commands
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        })
    });
    let Ok(Some(printed)) = printed else {
        return;
    };
    let second = parse(&printed, ws, &opts)
        .unwrap_or_else(|e| panic!("{raw:?} printed as {printed:?} does not parse again: {e}"));
    let argv = |p: &rawko_shell::ParsedCommand| -> Vec<Vec<String>> {
        p.commands
            .iter()
            .map(|c| c.argv.iter().map(|w| format!("{w:?}")).collect())
            .collect()
    };
    assert_eq!(
        argv(&first),
        argv(&second),
        "{raw:?} printed as {printed:?} runs something else"
    );
});

/// Whether two parentheses of the same kind follow each other (spaces between them allowed).
fn has_adjacent_parens(raw: &str) -> bool {
    let mut last = None;
    for c in raw.chars().filter(|c| !c.is_whitespace()) {
        if (c == '(' || c == ')') && last == Some(c) {
            return true;
        }
        last = Some(c);
    }
    false
}
