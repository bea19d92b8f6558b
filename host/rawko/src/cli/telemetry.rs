//! Traces over OpenTelemetry's protocol (OTLP, http/protobuf), configured the standard way:
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) turns export on,
//! `OTEL_EXPORTER_OTLP_HEADERS` and `OTEL_EXPORTER_OTLP_TIMEOUT` are read by the exporter,
//! `OTEL_SERVICE_NAME` names the service (`rawko` by default), and `OTEL_SDK_DISABLED=true`
//! turns it all off; or by the `otel:` section of the user's own config (a workspace's is
//! dropped), which the variables override. With nothing configured no exporter is built.
//!
//! What is exported are the engine's GenAI spans ([`rawko_fsm::telemetry`]), batched on a
//! thread of their own: a step never waits for the receiver, and a receiver that is down,
//! refusing or silent costs the run a warning and at most [`FLUSH`] at its end.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use opentelemetry::trace::{
    SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState, TracerProvider as _,
};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use rawko_capability::http::{Redactor, Secret};
use rawko_config::OtelConfig;
use rawko_fsm::telemetry::TraceLinks;
use tracing_opentelemetry::MetricsLayer;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::registry::LookupSpan;

/// The engine's view of the exporter set up in this process, if one was.
static LINKS: std::sync::OnceLock<Arc<OtelLinks>> = std::sync::OnceLock::new();

/// What the engine needs to store and link a task's traces, when they are exported.
pub fn links() -> Option<Arc<dyn TraceLinks>> {
    LINKS.get().map(|l| l.clone() as Arc<dyn TraceLinks>)
}

/// Where traces go in this process, for `rawko doctor`: the endpoint (credentials stripped) and
/// whether content is on, or null when they are off.
pub fn state() -> serde_json::Value {
    match (LINKS.get(), ENDPOINT.get()) {
        (Some(links), Some(endpoint)) => serde_json::json!({
            "endpoint": endpoint,
            "content": links.content.is_some(),
        }),
        _ => serde_json::Value::Null,
    }
}

/// The endpoint traces go to, as [`state`] shows it.
static ENDPOINT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The most characters of one content attribute (a prompt, a message list, a tool's output).
const MAX_CONTENT_CHARS: usize = 32 * 1024;

/// A span's place in its exported trace, as W3C trace context writes it; and, when the user
/// opted in to content, the redactor it goes through.
struct OtelLinks {
    content: Option<Redactor>,
}

/// Whether the user opted in to content in spans: the GenAI instrumentations' variable, else
/// `otel.content` in their config.
fn content_opted_in(config: Option<&OtelConfig>) -> bool {
    match var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
        Some(v) => v.trim().eq_ignore_ascii_case("true"),
        None => config.and_then(|c| c.content).unwrap_or(false),
    }
}

/// Every secret rawko can know of: the value of each environment variable the user's config
/// names as holding one (adapter keys, MCP servers' variables, trace headers), and of every
/// variable whose name says it holds one (`*_KEY`, `*TOKEN*`, `*SECRET*`, `*PASSWORD*`,
/// `*CREDENTIAL*`), in every encoding the adapters' redactor knows.
fn known_secrets(named: &[String]) -> Redactor {
    let secret_like = |name: &str| {
        let n = name.to_ascii_uppercase();
        n.ends_with("_KEY")
            || n == "KEY"
            || [
                "TOKEN",
                "SECRET",
                "PASSWORD",
                "PASSWD",
                "CREDENTIAL",
                "API_KEY",
            ]
            .iter()
            .any(|w| n.contains(w))
    };
    let secrets: Vec<Secret> = std::env::vars()
        .filter(|(k, _)| secret_like(k) || named.iter().any(|n| n == k))
        .map(|(_, v)| v)
        .filter(|v| v.len() >= 8)
        .map(Secret::new)
        .collect();
    Redactor::new(&secrets)
}

impl TraceLinks for OtelLinks {
    fn captures(&self) -> bool {
        self.content.is_some()
    }

