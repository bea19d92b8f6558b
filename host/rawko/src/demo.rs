//! The demo's sample project, the task it is given, and the recorded model replies that answer
//! it: everything `rawko demo` needs to run a whole task offline, without a key.

/// The sample project: (path inside the project, contents).
pub const PROJECT: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("../demo/project/Cargo.toml")),
    ("README.md", include_str!("../demo/project/README.md")),
    ("src/lib.rs", include_str!("../demo/project/src/lib.rs")),
];

/// The model's replies, as `rawko run --record` wrote them.
pub const RECORDING: &str = include_str!("../demo/recording.jsonl");

/// The task the recording answers. Changing it means recording the demo again.
pub const TASK: &str = "The word_count function in src/lib.rs gives wrong counts for text with \
newlines or tabs, and its test fails. Fix it.";
