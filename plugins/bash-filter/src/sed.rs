//! What a sed script does besides editing text: run commands (`e`, the `e` flag of `s`), write
//! files (`w`, `W`, the `w` flag), read files (`r`, `R`).
//!
//! A small reader of GNU sed's script syntax, enough to find those; anything it does not
//! recognise is reported as unreadable, which the policy denies.

/// Effects found in a script.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// It runs shell commands.
    pub executes: bool,
    /// Files it writes.
    pub writes: Vec<String>,
    /// Files it reads.
    pub reads: Vec<String>,
}

/// Scan `script`, or say why it cannot be read.
pub fn scan(script: &str) -> Result<Effects, String> {
    let c: Vec<char> = script.chars().collect();
    let mut fx = Effects::default();
    let mut i = 0;
    let skip_ws = |i: &mut usize| {
        while *i < c.len() && (c[*i] == ' ' || c[*i] == '\t') {
            *i += 1;
        }
    };
    let rest_of_line = |i: &mut usize| -> String {
        let start = *i;
        while *i < c.len() && c[*i] != '\n' {
            *i += 1;
        }
        c[start..*i].iter().collect::<String>().trim().to_string()
    };
    while i < c.len() {
        skip_ws(&mut i);
        if i >= c.len() {
            break;
        }
        if matches!(c[i], ';' | '\n' | '}') {
            i += 1;
            continue;
        }
        // Addresses: numbers, `$`, /re/, \cREc, `first~step`, `addr,addr`, `+N`, `~N`, then `!`.
        for _ in 0..2 {
            skip_ws(&mut i);
            if i < c.len() && (c[i].is_ascii_digit() || c[i] == '$' || c[i] == '+' || c[i] == '~') {
                i += 1;
                while i < c.len() && (c[i].is_ascii_digit() || c[i] == '~') {
                    i += 1;
                }
            } else if i < c.len() && (c[i] == '/' || c[i] == '\\') {
                let delim = if c[i] == '\\' {
                    i += 1;
                    *c.get(i).ok_or("unterminated address")?
                } else {
                    '/'
                };
                i = skip_delimited(&c, i + 1, delim)?;
                while i < c.len() && (c[i] == 'I' || c[i] == 'M') {
                    i += 1;
                }
            }
            skip_ws(&mut i);
            if i < c.len() && c[i] == ',' {
                i += 1;
                continue;
            }
            break;
        }
        skip_ws(&mut i);
        while i < c.len() && c[i] == '!' {
            i += 1;
            skip_ws(&mut i);
        }
        let Some(&cmd) = c.get(i) else {
            return Err("an address without a command".into());
        };
        i += 1;
        match cmd {
            '{' | '=' | 'd' | 'D' | 'g' | 'G' | 'h' | 'H' | 'n' | 'N' | 'p' | 'P' | 'x' | 'z'
            | 'F' => {}
            'l' | 'L' | 'q' | 'Q' => {
                skip_ws(&mut i);
                while i < c.len() && c[i].is_ascii_digit() {
                    i += 1;
                }
            }
            '#' | ':' | 'b' | 't' | 'T' | 'v' => {
                // A comment, label or branch target runs to the end of the line (labels end at
                // `;` for branches in GNU sed).
                while i < c.len() && c[i] != '\n' && !(cmd != '#' && cmd != ':' && c[i] == ';') {
                    i += 1;
                }
            }
            'a' | 'i' | 'c' => {
                // Text to the end of the line, with backslash-newline continuing it.
                while i < c.len() && c[i] != '\n' {
                    if c[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            'r' | 'R' => {
                skip_ws(&mut i);
                fx.reads.push(rest_of_line(&mut i));
            }
            'w' | 'W' => {
                skip_ws(&mut i);
                fx.writes.push(rest_of_line(&mut i));
            }
            'e' => {
                fx.executes = true;
                rest_of_line(&mut i);
            }
            's' | 'y' => {
                let delim = *c.get(i).ok_or("unterminated s or y command")?;
                if delim == '\n' || delim == '\\' {
                    return Err("an unusual delimiter".into());
                }
                i = skip_delimited(&c, i + 1, delim)?;
                i = skip_delimited(&c, i, delim)?;
                if cmd == 's' {
                    while i < c.len() {
                        match c[i] {
                            'g' | 'p' | 'i' | 'I' | 'm' | 'M' => i += 1,
                            d if d.is_ascii_digit() => i += 1,
                            'e' => {
                                fx.executes = true;
                                i += 1;
                            }
                            'w' => {
                                i += 1;
                                skip_ws(&mut i);
                                fx.writes.push(rest_of_line(&mut i));
                            }
                            _ => break,
                        }
                    }
                }
            }
            other => return Err(format!("the command `{other}`")),
        }
    }
    Ok(fx)
}

/// The index after the closing `delim`, honouring backslash escapes.
fn skip_delimited(c: &[char], mut i: usize, delim: char) -> Result<usize, String> {
    while i < c.len() {
        if c[i] == '\\' {
            i += 2;
            continue;
        }
        if c[i] == delim {
            return Ok(i + 1);
        }
        i += 1;
    }
    Err("an unterminated expression".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_edits_have_no_effects() {
        for s in [
            "s/a/b/g",
            "1d;$d",
            "/x/,/y/p",
            "s|e|w|2",
            "y/abc/xyz/",
            "s/w/e/;s/e/w/",
        ] {
            assert_eq!(scan(s).unwrap(), Effects::default(), "{s}");
        }
    }

    #[test]
    fn commands_and_files_are_found() {
        assert!(scan("1e id").unwrap().executes);
        assert!(scan("s/x/id/e").unwrap().executes);
        assert_eq!(scan("s/a/b/w /tmp/out").unwrap().writes, ["/tmp/out"]);
        assert_eq!(scan("/x/w out.txt").unwrap().writes, ["out.txt"]);
        assert_eq!(scan("1r /etc/passwd").unwrap().reads, ["/etc/passwd"]);
        assert!(scan("1 e id").unwrap().executes);
        assert!(scan("$!{s/a/b/e\n}").unwrap().executes);
        assert!(scan("K").is_err());
    }
}
