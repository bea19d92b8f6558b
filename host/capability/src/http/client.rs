//! The HTTP client behind the `http` capability: grant checks, credentials, redirects,
//! retries, deadlines and size caps, for one adapter instance.
//!
//! One client (and one connection pool) serves every call of an adapter instance, so a model
//! conversation reuses its connection. What each request may do is decided here, never by the
//! plugin: the URL and every redirect target must be granted, the addresses a name resolves to
//! are checked ([`super::resolve`]), the credential is added only for the origin it was granted
//! for, and anything a response echoes of it is redacted before the plugin reads it.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode, Url};

use super::grant::{HttpGrant, Origin};
use super::resolve::{AddressDenied, CheckedResolver};
use super::secret::{Redactor, Secret, StreamRedactor};

/// Limits and timing of one adapter instance's requests.
#[derive(Debug, Clone)]
pub struct HttpPolicy {
    /// Time to establish a connection (TCP and TLS).
    pub connect_timeout: Duration,
    /// Time for one request, from connecting to the end of the body.
    pub timeout: Duration,
    /// Retries after a connection error, a 429 or a 5xx; the attempts are one more.
    pub max_retries: u32,
    /// The first backoff; each retry doubles it, up to `backoff_max`, with jitter.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// The most time spent waiting between attempts of one request, `Retry-After` included. A
    /// server asking for a longer wait gets its error passed on instead.
    pub retry_window: Duration,
    /// The largest response body, in bytes.
    pub max_body: u64,
    /// The largest request body, in bytes.
    pub max_request_body: usize,
    pub max_redirects: u32,
    /// Requests one plugin call may make; a completion needs one.
    pub max_requests_per_call: u32,
    /// Responses one plugin call may hold open at once.
    pub max_open_responses: u32,
}

impl Default for HttpPolicy {
    fn default() -> Self {
        HttpPolicy {
            connect_timeout: Duration::from_secs(10),
            timeout: Duration::from_secs(300),
            max_retries: 3,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            retry_window: Duration::from_secs(60),
            max_body: 16 << 20,
            max_request_body: 32 << 20,
            max_redirects: 5,
            max_requests_per_call: 16,
            max_open_responses: 4,
        }
    }
}

/// How a credential is put on a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CredentialScheme {
    /// `Authorization: Bearer <secret>` (OpenAI and compatible servers).
    Bearer,
    /// The secret as the value of this header (`x-api-key` for Anthropic).
    Header(HeaderName),
}

impl CredentialScheme {
    pub fn header_name(&self) -> HeaderName {
        match self {
            CredentialScheme::Bearer => reqwest::header::AUTHORIZATION,
            CredentialScheme::Header(h) => h.clone(),
        }
    }
}

/// A secret the host adds to requests for one origin.
#[derive(Debug, Clone)]
pub struct Credential {
    pub origin: Origin,
    pub scheme: CredentialScheme,
    pub secret: Secret,
}

/// Why a request failed; each becomes the WIT `http-error` of the same name. Messages never
/// hold a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("denied: {0}")]
    Denied(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("timed out")]
    Timeout,
    #[error("the response is larger than the {0}-byte limit")]
    TooLarge(u64),
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// Counters over the life of a client, for `rawko ask --json`, tests and the audit log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Requests the plugin sent.
    pub requests: u64,
    /// Attempts made on the wire, retries included.
    pub attempts: u64,
    pub retries: u64,
    pub redirects: u64,
    /// Requests refused by the grant.
    pub denied: u64,
}

#[derive(Debug, Default)]
struct Counters {
    requests: AtomicU64,
    attempts: AtomicU64,
    retries: AtomicU64,
    redirects: AtomicU64,
    denied: AtomicU64,
}

/// A request as the plugin asked for it.
#[derive(Debug, Clone)]
pub struct Outgoing {
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    pub timeout: Option<Duration>,
}

/// The client of one adapter instance.
pub struct HttpClient {
    client: reqwest::Client,
    grant: Arc<HttpGrant>,
    credentials: Vec<Credential>,
    policy: HttpPolicy,
    redactor: Redactor,
    counters: Arc<Counters>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("grant", &self.grant.describe())
            .field("credentials", &self.credentials.len())
            .finish_non_exhaustive()
    }
}

