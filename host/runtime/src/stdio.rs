//! A plugin's stdout and stderr: captured, capped, and never a terminal.
//!
//! A plugin has no business writing to the user's terminal (it could forge rawko's own output),
//! so what it prints is kept in a bounded buffer and sent to the log after the call. Writes past
//! the cap are accepted and dropped, so a chatty plugin keeps working instead of trapping.

use std::sync::{Arc, Mutex};

use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// The bytes kept from one stream.
#[derive(Debug, Default)]
struct Captured {
    bytes: Vec<u8>,
    dropped: usize,
}

/// One capped capture buffer; clones share it.
#[derive(Debug, Clone)]
pub struct CappedPipe {
    cap: usize,
    inner: Arc<Mutex<Captured>>,
}

impl CappedPipe {
    pub fn new(cap: usize) -> Self {
        CappedPipe {
            cap,
            inner: Arc::default(),
        }
    }

    fn push(&self, bytes: &[u8]) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let room = self.cap.saturating_sub(c.bytes.len());
        let keep = bytes.len().min(room);
        c.bytes.extend_from_slice(&bytes[..keep]);
        c.dropped += bytes.len() - keep;
    }

    /// What was written, and how many bytes past the cap were dropped.
    pub fn take(&self) -> (Vec<u8>, usize) {
        let mut c = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        (std::mem::take(&mut c.bytes), std::mem::take(&mut c.dropped))
    }
}

impl IsTerminal for CappedPipe {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for CappedPipe {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for CappedPipe {
    async fn ready(&mut self) {}
}

impl OutputStream for CappedPipe {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.push(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        // Always room: what does not fit is dropped, not refused.
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for CappedPipe {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.push(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_the_cap_and_counts_the_rest() {
        let p = CappedPipe::new(5);
        p.push(b"abc");
        p.push(b"defgh");
        let (bytes, dropped) = p.take();
        assert_eq!(bytes, b"abcde");
        assert_eq!(dropped, 3);
        assert_eq!(p.take(), (Vec::new(), 0));
    }
}
