//! What brush-parser 0.4 panics on, refused before it reads it, and a quiet catch behind that.
//!
//! The parser `unwrap`s its conversions of digit strings: a file-descriptor number before `<` or
//! `>` into an `i32`, and a directory-stack index (`~N`, `~+N`, `~-N`) into a `usize`. A number
//! too large for either is a panic inside the parser, which a model can send as a `Bash`
//! command. [`check_numbers`] finds those numbers in the raw text and refuses them with a reason
//! of their own, so the parser never sees them. [`catch_quietly`] stays behind it for whatever
//! no check in front of the parser knows: a panic inside the parse is a refusal, and its message
//! goes into the refusal instead of to the terminal as if rawko had crashed.

use std::cell::{Cell, RefCell};
use std::panic::{AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

use super::ParseError;

/// Digits shown of a number in a refusal (they can run to the command's length).
const SHOWN_DIGITS: usize = 40;

/// Refuse the numbers brush-parser 0.4 cannot convert: a descriptor number (all digits, starting
/// a word, right before `<` or `>`) that does not fit an `i32`, and a directory-stack index
/// (`~`, an optional `+` or `-`, digits) that does not fit a `usize`. Quoting is not looked at,
/// and a `~` counts wherever a word may start (after anything but a letter, a digit, a quote, a
/// backslash or one of `_./:,@%`): a refusal errs on the safe side.
pub fn check_numbers(raw: &str) -> Result<(), ParseError> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &raw[start..i];
        let before = start.checked_sub(1).map(|k| b[k]);
        let starts_word =
            before.is_none_or(|c| c.is_ascii_whitespace() || b";&|()<>`".contains(&c));
        if starts_word && matches!(b.get(i), Some(b'<' | b'>')) && digits.parse::<i32>().is_err() {
            return Err(ParseError::FdNumberTooLarge(shown(digits)));
        }
        let sign = before.filter(|c| matches!(c, b'+' | b'-'));
        let tilde_at = start.checked_sub(1 + usize::from(sign.is_some()));
        let tilde_starts_word = tilde_at.is_some_and(|t| {
            b[t] == b'~'
                && t.checked_sub(1).is_none_or(|k| {
                    b[k] < 0x80
                        && !(b[k].is_ascii_alphanumeric() || b"_./:,@%'\"\\".contains(&b[k]))
                })
        });
        if tilde_starts_word && digits.parse::<usize>().is_err() {
            let sign = sign.map(|c| char::from(c).to_string()).unwrap_or_default();
            return Err(ParseError::DirStackIndexTooLarge(format!(
                "{sign}{}",
                shown(digits)
            )));
        }
    }
    Ok(())
}

/// `digits`, cut to [`SHOWN_DIGITS`] with a note of how many there are.
fn shown(digits: &str) -> String {
    if digits.len() <= SHOWN_DIGITS {
        return digits.to_string();
    }
    format!("{}… ({} digits)", &digits[..SHOWN_DIGITS], digits.len())
}

thread_local! {
    /// Set while this thread runs a parse under [`catch_quietly`].
    static QUIET: Cell<bool> = const { Cell::new(false) };
    /// Where the last quiet panic on this thread happened, and what it said.
    static CAUGHT: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Put a hook in front of the process's panic hook, once: a panic on a thread inside
/// [`catch_quietly`] is recorded for the refusal; any other goes on to the hook that was there.
/// The hook is process-wide but the choice is per thread, so a panic elsewhere while a parse is
/// quiet still reaches the terminal. A hook set later without chaining to this one makes caught
/// parser panics loud again, never uncaught.
fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET.try_with(Cell::get).unwrap_or(false) {
                let _ = CAUGHT.try_with(|c| *c.borrow_mut() = Some(describe(info)));
            } else {
                previous(info);
            }
        }));
    });
}

/// Where the panic happened (the crate's own path, not the builder's), and its message.
fn describe(info: &PanicHookInfo<'_>) -> String {
    let message = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_default();
    let Some(loc) = info.location() else {
        return message;
    };
    let file = loc.file();
    let file = file
        .rfind("/src/")
        .and_then(|i| file[..i].rfind('/').map(|j| &file[j + 1..]))
        .unwrap_or(file);
    format!("at {file}:{}: {message}", loc.line())
}

/// A panic caught by [`catch_quietly`]: where it happened and what it said.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CaughtPanic(pub String);

