//! Secrets the host holds for adapters, and the redaction that keeps them out of everything
//! else: what a plugin reads, what is logged, what an error says and what a recording stores.

use std::borrow::Cow;
use std::sync::Arc;

use memchr::memmem;

/// What a secret is replaced with.
pub const REDACTED: &str = "[redacted]";

/// A credential's value. Its `Debug` form shows nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    /// The value, for the one place that needs it: the request header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(REDACTED)
    }
}

/// Replaces every known secret in text and bytes.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<[Vec<u8>]>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor for `secrets` in every encoding a server, a plugin or a log could echo them
    /// back in: as they are, JSON-escaped, percent- and form-encoded, and base64 (standard and
    /// URL-safe, at each of the three alignments a secret can have inside a longer encoded
    /// value, such as a Basic credential).
    pub fn new<'a>(secrets: impl IntoIterator<Item = &'a Secret>) -> Self {
        let mut v: Vec<Vec<u8>> = secrets
            .into_iter()
            .filter(|s| !s.0.is_empty())
            .flat_map(|s| encodings(s.0.as_bytes()))
            .collect();
        // Longest first, so a secret containing another is replaced whole.
        v.sort_by_key(|s| std::cmp::Reverse(s.len()));
        v.dedup();
        Redactor { secrets: v.into() }
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn bytes<'a>(&self, input: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out: Cow<'a, [u8]> = Cow::Borrowed(input);
        for s in self.secrets.iter() {
            if memmem::find(&out, s).is_some() {
                out = Cow::Owned(replace(&out, s));
            }
        }
        out
    }

    pub fn text<'a>(&self, input: &'a str) -> Cow<'a, str> {
        match self.bytes(input.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(input),
            // Replacing whole UTF-8 sequences with ASCII keeps it UTF-8; lossy is a no-op.
            Cow::Owned(b) => Cow::Owned(String::from_utf8_lossy(&b).into_owned()),
        }
    }

    /// A redactor for a body read in chunks, where a secret may be split between two.
    pub fn stream(&self) -> StreamRedactor {
        StreamRedactor {
            redactor: self.clone(),
            held: Vec::new(),
        }
    }
}

/// Shortest encoded form worth redacting besides the secret itself: shorter ones would match
/// ordinary text.
const MIN_ENCODED: usize = 8;

/// `secret` and the forms it takes when echoed back encoded.
fn encodings(secret: &[u8]) -> Vec<Vec<u8>> {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
    let mut out = vec![secret.to_vec()];
    let mut json = Vec::with_capacity(secret.len());
    let mut percent = Vec::with_capacity(secret.len());
    for &b in secret {
        match b {
            b'"' => json.extend_from_slice(b"\\\""),
            b'\\' => json.extend_from_slice(b"\\\\"),
            0..0x20 => json.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => json.push(b),
        }
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            percent.push(b);
        } else {
            percent.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    let form: String = url::form_urlencoded::byte_serialize(secret).collect();
    out.extend([json, percent, form.into_bytes()]);
    // In base64, a secret starting at byte offset k (mod 3) of the encoded value always encodes
    // to the same characters for the 3-byte groups it fills alone.
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for k in 0..3usize {
            let mut padded = vec![0u8; k];
            padded.extend_from_slice(secret);
            let full_groups = padded.len() / 3;
            let first = if k == 0 { 0 } else { 1 };
            if full_groups <= first {
                continue;
            }
            let encoded = engine.encode(&padded[..full_groups * 3]);
            out.push(encoded.as_bytes()[first * 4..].to_vec());
        }
    }
    out.retain(|e| e.as_slice() == secret || e.len() >= MIN_ENCODED);
    out
}

fn replace(input: &[u8], secret: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len());
    let mut rest = input;
    while let Some(i) = memmem::find(rest, secret) {
        out.extend_from_slice(&rest[..i]);
        out.extend_from_slice(REDACTED.as_bytes());
        rest = &rest[i + secret.len()..];
    }
    out.extend_from_slice(rest);
    out
}

