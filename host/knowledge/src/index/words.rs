//! A query's text read as words: what FTS5 is asked for, as quoted strings only (nothing a user
//! types is query syntax), with compound identifiers also tried as their parts and function
//! words left out.

use crate::chunk::split_identifier;

/// Most words of a query searched.
const MAX_QUERY_WORDS: usize = 32;

/// English function words, left out of a query that has other words.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "is", "it", "of", "on", "or", "that", "the", "this", "to", "was", "what", "when",
    "where", "which", "who", "why", "with",
];

/// The words of a query, lowercased, as FTS5 will match them: runs of letters and digits.
pub fn query_words(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let w = w.to_lowercase();
        if !out.contains(&w) {
            out.push(w);
        }
        if out.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    out
}

/// The query's words as FTS5 expressions made of quoted strings only (nothing the user typed is
/// query syntax): each word, or for a compound identifier (`reconcileLedgerDrift`) the word or
/// its parts in a row, which is how the index holds `reconcile_ledger_drift` and the
/// identifier's words. Function words are left out of a query that has other words.
pub(super) fn query_terms(text: &str) -> Vec<String> {
    let mut words: Vec<(String, Vec<String>)> = Vec::new();
    let mut parts = Vec::new();
    for w in text.split(|c: char| !c.is_alphanumeric()) {
        if w.is_empty() {
            continue;
        }
        let lower = w.to_lowercase();
        if words.iter().any(|(l, _)| *l == lower) {
            continue;
        }
        parts.clear();
        split_identifier(w, &mut parts);
        let split = if parts.len() > 1 {
            parts.iter().map(|p| p.to_lowercase()).collect()
        } else {
            Vec::new()
        };
        words.push((lower, split));
        if words.len() == MAX_QUERY_WORDS {
            break;
        }
    }
    let content = words.iter().any(|(w, _)| !STOP_WORDS.contains(&w.as_str()));
    let quote = |s: &str| format!("\"{}\"", s.replace('"', "\"\""));
    words
        .into_iter()
        .filter(|(w, _)| !content || !STOP_WORDS.contains(&w.as_str()))
        .map(|(w, split)| {
            if split.is_empty() {
                quote(&w)
            } else {
                format!("({} OR {})", quote(&w), quote(&split.join(" ")))
            }
        })
        .collect()
}