/// Run `f`, turning a panic inside it into `Err` with where it happened and what it said, and
/// keeping it off the terminal.
pub fn catch_quietly<T>(f: impl FnOnce() -> T) -> Result<T, CaughtPanic> {
    install_hook();
    let was = QUIET.replace(true);
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.set(was);
    r.map_err(|_| {
        CaughtPanic(
            CAUGHT
                .take()
                .unwrap_or_else(|| "a panic whose message was not recorded".into()),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers brush-parser 0.4 panics on are refused by the check, named in the reason;
    /// the same digits where the parser reads them as words are left alone.
    #[test]
    fn numbers_the_parser_cannot_convert_are_refused_before_it() {
        for raw in [
            "4294967296>",
            "2147483648<&-",
            "9999999999999999999999999<(",
            "echo hi 99999999999>&1",
            "echo $(4294967296>x)",
            "echo `4294967296>x`",
            "a;4294967296>x",
            "echo x\n4294967296<x",
        ] {
            let e = check_numbers(raw).unwrap_err();
            assert!(matches!(e, ParseError::FdNumberTooLarge(_)), "{raw}: {e}");
            assert!(
                e.to_string().contains("file-descriptor number"),
                "{raw}: {e}"
            );
        }
        for raw in [
            " ~9999999999999999999999999",
            "~18446744073709551616",
            "echo ~+99999999999999999999/x",
            "a=~-99999999999999999999",
            "echo ${x:-~99999999999999999999}",
        ] {
            let e = check_numbers(raw).unwrap_err();
            assert!(
                matches!(e, ParseError::DirStackIndexTooLarge(_)),
                "{raw}: {e}"
            );
            assert!(e.to_string().contains("directory-stack"), "{raw}: {e}");
        }
        for raw in WORDS {
            assert!(check_numbers(raw).is_ok(), "{raw}");
        }
        let e = check_numbers(&format!("{}>", "9".repeat(5000))).unwrap_err();
        assert!(e.to_string().len() < 300, "{e}");
        assert!(e.to_string().contains("5000 digits"), "{e}");
    }

    /// Large numbers where the parser reads them as words: the check leaves them alone.
    const WORDS: &[&str] = &[
        "2147483647>x",
        "echo 4294967296 > x",
        "echo x4294967296>x",
        "echo 'a'4294967296>x",
        "x[4294967296>1]=2",
        "echo ~18446744073709551615",
        "echo a:~99999999999999999999",
        "echo a~99999999999999999999",
        "echo 99999999999999999999999",
        "echo ~+ ~- ~",
        "echo '~99999999999999999999' \"~99999999999999999999\" \\~99999999999999999999",
        "echo 'a'~99999999999999999999",
    ];

    /// Each number the check refuses is one the parser really panics on, and one less does
    /// not: the check is no wider than the parser's bug.
    #[test]
    fn the_checks_bounds_are_the_parsers() {
        let parses = |s: &str| {
            catch_quietly(|| {
                let mut p = brush_parser::Parser::new(
                    std::io::Cursor::new(s.as_bytes()),
                    &crate::parse::parser_options(),
                );
                let _ = p.parse_program();
                for word in s.split_whitespace() {
                    let _ = brush_parser::word::parse(word, &crate::parse::parser_options());
                }
            })
        };
        for (ok, bad) in [
            ("2147483647>x", "2147483648>x"),
            ("echo ~18446744073709551615", "echo ~18446744073709551616"),
            ("echo ~-18446744073709551615", "echo ~-18446744073709551616"),
        ] {
            assert!(parses(ok).is_ok(), "{ok}");
            assert!(check_numbers(ok).is_ok(), "{ok}");
            let e = parses(bad).unwrap_err().to_string();
            assert!(e.contains("brush-parser-0.4.0/src/"), "{bad}: {e}");
            assert!(check_numbers(bad).is_err(), "{bad}");
        }
        // And rawko's whole parse, which reads every word, does not fail on them.
        let resolver = crate::Resolver::new(Vec::new());
        let ws = std::path::Path::new("/nonexistent-workspace");
        let opts = crate::ParseOptions {
            resolver: &resolver,
            workspace: ws,
            expand_globs: false,
        };
        for raw in WORDS {
            let r = crate::parse(raw, ws, &opts);
            assert!(
                !matches!(r, Err(ParseError::ParserFailed(_))),
                "{raw}: {r:?}"
            );
        }
    }

    /// A panic inside [`catch_quietly`] comes back as an error with its place and message and
    /// prints nothing; a panic on another thread at the same time, and one on this thread after,
    /// still print as usual. Run in a child process of this test binary, whose stderr is read.
    #[test]
    fn a_caught_panic_is_quiet_and_no_other_is() {
        if std::env::var_os("RAWKO_SHELL_QUIET_PANIC_CHILD").is_some() {
            let (started, go) = std::sync::mpsc::channel();
            let (tell, wait) = std::sync::mpsc::channel::<()>();
            let r = catch_quietly(|| {
                // Another thread panics while this one is quiet.
                let other = std::thread::spawn(move || {
                    started.send(()).unwrap();
                    wait.recv().unwrap();
                    panic!("loud: another thread");
                });
                go.recv().unwrap();
                tell.send(()).unwrap();
                assert!(other.join().is_err());
                panic!("quiet: inside the parse");
            });
            let e = r.unwrap_err().to_string();
            assert!(e.contains("quiet: inside the parse"), "{e}");
            assert!(e.contains("parse/panics.rs"), "{e}");
            assert!(std::panic::catch_unwind(|| panic!("loud: after the parse")).is_err());
            return;
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "parse::panics::tests::a_caught_panic_is_quiet_and_no_other_is",
                "--exact",
                "--nocapture",
            ])
            .env("RAWKO_SHELL_QUIET_PANIC_CHILD", "1")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert!(!stderr.contains("quiet:"), "{stderr}");
        assert!(stderr.contains("loud: another thread"), "{stderr}");
        assert!(stderr.contains("loud: after the parse"), "{stderr}");
    }
}
