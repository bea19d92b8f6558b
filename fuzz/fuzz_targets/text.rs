//! The one sanitiser every string from a file, a model or a plugin goes through before a
//! terminal sees it. Invariants: no control or escape characters survive, and the result is
//! never wider than asked (plus the ellipsis).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&width, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest);
    let max = usize::from(width) + 1;
    let line = rawko_text::line(&text, max);
    assert!(
        !line.chars().any(|c| c.is_control()),
        "a control character survived: {line:?}"
    );
    assert!(
        line.chars().count() <= max + 1,
        "{} > {max}",
        line.chars().count()
    );
    let block = rawko_text::block(&text, max);
    assert!(
        !block
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{block:?}"
    );
});