    fn content(&self, text: &str) -> String {
        let Some(redactor) = &self.content else {
            return String::new();
        };
        let text = redactor.text(text);
        match text.char_indices().nth(MAX_CONTENT_CHARS) {
            Some((cut, _)) => format!("{}… [cut]", &text[..cut]),
            None => text.into_owned(),
        }
    }

    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        let cx = span.context();
        let sc = cx.span().span_context().clone();
        sc.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                sc.trace_id(),
                sc.span_id(),
                sc.trace_flags().to_u8()
            )
        })
    }

    fn link(&self, span: &tracing::Span, traceparent: &str) {
        let mut parts = traceparent.split('-');
        let (Some("00"), Some(trace), Some(id), Some(flags), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return;
        };
        let (Ok(trace), Ok(id), Ok(flags)) = (
            TraceId::from_hex(trace),
            SpanId::from_hex(id),
            u8::from_str_radix(flags, 16),
        ) else {
            return;
        };
        let first = SpanContext::new(
            trace,
            id,
            TraceFlags::new(flags),
            true,
            TraceState::default(),
        );
        if first.is_valid() {
            span.add_link(first);
        }
    }
}

/// The most the end of a run waits for its last spans to be sent.
pub const FLUSH: Duration = Duration::from_millis(1500);

/// A configured exporter, flushed by [`Telemetry::shutdown`].
pub struct Telemetry {
    provider: SdkTracerProvider,
    /// None when `OTEL_METRICS_EXPORTER=none` (a receiver that takes traces only).
    meters: Option<SdkMeterProvider>,
    /// Set when a batch could not be sent.
    failed: Arc<AtomicBool>,
    endpoint: String,
}

/// Why traces could not be set up as configured; the run goes on without them.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0}: rawko exports over http/protobuf only; traces are off"
    )]
    Protocol(String),
    #[error(
        "otel.headers.{name} names the environment variable {variable}, which is not set; traces \
         are off"
    )]
    Header { name: String, variable: String },
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

