//! Small statistics about a text.

/// The number of words in `text`. Words are separated by whitespace.
pub fn word_count(text: &str) -> usize {
    text.split(' ').filter(|w| !w.is_empty()).count()
}

/// The longest word in `text`, the first one if several are as long.
pub fn longest_word(text: &str) -> Option<&str> {
    text.split_whitespace()
        .fold(None, |best: Option<&str>, w| match best {
            Some(b) if b.len() >= w.len() => Some(b),
            _ => Some(w),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_on_one_line() {
        assert_eq!(word_count("the quick brown fox"), 4);
    }

    #[test]
    fn counts_words_across_lines_and_tabs() {
        assert_eq!(word_count("the quick\nbrown\tfox\n"), 4);
    }

    #[test]
    fn finds_the_longest_word() {
        assert_eq!(longest_word("a bb ccc dd"), Some("ccc"));
        assert_eq!(longest_word(""), None);
    }
}
