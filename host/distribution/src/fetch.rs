//! Downloading plugins over HTTPS: one client with sane limits, a progress bar on a terminal, and
//! a size cap.
//!
//! Plain `http` is accepted only for loopback addresses (a registry or file server on this
//! machine, as in tests); anywhere else a plugin, its signature or a registry token travels over
//! TLS, and a redirect from HTTPS down to HTTP is refused.

use std::io::IsTerminal;
use std::time::Duration;

use reqwest::Url;

pub use crate::{MAX_DOC_BYTES, MAX_PLUGIN_BYTES};

#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error(
        "{url}: plain http is only allowed to this machine (127.0.0.1, ::1, localhost); use https"
    )]
    Insecure { url: String },
    #[error("{url}: {message}")]
    Http { url: String, message: String },
    #[error("{url}: the server answered {status}{hint}")]
    Status {
        url: String,
        status: u16,
        hint: String,
    },
    #[error("{url}: larger than the {limit} bytes allowed")]
    TooLarge { url: String, limit: u64 },
    #[error("{url}: the transfer ended after {got} of {expected} bytes")]
    Truncated {
        url: String,
        got: u64,
        expected: u64,
    },
    #[error("{0}")]
    Other(String),
}

/// Whether `url`'s host is this machine.
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Refuse `url` unless it is https, or http to this machine.
pub fn check_scheme(url: &Url) -> Result<(), FetchError> {
    match url.scheme() {
        "https" => Ok(()),
        "http" if is_loopback(url) => Ok(()),
        _ => Err(FetchError::Insecure {
            url: url.to_string(),
        }),
    }
}

/// The HTTP client for plugin downloads and registries.
pub fn client() -> Result<reqwest::Client, FetchError> {
    rawko_capability::tls::install_provider();
    reqwest::Client::builder()
        .user_agent(concat!("rawko/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(Duration::from_secs(30))
        // Per read, so a stalled transfer ends while a slow one carries on.
        .read_timeout(Duration::from_secs(60))
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            if attempt.previous().len() >= 10 {
                attempt.error("more than 10 redirects")
            } else if check_scheme(attempt.url()).is_err() {
                let to = attempt.url().to_string();
                attempt.error(format!("refusing a redirect to {to}"))
            } else {
                attempt.follow()
            }
        }))
        .build()
        .map_err(|e| FetchError::Other(format!("cannot start the HTTP client: {e}")))
}

/// Describe a reqwest error with its causes, which hold the useful part; a certificate that did
/// not verify in plain words (the caller puts the URL first).
pub fn describe(e: &reqwest::Error) -> String {
    if let Some(why) = rawko_capability::tls::untrusted_certificate(e) {
        return format!("the server's certificate is not trusted: {why}");
    }
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// Read `resp`'s body, at most `limit` bytes, with a progress bar named `label` when stderr is a
/// terminal. A body shorter than its `Content-Length` is an error, never a short plugin.
pub async fn read_body(
    mut resp: reqwest::Response,
    limit: u64,
    label: Option<&str>,
) -> Result<Vec<u8>, FetchError> {
    let url = resp.url().to_string();
    let expected = resp.content_length();
    if let Some(len) = expected
        && len > limit
    {
        return Err(FetchError::TooLarge { url, limit });
    }
    let bar = label
        .filter(|_| std::io::stderr().is_terminal())
        .map(|label| {
            let bar = match expected {
                Some(len) => indicatif::ProgressBar::new(len),
                None => indicatif::ProgressBar::no_length(),
            };
            bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            if let Ok(style) = indicatif::ProgressStyle::with_template(
                "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec}",
            ) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar.set_message(label.to_string());
            bar
        });
    let mut body = Vec::with_capacity(expected.unwrap_or(0).min(limit) as usize);
    let result = loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() as u64 + chunk.len() as u64 > limit {
                    break Err(FetchError::TooLarge { url, limit });
                }
                body.extend_from_slice(&chunk);
                if let Some(bar) = &bar {
                    bar.set_position(body.len() as u64);
                }
            }
            Ok(None) => break Ok(()),
            Err(e) => {
                break Err(FetchError::Http {
                    url,
                    message: format!(
                        "the transfer failed after {} bytes: {}",
                        body.len(),
                        describe(&e)
                    ),
                });
            }
        }
    };
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    result?;
    if let Some(len) = expected
        && body.len() as u64 != len
    {
        return Err(FetchError::Truncated {
            url: resp.url().to_string(),
            got: body.len() as u64,
            expected: len,
        });
    }
    Ok(body)
}

/// GET `url` and read its body (up to `limit` bytes). When `optional`, a client error (404, or
/// the 403 that object stores answer for a missing file) is `Ok(None)`.
pub async fn get(
    client: &reqwest::Client,
    url: &Url,
    limit: u64,
    label: Option<&str>,
    optional: bool,
) -> Result<Option<Vec<u8>>, FetchError> {
    check_scheme(url)?;
    let resp = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| FetchError::Http {
            url: url.to_string(),
            message: describe(&e),
        })?;
    let status = resp.status();
    if optional && status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            hint: String::new(),
        });
    }
    read_body(resp, limit, label).await.map(Some)
}