/// Headers the host sets itself or that only make sense hop by hop.
const MANAGED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "proxy-authorization",
    "proxy-connection",
    "cookie",
];

/// Why an HTTP client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error("a credential for {0} whose origin is not granted")]
    UngrantedCredential(Origin),
    #[error("cannot set up the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
}

impl HttpClient {
    /// A client admitting `grant`, adding `credentials`. `fixed_hosts` answers name lookups
    /// before DNS does (like a hosts file; tests use it), and is still checked against the grant.
    pub fn new(
        grant: HttpGrant,
        credentials: Vec<Credential>,
        policy: HttpPolicy,
        fixed_hosts: HashMap<String, Vec<IpAddr>>,
    ) -> Result<HttpClient, SetupError> {
        for c in &credentials {
            if !grant.entries().iter().any(|e| e.origin == c.origin) {
                return Err(SetupError::UngrantedCredential(c.origin.clone()));
            }
        }
        let grant = Arc::new(grant);
        crate::tls::install_provider();
        let client = reqwest::Client::builder()
            .dns_resolver(CheckedResolver::new(grant.clone(), fixed_hosts))
            // Redirects are followed here, one grant check per hop.
            .redirect(reqwest::redirect::Policy::none())
            // A proxy would connect for us, past the address checks.
            .no_proxy()
            .retry(reqwest::retry::never())
            .connect_timeout(policy.connect_timeout)
            .pool_idle_timeout(Duration::from_secs(60))
            .tcp_nodelay(true)
            .user_agent(concat!("rawko/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(SetupError::Client)?;
        let redactor = Redactor::new(credentials.iter().map(|c| &c.secret));
        Ok(HttpClient {
            client,
            grant,
            credentials,
            policy,
            redactor,
            counters: Arc::default(),
        })
    }

    pub fn policy(&self) -> &HttpPolicy {
        &self.policy
    }

    pub fn grant(&self) -> &HttpGrant {
        &self.grant
    }

    /// Redacts this client's secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    pub fn stats(&self) -> HttpStats {
        let c = &self.counters;
        HttpStats {
            requests: c.requests.load(Ordering::Relaxed),
            attempts: c.attempts.load(Ordering::Relaxed),
            retries: c.retries.load(Ordering::Relaxed),
            redirects: c.redirects.load(Ordering::Relaxed),
            denied: c.denied.load(Ordering::Relaxed),
        }
    }

    /// Send `req`: check it against the grant, follow redirects within the grant, retry what is
    /// worth retrying, and return the response head with its body still to read.
    pub async fn send(&self, req: Outgoing) -> Result<Incoming, HttpError> {
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let result = self.send_inner(req).await;
        if let Err(HttpError::Denied(m)) = &result {
            self.counters.denied.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(target: "rawko::http", "request denied: {m}");
        }
        result
    }

    async fn send_inner(&self, req: Outgoing) -> Result<Incoming, HttpError> {
        let started = Instant::now();
        let timeout = req
            .timeout
            .map_or(self.policy.timeout, |t| t.min(self.policy.timeout));
        if req.body.len() > self.policy.max_request_body {
            return Err(HttpError::InvalidRequest(format!(
                "the request body is {} bytes; the limit is {}",
                req.body.len(),
                self.policy.max_request_body
            )));
        }
        let mut url = Url::parse(&req.url)
            .map_err(|e| HttpError::InvalidRequest(format!("{:?} is not a URL: {e}", req.url)))?;
        let headers = self.plugin_headers(&req.headers)?;
        let mut method = req.method;
        let mut body = req.body;
        let mut redirects = 0;
        loop {
            self.grant
                .check_url(&url)
                .map_err(|d| HttpError::Denied(self.redactor.text(&d.to_string()).into_owned()))?;
            let (resp, deadline) = self
                .with_retries(&method, &url, &headers, &body, timeout, started)
                .await?;
            let status = resp.status();
            let location = resp
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string);
            let Some(location) = location.filter(|_| status.is_redirection()) else {
                return Ok(self.incoming(resp, deadline));
            };
            if redirects >= self.policy.max_redirects {
                return Err(HttpError::Protocol(format!(
                    "more than {} redirects",
                    self.policy.max_redirects
                )));
            }
            redirects += 1;
            self.counters.redirects.fetch_add(1, Ordering::Relaxed);
            let next = url.join(&location).map_err(|e| {
                HttpError::Protocol(format!("redirect to an invalid location {location:?}: {e}"))
            })?;
            if let Err(d) = self.grant.check_url(&next) {
                return Err(HttpError::Denied(format!(
                    "redirect from {} to {}: {}",
                    Origin::of(&url).map(|o| o.to_string()).unwrap_or_default(),
                    self.redactor.text(next.as_str()),
                    self.redactor.text(&d.to_string())
                )));
            }
            // As browsers do: 303, and 301/302 after anything but GET or HEAD, become a GET
            // without a body; 307 and 308 repeat the request as it was.
            if status == StatusCode::SEE_OTHER
                || (matches!(status.as_u16(), 301 | 302) && method != Method::HEAD)
            {
                if method != Method::HEAD {
                    method = Method::GET;
                }
                body = Bytes::new();
            }
            url = next;
        }
    }

