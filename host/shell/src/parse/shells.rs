//! Commands that would hand text to a shell (or another string splitter) to read again: `bash -c`,
//! `sudo -s`, `env -S`, `watch` without `-x`. rawko runs only what its own parser read, so such a
//! command is noted as one its executor does not run.

use crate::model::{Program, Word};

/// Shells that run a script given as a string (`-c`).
const SHELLS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash", "fish", "csh",
    "tcsh",
];

/// The options at the start of `rest`, before the first operand; `takes_arg` lists options whose
/// value is the next word.
fn leading_options<'w>(rest: &[&'w str], takes_arg: &[&str]) -> Vec<&'w str> {
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        if *a == "--" || !(a.starts_with('-') || a.starts_with('+')) || *a == "-" {
            break;
        }
        out.push(*a);
        i += if takes_arg.contains(a) { 2 } else { 1 };
    }
    out
}

/// Why running `argv` would have a shell (or another string splitter) read text again, which
/// rawko's executor never lets happen: filters judged rawko's parse of that text, and a second
/// reading by another parser could differ. Every word is looked at, since wrappers (`timeout`,
/// `xargs`, `find -exec`, `sudo`, `nice`) pass the words after them on as a command.
pub fn hands_text_to_a_shell(argv: &[Word], program: &Program) -> Option<String> {
    let words: Vec<&str> = argv.iter().map(Word::text).collect();
    let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
    let why = |what: String| {
        Some(format!(
            "{what}: that would have a shell read the text again, and rawko runs only what its own parser read; run the commands directly"
        ))
    };
    let short = |w: &str, letters: &[char]| {
        w.starts_with('-') && !w.starts_with("--") && w[1..].contains(letters)
    };
    for (i, w) in words.iter().enumerate() {
        let name = base(&if i == 0 {
            program.name.clone()
        } else {
            base(w)
        });
        let rest = &words[i + 1..];
        let hit = match name.as_str() {
            n if SHELLS.contains(&n) => {
                let opts =
                    leading_options(rest, &["-o", "+o", "-O", "+O", "--rcfile", "--init-file"]);
                opts.iter().any(|a| short(a, &['c']) || *a == "--command")
            }
            "watch" => !rest.iter().any(|a| *a == "-x" || *a == "--exec"),
            "script" | "su" | "runuser" => rest
                .iter()
                .any(|a| short(a, &['c']) || a.starts_with("--command")),
            "sudo" | "doas" => {
                let opts = leading_options(
                    rest,
                    &["-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-T", "-U"],
                );
                opts.iter()
                    .any(|a| short(a, &['s', 'i']) || *a == "--shell" || *a == "--login")
            }
            "env" => leading_options(rest, &["-u", "-C", "--unset", "--chdir"])
                .iter()
                .any(|a| short(a, &['S']) || a.starts_with("--split-string")),
            _ => false,
        };
        if hit {
            return why(match name.as_str() {
                "watch" => "`watch` runs its command through `sh -c` (without `-x`)".into(),
                "env" => "`env -S` splits a string into a command its own way".into(),
                n if SHELLS.contains(&n) => format!("`{n} -c` runs a script given as text"),
                n => format!("`{n}` runs its command through a shell"),
            });
        }
    }
    None
}