/// Redacts a body chunk by chunk, holding back a chunk's tail while it could still be the
/// start of a secret that the next chunk completes.
#[derive(Debug)]
pub struct StreamRedactor {
    redactor: Redactor,
    held: Vec<u8>,
}

impl StreamRedactor {
    /// The redacted bytes of `chunk` that are safe to hand out now.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        if self.redactor.is_empty() {
            return chunk.to_vec();
        }
        let mut buf = std::mem::take(&mut self.held);
        buf.extend_from_slice(chunk);
        let mut buf = self.redactor.bytes(&buf).into_owned();
        let keep = self.partial_suffix(&buf);
        self.held = buf.split_off(buf.len() - keep);
        buf
    }

    /// What is still held at the end of the body: too short to be a secret.
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.held)
    }

    /// The length of the longest tail of `buf` that is a proper prefix of some secret.
    fn partial_suffix(&self, buf: &[u8]) -> usize {
        let mut best = 0;
        for s in self.redactor.secrets.iter() {
            let max = (s.len() - 1).min(buf.len());
            for n in (best + 1..=max).rev() {
                if buf[buf.len() - n..] == s[..n] {
                    best = n;
                    break;
                }
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted_in_every_encoding_they_echo_back_in() {
        use base64::Engine as _;
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let key = "sk-\"odd\"/key+=&%é\\end";
        let r = Redactor::new(&[Secret::new(key.into())]);
        let json = r#"sk-\"odd\"/key+=&%é\\end"#;
        let percent: String = key
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let form: String = url::form_urlencoded::byte_serialize(key.as_bytes()).collect();
        let mut echoes = vec![
            key.to_string(),
            json.to_string(),
            percent,
            form,
            STANDARD.encode(key),
            URL_SAFE.encode(key),
        ];
        // Inside a longer encoded value, at every alignment (a Basic credential, say).
        for user in ["a:", "ab:", "abc:"] {
            echoes.push(STANDARD.encode(format!("{user}{key}")));
        }
        for echo in echoes {
            let text = format!("error: the server said {echo} (bad key)");
            let out = r.text(&text);
            assert!(
                out.contains(REDACTED) && !out.contains(&echo),
                "{echo} -> {out}"
            );
        }
        // Ordinary text is left alone.
        assert_eq!(r.text("nothing secret here"), "nothing secret here");
    }

    fn redactor() -> Redactor {
        Redactor::new(&[
            Secret::new("sk-live-123456".into()),
            Secret::new("sk-live-123456-long".into()),
        ])
    }

    #[test]
    fn text_and_bytes_lose_their_secrets() {
        let r = redactor();
        assert_eq!(
            r.text("key sk-live-123456 and sk-live-123456-long."),
            "key [redacted] and [redacted]."
        );
        assert!(matches!(r.text("nothing here"), Cow::Borrowed(_)));
        assert_eq!(format!("{:?}", Secret::new("x".into())), REDACTED);
    }

    #[test]
    fn a_secret_split_across_chunks_is_still_redacted() {
        let body = b"{\"echo\": \"Bearer sk-live-123456\", \"n\": 1}";
        for split in 0..body.len() {
            for split2 in split..body.len() {
                let mut s = redactor().stream();
                let mut out = s.push(&body[..split]);
                out.extend(s.push(&body[split..split2]));
                out.extend(s.push(&body[split2..]));
                out.extend(s.finish());
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    "{\"echo\": \"Bearer [redacted]\", \"n\": 1}",
                    "split at {split}/{split2}"
                );
            }
        }
    }

    #[test]
    fn without_secrets_chunks_pass_through() {
        let mut s = Redactor::default().stream();
        assert_eq!(s.push(b"abc"), b"abc");
        assert!(s.finish().is_empty());
    }
}