    /// The plugin's headers, minus those the host manages and any it may not set.
    fn plugin_headers(&self, headers: &[(String, String)]) -> Result<HeaderMap, HttpError> {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                HttpError::InvalidRequest(format!("{name:?} is not a valid header name"))
            })?;
            let value = HeaderValue::from_str(value).map_err(|_| {
                HttpError::InvalidRequest(format!("the value of header {name} is not valid"))
            })?;
            if MANAGED_HEADERS.contains(&name.as_str()) {
                continue;
            }
            map.append(name, value);
        }
        Ok(map)
    }

    /// One request on the wire to `url`, retried after connection errors, 429 and 5xx.
    async fn with_retries(
        &self,
        method: &Method,
        url: &Url,
        headers: &HeaderMap,
        body: &Bytes,
        timeout: Duration,
        started: Instant,
    ) -> Result<(reqwest::Response, Instant), HttpError> {
        let origin = Origin::of(url).map_err(|d| HttpError::Denied(d.to_string()))?;
        let credential = self.credentials.iter().find(|c| c.origin == origin);
        let mut waited = Duration::ZERO;
        let mut retry = 0;
        loop {
            self.counters.attempts.fetch_add(1, Ordering::Relaxed);
            let mut headers = headers.clone();
            if let Some(c) = credential {
                let name = c.scheme.header_name();
                headers.remove(&name);
                let value = match &c.scheme {
                    CredentialScheme::Bearer => format!("Bearer {}", c.secret.expose()),
                    CredentialScheme::Header(_) => c.secret.expose().to_string(),
                };
                let mut value = HeaderValue::from_str(&value).map_err(|_| {
                    HttpError::InvalidRequest("the credential is not a valid header value".into())
                })?;
                value.set_sensitive(true);
                headers.insert(name, value);
            }
            // One request's deadline covers its body too; reading goes on after this returns.
            let left = timeout.saturating_sub(started.elapsed().saturating_sub(waited));
            let deadline = Instant::now() + left;
            let result = self
                .client
                .request(method.clone(), url.clone())
                .headers(headers)
                .body(body.clone())
                .timeout(left)
                .send()
                .await;
            let wait = match result {
                Ok(resp) if retryable_status(resp.status()) => {
                    match self.backoff(retry, retry_after(resp.headers()), waited) {
                        Some(wait) => {
                            tracing::debug!(
                                target: "rawko::http",
                                status = resp.status().as_u16(),
                                retry = retry + 1,
                                wait_ms = wait.as_millis() as u64,
                                "retrying"
                            );
                            wait
                        }
                        // Out of retries or of patience: the plugin gets the status.
                        None => return Ok((resp, deadline)),
                    }
                }
                Ok(resp) => return Ok((resp, deadline)),
                Err(e) => {
                    // A certificate that did not verify will not verify on a retry either.
                    let untrusted = crate::tls::untrusted_certificate(&e).is_some();
                    let e = self.classify(e);
                    let HttpError::Connect(m) = &e else {
                        return Err(e);
                    };
                    if untrusted {
                        return Err(e);
                    }
                    match self.backoff(retry, None, waited) {
                        Some(wait) => {
                            tracing::debug!(
                                target: "rawko::http",
                                retry = retry + 1,
                                "retrying after a connection error: {m}"
                            );
                            wait
                        }
                        None => {
                            return Err(HttpError::Connect(format!(
                                "{m} (after {} attempts)",
                                retry + 1
                            )));
                        }
                    }
                }
            };
            tokio::time::sleep(wait).await;
            waited += wait;
            retry += 1;
            self.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// How long to wait before retry `retry + 1`, or `None` to stop: out of retries, or the
    /// wait would overrun the retry window.
    fn backoff(&self, retry: u32, asked: Option<Duration>, waited: Duration) -> Option<Duration> {
        if retry >= self.policy.max_retries {
            return None;
        }
        let exp = self
            .policy
            .backoff_base
            .saturating_mul(1 << retry.min(16))
            .min(self.policy.backoff_max);
        // Equal jitter: half fixed, half random, so clients retrying together spread out.
        let jittered = exp / 2 + exp.mul_f64(jitter() / 2.0);
        let wait = asked.unwrap_or(jittered);
        (waited + wait <= self.policy.retry_window).then_some(wait)
    }

    fn classify(&self, e: reqwest::Error) -> HttpError {
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(s) = source {
            if let Some(AddressDenied(d)) = s.downcast_ref::<AddressDenied>() {
                return HttpError::Denied(d.to_string());
            }
            source = s.source();
        }
        if let Some(why) = crate::tls::untrusted_certificate(&e) {
            let host = e.url().map(authority).unwrap_or_default();
            return HttpError::Connect(format!(
                "{host}: the server's certificate is not trusted: {why}"
            ));
        }
        let message = self.redactor.text(&error_text(&e)).into_owned();
        if e.is_timeout() {
            HttpError::Timeout
        } else if e.is_connect() {
            HttpError::Connect(message)
        } else if e.is_builder() {
            HttpError::InvalidRequest(message)
        } else {
            HttpError::Protocol(message)
        }
    }

    fn incoming(&self, resp: reqwest::Response, deadline: Instant) -> Incoming {
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes());
                (k.as_str().to_string(), self.redactor.text(&v).into_owned())
            })
            .collect();
        Incoming {
            status: resp.status().as_u16(),
            headers,
            body: Body {
                declared: resp.content_length(),
                response: Some(resp),
                read: 0,
                cap: self.policy.max_body,
                redactor: self.redactor.stream(),
                deadline,
                pending_tail: Vec::new(),
            },
        }
    }
}

