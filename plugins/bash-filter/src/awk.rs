//! Whether an awk program reaches outside itself: `system()`, pipes to and from commands,
//! output redirected to files, `getline` from files, extensions.
//!
//! awk's grammar makes `>` both a comparison and a redirection and `|` both a regex operator and
//! a pipe; telling them apart needs a full parser, so this errs on the side of denying: a
//! program that merely might do one of these things is reported.

/// Why `program` is not plain text processing, if it is not.
pub fn escapes(program: &str) -> Option<&'static str> {
    if program.contains("system") {
        return Some("calls system(), which runs a shell command");
    }
    let bytes = program.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if b == b'|' {
            let double = bytes.get(i + 1) == Some(&b'|') || (i > 0 && bytes[i - 1] == b'|');
            if !double {
                return Some("uses `|`, which can pipe to or from a shell command");
            }
        }
    }
    if program.contains("@load") || program.contains("@include") {
        return Some("loads an extension or another source file");
    }
    if let Some(pos) = program.find("getline")
        && program[pos..].contains('<')
    {
        return Some("reads a file with getline");
    }
    // `print ... > "file"` and `printf ... >> "file"`: any `>` after print in one statement.
    let mut rest = program;
    while let Some(pos) = rest.find("print") {
        let after = &rest[pos + 5..];
        let statement_end = after.find([';', '\n', '}']).unwrap_or(after.len());
        if after[..statement_end].contains('>') {
            return Some("redirects print output to a file");
        }
        rest = after;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::escapes;

    #[test]
    fn text_processing_passes() {
        for p in [
            "{print $1}",
            "NR>1 {s+=$2} END {print s}",
            "$1 > 5 || $2 < 3 {print}",
        ] {
            assert_eq!(escapes(p), None, "{p}");
        }
    }

    #[test]
    fn escapes_are_found() {
        for p in [
            "BEGIN{system(\"id\")}",
            "{print | \"sh\"}",
            "BEGIN{\"id\" | getline x}",
            "{print > \"/tmp/x\"}",
            "{printf \"%s\", $0 >> \"f\"}",
            "BEGIN{getline l < \"/etc/passwd\"}",
            "@load \"filefuncs\"",
        ] {
            assert!(escapes(p).is_some(), "{p}");
        }
    }
}
