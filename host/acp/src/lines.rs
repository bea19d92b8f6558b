//! Newline-delimited JSON-RPC over a pair of byte streams, with a bound on one message: a peer
//! that never ends its line cannot make rawko buffer without end.

use agent_client_protocol::Lines;
use futures::{Sink, Stream};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

/// The most bytes one message may have (8 MiB): far above any file an agent reads through
/// rawko (those are capped lower), far below what would hurt.
pub const MAX_MESSAGE: usize = 8 << 20;

/// How the incoming side of a transport ended.
#[derive(Debug, Clone, Default)]
pub struct Ended {
    /// Why reading failed, when it did (a message past the bound, bytes that are not UTF-8).
    pub failed: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    /// Notified once the incoming side has ended, for whatever reason.
    pub closed: std::sync::Arc<tokio::sync::Notify>,
}

/// The transport for one peer: lines read from `incoming` (each at most `max` bytes; a longer
/// one ends the connection) and written to `outgoing`; `ended` learns when and why the
/// incoming side ended.
pub fn transport<R, W>(
    incoming: R,
    outgoing: W,
    max: usize,
    ended: Ended,
) -> Lines<
    impl Sink<String, Error = std::io::Error> + Send + 'static,
    impl Stream<Item = std::io::Result<String>> + Send + 'static,
>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let reader = BufReader::with_capacity(64 << 10, incoming);
    let lines = futures::stream::unfold(Some(reader), move |state| {
        let ended = ended.clone();
        async move {
            let Some(mut reader) = state else {
                ended.closed.notify_one();
                return None;
            };
            match read_line(&mut reader, max).await {
                Ok(Some(line)) => Some((Ok(line), Some(reader))),
                Ok(None) => {
                    ended.closed.notify_one();
                    None
                }
                Err(e) => {
                    if let Ok(mut f) = ended.failed.lock() {
                        *f = Some(e.to_string());
                    }
                    Some((Err(e), None))
                }
            }
        }
    });
    let sink = futures::sink::unfold(outgoing, |mut w, line: String| async move {
        w.write_all(line.as_bytes()).await?;
        w.write_all(b"\n").await?;
        w.flush().await?;
        Ok::<_, std::io::Error>(w)
    });
    Lines::new(Box::pin(sink), Box::pin(lines))
}

/// The next non-empty line without its end, `None` at the end of the stream; an error for a
/// line past `max` bytes or one that is not UTF-8. Every message a peer sends is read here.
pub async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    max: usize,
) -> std::io::Result<Option<String>> {
    loop {
        let mut line = Vec::new();
        loop {
            let buf = reader.fill_buf().await?;
            if buf.is_empty() {
                if line.is_empty() {
                    return Ok(None);
                }
                break;
            }
            let (take, done) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            if line.len() + take > max + 1 {
                return Err(std::io::Error::other(format!(
                    "the peer sent a message longer than {max} bytes"
                )));
            }
            line.extend_from_slice(&buf[..take]);
            reader.consume(take);
            if done {
                break;
            }
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        return String::from_utf8(line)
            .map(Some)
            .map_err(|_| std::io::Error::other("the peer sent a message that is not UTF-8"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_past_the_cap_end_the_stream_with_an_error() {
        let text = b"{\"a\":1}\r\n\n  \n{\"b\":2}\n".to_vec();
        let mut r = BufReader::new(&text[..]);
        assert_eq!(read_line(&mut r, 64).await.unwrap().unwrap(), "{\"a\":1}");
        assert_eq!(read_line(&mut r, 64).await.unwrap().unwrap(), "{\"b\":2}");
        assert!(read_line(&mut r, 64).await.unwrap().is_none());

        let long = [b'x'; 200];
        let mut r = BufReader::with_capacity(16, &long[..]);
        let e = read_line(&mut r, 100).await.unwrap_err();
        assert!(e.to_string().contains("longer than 100 bytes"), "{e}");
    }
}
