//! The knowledge layer's readers of repository files: `knowledge.yaml` and chunking. A
//! repository is a stranger's. Invariants: no panic or stall; a refused config names a position
//! inside the text; every chunk is within the file's lines, in order, no larger than the cap,
//! and made of the file's own text.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rawko_knowledge::KnowledgeConfig;
use rawko_knowledge::config::Chunking;
use rawko_knowledge::chunk::{MAX_CHUNK_BYTES, chunk};

const NAMES: &[&str] = &["a.md", "src/a.rs", "notes.txt", "Makefile", "x"];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);

    match KnowledgeConfig::parse(Path::new("knowledge.yaml"), &text) {
        Ok(config) => {
            // Whatever the globs, matching is total.
            let _ = config.selects("src/a.rs");
            let _ = config.selects("");
        }
        Err(rawko_knowledge::KnowledgeError::Config { line, column, .. }) => {
            // YAML breaks lines at a lone `\r`, and at NEL, LS and PS, too.
            let lines = text
                .matches(['\n', '\r', '\u{85}', '\u{2028}', '\u{2029}'])
                .count()
                + 1;
            assert!(line >= 1 && line <= lines + 1, "line {line} of {lines}");
            assert!(column >= 1, "column {column}");
        }
        Err(e) => panic!("a config error of another kind: {e}"),
    }

    let name = NAMES[usize::from(pick) % NAMES.len()];
    let lines: Vec<&str> = text.lines().collect();
    let chunks = chunk(name, &text, &Chunking::default());
    let mut last_start = 0;
    for c in &chunks {
        assert!(c.text.len() <= MAX_CHUNK_BYTES, "{} bytes", c.text.len());
        assert!(!c.text.trim().is_empty(), "a blank chunk");
        assert!(
            1 <= c.start_line && c.start_line <= c.end_line && c.end_line <= lines.len(),
            "{}-{} of {}",
            c.start_line,
            c.end_line,
            lines.len()
        );
        assert!(c.start_line >= last_start, "out of order");
        last_start = c.start_line;
        let span = lines[c.start_line - 1..c.end_line].join("\n");
        assert!(span.contains(c.text.as_str()), "a chunk that is not the file's text");
    }
});
