//! Reading the options of a wrapper to find where the command it runs begins.
//!
//! Each wrapper's options are listed; an option that is not is an error, because guessing
//! whether it takes a value would be guessing which word is the program.

/// A wrapper's options.
#[derive(Debug, Clone, Copy, Default)]
pub struct Spec {
    /// Short options that take a value (`-n 5`, `-n5`).
    pub short_value: &'static str,
    /// Short options that take none.
    pub short_flag: &'static str,
    /// Long options that take a value (`--signal=KILL`, `--signal KILL`).
    pub long_value: &'static [&'static str],
    /// Long options that take none (or only an attached `=value`).
    pub long_flag: &'static [&'static str],
    /// Options that are refused, with the reason.
    pub refuse: &'static [(&'static str, &'static str)],
    /// `-NUM` is an option (`nice -10`).
    pub numeric: bool,
    /// Options may follow the first operand (GNU argument permutation).
    pub permute: bool,
}

/// No options at all; the base of other specs.
pub const EMPTY: Spec = Spec {
    short_value: "",
    short_flag: "",
    long_value: &[],
    long_flag: &[],
    refuse: &[],
    numeric: false,
    permute: false,
};

/// The options found, and the operands.
#[derive(Debug, Default)]
pub struct Parsed {
    /// `(name, value)`: names without dashes, long ones as written.
    pub options: Vec<(String, Option<String>)>,
    pub operands: Vec<String>,
}

impl Parsed {
    pub fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    pub fn values<'a>(&'a self, names: &'a [&'a str]) -> impl Iterator<Item = &'a str> + 'a {
        self.options
            .iter()
            .filter(move |(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.as_deref())
    }
}

/// Read `args` (literal words) under `spec`. Without `permute`, reading stops at the first
/// operand and the rest are operands.
pub fn parse(args: &[String], spec: &Spec) -> Result<Parsed, String> {
    let mut out = Parsed::default();
    let mut i = 0;
    let refused = |name: &str| -> Option<String> {
        spec.refuse
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(n, why)| format!("`{}{n}` {why}", if n.len() == 1 { "-" } else { "--" }))
    };
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            out.operands.extend(args[i + 1..].iter().cloned());
            break;
        }
        if !a.starts_with('-') || a == "-" {
            if spec.permute {
                out.operands.push(a.clone());
                i += 1;
                continue;
            }
            out.operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if let Some(why) = refused(name) {
                return Err(why);
            }
            if spec.long_value.contains(&name) {
                let value = match attached {
                    Some(v) => v,
                    None => {
                        i += 1;
                        args.get(i)
                            .cloned()
                            .ok_or(format!("`--{name}` needs a value"))?
                    }
                };
                out.options.push((name.to_string(), Some(value)));
            } else if spec.long_flag.contains(&name) {
                out.options.push((name.to_string(), attached));
            } else {
                return Err(format!("unknown option `--{name}`"));
            }
            i += 1;
            continue;
        }
        let cluster: Vec<char> = a[1..].chars().collect();
        if spec.numeric && cluster.iter().all(|c| c.is_ascii_digit()) {
            out.options.push((a[1..].to_string(), None));
            i += 1;
            continue;
        }
        let mut j = 0;
        while j < cluster.len() {
            let c = cluster[j];
            let name = c.to_string();
            if let Some(why) = refused(&name) {
                return Err(why);
            }
            if spec.short_value.contains(c) {
                let rest: String = cluster[j + 1..].iter().collect();
                let value = if rest.is_empty() {
                    i += 1;
                    args.get(i)
                        .cloned()
                        .ok_or(format!("`-{c}` needs a value"))?
                } else {
                    rest
                };
                out.options.push((name, Some(value)));
                break;
            } else if spec.short_flag.contains(c) {
                out.options.push((name, None));
            } else {
                return Err(format!("unknown option `-{c}`"));
            }
            j += 1;
        }
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    const TIMEOUT: Spec = Spec {
        short_value: "sk",
        short_flag: "v",
        long_value: &["signal", "kill-after"],
        long_flag: &["preserve-status", "foreground", "verbose"],
        ..EMPTY
    };

    #[test]
    fn operands_start_after_the_options() {
        let p = parse(&v("-s KILL -k5 --preserve-status 10 rm -rf x"), &TIMEOUT).unwrap();
        assert_eq!(p.operands, v("10 rm -rf x"));
        assert!(p.has(&["k"]));
        assert!(parse(&v("--bogus 10 ls"), &TIMEOUT).is_err());
        let p = parse(&v("-- -x"), &TIMEOUT).unwrap();
        assert_eq!(p.operands, v("-x"));
    }

    #[test]
    fn refused_options_say_why() {
        let spec = Spec {
            short_value: "S",
            long_value: &["split-string"],
            refuse: &[
                ("S", "splits a string"),
                ("split-string", "splits a string"),
            ],
            ..Spec::default()
        };
        assert!(parse(&v("-S ls"), &spec).unwrap_err().contains("-S"));
        assert!(parse(&v("--split-string=ls"), &spec).is_err());
    }
}