/// `host:port` of `url`.
fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_string(),
    }
}

/// The error and its causes, on one line.
fn error_text(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

fn retryable_status(s: StatusCode) -> bool {
    s == StatusCode::TOO_MANY_REQUESTS
        || (s.is_server_error()
            && s != StatusCode::NOT_IMPLEMENTED
            && s != StatusCode::HTTP_VERSION_NOT_SUPPORTED)
}

/// The wait a response asks for: `retry-after-ms` (OpenAI), or `Retry-After` in seconds or as
/// an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let v = get("retry-after")?;
    if let Ok(secs) = v.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(
        at.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// A number in [0, 1) that differs between calls; jitter needs no better randomness.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    // Each `RandomState` is seeded afresh; hashing nothing still gives a new number.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u8(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A response head, with its body still to read.
#[derive(Debug)]
pub struct Incoming {
    pub status: u16,
    /// Names lowercase, values with secrets redacted.
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// A response body, read under the request's deadline and the size cap, redacted as it goes.
#[derive(Debug)]
pub struct Body {
    response: Option<reqwest::Response>,
    declared: Option<u64>,
    read: u64,
    cap: u64,
    redactor: StreamRedactor,
    deadline: Instant,
    /// Redacted bytes released at the end of the body.
    pending_tail: Vec<u8>,
}

impl Body {
    /// The next part of the body, `None` at its end.
    pub async fn next(&mut self) -> Result<Option<Vec<u8>>, HttpError> {
        loop {
            let Some(resp) = self.response.as_mut() else {
                if self.pending_tail.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(std::mem::take(&mut self.pending_tail)));
            };
            if let Some(n) = self.declared
                && n > self.cap
            {
                self.response = None;
                return Err(HttpError::TooLarge(self.cap));
            }
            let chunk = tokio::time::timeout_at(self.deadline.into(), resp.chunk()).await;
            let chunk = match chunk {
                Err(_) => {
                    self.response = None;
                    return Err(HttpError::Timeout);
                }
                Ok(Err(e)) => {
                    self.response = None;
                    return Err(if e.is_timeout() {
                        HttpError::Timeout
                    } else {
                        HttpError::Protocol(format!(
                            "the connection broke mid-response: {}",
                            error_text(&e)
                        ))
                    });
                }
                Ok(Ok(c)) => c,
            };
            match chunk {
                Some(c) => {
                    self.read += c.len() as u64;
                    if self.read > self.cap {
                        self.response = None;
                        return Err(HttpError::TooLarge(self.cap));
                    }
                    let out = self.redactor.push(&c);
                    if !out.is_empty() {
                        return Ok(Some(out));
                    }
                }
                None => {
                    self.response = None;
                    self.pending_tail = self.redactor.finish();
                }
            }
        }
    }

    /// The rest of the body.
    pub async fn all(&mut self) -> Result<Vec<u8>, HttpError> {
        let mut out = Vec::new();
        while let Some(c) = self.next().await? {
            out.extend_from_slice(&c);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_every_form() {
        let h = |k: &str, v: &str| {
            let mut m = HeaderMap::new();
            m.insert(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
            m
        };
        assert_eq!(
            retry_after(&h("retry-after", "2")),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&h("retry-after-ms", "150")),
            Some(Duration::from_millis(150))
        );
        assert_eq!(
            retry_after(&h("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")),
            Some(Duration::ZERO)
        );
        assert_eq!(
            httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").ok(),
            Some(std::time::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(retry_after(&h("retry-after", "soon")), None);
    }

    #[test]
    fn only_overload_and_server_errors_are_retried() {
        for (s, retry) in [
            (429, true),
            (500, true),
            (503, true),
            (529, true),
            (501, false),
            (400, false),
            (401, false),
            (200, false),
        ] {
            assert_eq!(
                retryable_status(StatusCode::from_u16(s).unwrap()),
                retry,
                "{s}"
            );
        }
    }

    #[test]
    fn backoff_grows_is_bounded_and_respects_the_window() {
        let client = HttpClient::new(
            HttpGrant::none(),
            vec![],
            HttpPolicy {
                backoff_base: Duration::from_millis(100),
                backoff_max: Duration::from_millis(400),
                retry_window: Duration::from_secs(1),
                ..HttpPolicy::default()
            },
            HashMap::new(),
        )
        .unwrap();
        let w0 = client.backoff(0, None, Duration::ZERO).unwrap();
        assert!(
            (Duration::from_millis(50)..=Duration::from_millis(100)).contains(&w0),
            "{w0:?}"
        );
        let w2 = client.backoff(2, None, Duration::ZERO).unwrap();
        assert!(
            (Duration::from_millis(200)..=Duration::from_millis(400)).contains(&w2),
            "{w2:?}"
        );
        assert_eq!(
            client.backoff(3, None, Duration::ZERO),
            None,
            "out of retries"
        );
        assert_eq!(
            client.backoff(0, Some(Duration::from_millis(700)), Duration::ZERO),
            Some(Duration::from_millis(700)),
            "Retry-After is honoured"
        );
        assert_eq!(
            client.backoff(0, Some(Duration::from_secs(5)), Duration::ZERO),
            None,
            "a wait past the window is not"
        );
    }
}