fn var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl Telemetry {
    /// The exporter the environment configures, and the layer that feeds it; none when no
    /// endpoint is set or the SDK is disabled.
    pub fn from_env<S>(
        config: Option<&OtelConfig>,
        named: &[String],
    ) -> Result<Option<(Telemetry, impl Layer<S>)>, TelemetryError>
    where
        S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    {
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let by_env = var("OTEL_EXPORTER_OTLP_ENDPOINT").is_some()
            || var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").is_some();
        // The config's endpoint, when no variable names one.
        let configured = match config.and_then(|c| c.endpoint.as_deref()) {
            Some(e) if !by_env => Some(e.trim_end_matches('/')),
            _ => None,
        };
        if !by_env && configured.is_none() {
            return Ok(None);
        }
        let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .unwrap_or_else(|| "http/protobuf".into());
        if protocol.trim() != "http/protobuf" {
            return Err(TelemetryError::Protocol(protocol));
        }
        // An https endpoint needs the TLS provider every client of rawko uses.
        rawko_capability::tls::install_provider();
        let mut headers = std::collections::HashMap::new();
        if configured.is_some() {
            for (name, variable) in config.map(|c| &c.headers).into_iter().flatten() {
                let value = var(variable).ok_or_else(|| TelemetryError::Header {
                    name: name.clone(),
                    variable: variable.clone(),
                })?;
                headers.insert(name.clone(), value);
            }
        }
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        let mut metrics = opentelemetry_otlp::MetricExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary);
        if let Some(base) = configured {
            builder = builder
                .with_endpoint(format!("{base}/v1/traces"))
                .with_headers(headers.clone());
            metrics = metrics
                .with_endpoint(format!("{base}/v1/metrics"))
                .with_headers(headers);
        }
        let exporter = Noted {
            inner: builder.build()?,
            failed: Arc::new(AtomicBool::new(false)),
        };
        let failed = exporter.failed.clone();
        let endpoint = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .or_else(|| configured.map(String::from))
            .map(|e| rawko_text::line(&redact_url(&e), 200).into_owned())
            .unwrap_or_default();
        let resource = if var("OTEL_SERVICE_NAME").is_some() {
            Resource::builder().build()
        } else {
            Resource::builder().with_service_name("rawko").build()
        };
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource.clone())
            .build();
        // The token usage and duration histograms: collected in memory, sent when rawko exits
        // (and every minute of a long run); off with the standard `OTEL_METRICS_EXPORTER=none`.
        let meters = match var("OTEL_METRICS_EXPORTER") {
            Some(v) if v.trim() == "none" => None,
            _ => Some(
                SdkMeterProvider::builder()
                    .with_reader(PeriodicReader::builder(metrics.build()?).build())
                    .with_resource(resource)
                    .build(),
            ),
        };
        let tracer = provider.tracer("rawko");
        let _ = ENDPOINT.set(endpoint.clone());
        let _ = LINKS.set(Arc::new(OtelLinks {
            content: content_opted_in(config).then(|| known_secrets(named)),
        }));
        // An HTTP MCP server whose config asks for it gets each call's place in the trace.
        rawko_mcp::client::set_trace_context(|| {
            LINKS
                .get()
                .and_then(|l| l.traceparent(&tracing::Span::current()))
        });
        // Only the conventions' attributes and rawko's own: no source locations, threads, busy
        // and idle times, or tracing's target and level.
        let spans = tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_location(false)
            .with_threads(false)
            .with_tracked_inactivity(false)
            .with_target(false)
            .with_level(false)
            .with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(rawko_fsm::telemetry::TARGET, tracing::Level::INFO)
                    .with_target(rawko_fsm::telemetry::METRICS, LevelFilter::OFF),
            );
        let histograms = meters.clone().map(|meters| {
            MetricsLayer::new(meters).with_filter(
                tracing_subscriber::filter::Targets::new()
                    .with_target(rawko_fsm::telemetry::METRICS, tracing::Level::INFO),
            )
        });
        Ok(Some((
            Telemetry {
                provider,
                meters,
                failed,
                endpoint,
            },
            spans.and_then(histograms),
        )))
    }

    /// Send what is left, waiting at most [`FLUSH`] for both, and say once if any of it was
    /// not sent. A receiver that does not answer keeps the senders' threads, not rawko: it
    /// exits when the time is up.
    pub fn shutdown(self) {
        let (done, finished) = std::sync::mpsc::channel();
        let provider = self.provider;
        type Flush = Box<dyn FnOnce() -> bool + Send>;
        let mut flushes: Vec<(&str, Flush)> = vec![(
            "traces",
            Box::new(move || provider.shutdown_with_timeout(FLUSH).is_ok()),
        )];
        if let Some(meters) = self.meters {
            flushes.push((
                "metrics",
                Box::new(move || meters.shutdown_with_timeout(FLUSH).is_ok()),
            ));
        }
        let waiting = flushes.len();
        for (what, flush) in flushes {
            let done = done.clone();
            std::thread::spawn(move || {
                let _ = done.send((what, flush()));
            });
        }
        let deadline = std::time::Instant::now() + FLUSH;
        let (mut traces, mut metrics) = (false, waiting < 2);
        for _ in 0..waiting {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match finished.recv_timeout(left) {
                Ok(("traces", ok)) => traces = ok,
                Ok((_, ok)) => metrics = ok,
                Err(_) => break,
            }
        }
        if !traces || self.failed.load(Ordering::Relaxed) {
            eprintln!(
                "warning: not every trace was sent to {}; the task is not affected",
                self.endpoint
            );
        }
        if !metrics {
            eprintln!(
                "warning: {} did not take rawko's metrics (OTEL_METRICS_EXPORTER=none turns them \
                 off); the task is not affected",
                self.endpoint
            );
        }
    }
}

/// The OTLP exporter, noting whether a batch failed (the SDK itself says nothing).
#[derive(Debug)]
struct Noted<E> {
    inner: E,
    failed: Arc<AtomicBool>,
}

impl<E: SpanExporter> SpanExporter for Noted<E> {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let result = self.inner.export(batch).await;
        if result.is_err() {
            self.failed.store(true, Ordering::Relaxed);
        }
        result
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.inner.set_resource(resource);
    }
}

/// `url` without its user name and password, which a warning must not print.
fn redact_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
            let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
            format!("{scheme}://{host}{path}")
        }
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_in_the_endpoint_are_not_printed() {
        assert_eq!(
            super::redact_url("https://user:secret@otel.example:4318/v1/traces"),
            "https://otel.example:4318/v1/traces"
        );
        assert_eq!(
            super::redact_url("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318"
        );
    }
}
