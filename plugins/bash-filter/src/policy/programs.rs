//! Allowed programs whose arguments can still run commands or write files (`find`, `sed`,
//! `awk`, `rg`, `git`, `tar` and the file-writing utilities), read argument by argument. Kept
//! apart because each one is its own small parser of that program's options.

use rawko_plugin_sdk::bash_filter::Word;

use super::tables::GIT_COMMANDS;
use super::{Checker, Cmd, Denial, Judged, deny, short};
use crate::{awk, sed};

impl Checker<'_> {
    pub(super) fn find(&self, cmd: &Cmd, depth: usize) -> Judged {
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

    pub(super) fn sed(&self, cmd: &Cmd) -> Result<(), Denial> {
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

    pub(super) fn awk(&self, cmd: &Cmd) -> Result<(), Denial> {
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

    pub(super) fn rg(&self, cmd: &Cmd, depth: usize) -> Judged {
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

    pub(super) fn git(&self, cmd: &Cmd) -> Result<(), Denial> {
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

    pub(super) fn tar(&self, cmd: &Cmd) -> Result<(), Denial> {
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
    pub(super) fn writes(&self, cmd: &Cmd) -> Result<(), Denial> {
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
