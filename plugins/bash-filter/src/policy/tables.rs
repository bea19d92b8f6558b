//! The checker's fixed tables: the option grammar of each wrapper and the lists of shells and
//! git commands. Data only, kept out of the logic that reads it.

use crate::opts::{self, Spec};

/// Shells whose `-c` runs a script given on the command line.
pub(super) const SHELLS: &[&str] = &[
    "bash", "sh", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash",
];

pub(super) const ENV: Spec = Spec {
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

pub(super) const TIMEOUT: Spec = Spec {
    short_value: "sk",
    short_flag: "v",
    long_value: &["signal", "kill-after"],
    long_flag: &["preserve-status", "foreground", "verbose"],
    ..opts::EMPTY
};

pub(super) const NICE: Spec = Spec {
    short_value: "n",
    short_flag: "",
    long_value: &["adjustment"],
    long_flag: &[],
    numeric: true,
    ..opts::EMPTY
};

pub(super) const STDBUF: Spec = Spec {
    short_value: "ioe",
    short_flag: "",
    long_value: &["input", "output", "error"],
    long_flag: &[],
    ..opts::EMPTY
};

pub(super) const EXEC: Spec = Spec {
    short_value: "a",
    short_flag: "cl",
    long_value: &[],
    long_flag: &[],
    ..opts::EMPTY
};

pub(super) const COMMAND: Spec = Spec {
    short_value: "",
    short_flag: "pvV",
    long_value: &[],
    long_flag: &[],
    ..opts::EMPTY
};

pub(super) const XARGS: Spec = Spec {
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

pub(super) const WATCH: Spec = Spec {
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

pub(super) const SCRIPT: Spec = Spec {
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

pub(super) const SUDO: Spec = Spec {
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

pub(super) const DOAS: Spec = Spec {
    short_value: "uC",
    short_flag: "Ln",
    long_value: &[],
    long_flag: &[],
    refuse: &[("s", "starts a shell")],
    ..opts::EMPTY
};

pub(super) const SU: Spec = Spec {
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
pub(super) const GIT_COMMANDS: &[&str] = &[
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
