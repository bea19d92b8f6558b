//! An OTLP/HTTP trace receiver on loopback: it takes `POST /v1/traces` (http/protobuf), decodes
//! each request with OpenTelemetry's own protocol definitions (`opentelemetry-proto`), answers
//! 200, and keeps the requests' raw bodies and their spans for the test to read.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::metric;
use prost::Message as _;

/// One span as received, with its attributes as strings.
#[derive(Debug, Clone)]
pub struct Span {
    pub name: String,
    pub trace_id: Vec<u8>,
    pub span_id: Vec<u8>,
    pub parent: Vec<u8>,
    pub kind: i32,
    pub status_code: i32,
    pub start: u64,
    pub attributes: Vec<(String, String)>,
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Span {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// One histogram data point as received: the metric's name, the point's attributes, and how
/// many values it holds and their sum.
#[derive(Debug, Clone)]
pub struct Point {
    pub metric: String,
    pub attributes: Vec<(String, String)>,
    pub count: u64,
    pub sum: f64,
}

impl Point {
    pub fn attr(&self, key: &str) -> Option<&str> {
        self.attributes
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Received {
    points: Vec<Point>,
    bodies: Vec<Vec<u8>>,
    headers: Vec<String>,
    spans: Vec<Span>,
    service: Vec<String>,
}

/// The receiver; it stops with the test process.
pub struct Receiver {
    port: u16,
    got: Arc<Mutex<Received>>,
}

fn text(v: &Option<AnyValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn pairs(kv: &[KeyValue]) -> Vec<(String, String)> {
    kv.iter()
        .map(|kv| (kv.key.clone(), text(&kv.value)))
        .collect()
}

impl Receiver {
    pub fn start() -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let got = Arc::new(Mutex::new(Received::default()));
        let keep = got.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let keep = keep.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(conn.try_clone().unwrap());
                    let mut conn = conn;
                    // HTTP/1.1, kept alive: one request after another.
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut length = 0usize;
                        let mut headers = Vec::new();
                        loop {
                            let mut h = String::new();
                            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end();
                            if h.is_empty() {
                                break;
                            }
                            headers.push(h.to_ascii_lowercase());
                            if let Some((k, v)) = h.split_once(':')
                                && k.eq_ignore_ascii_case("content-length")
                            {
                                length = v.trim().parse().unwrap_or(0);
                            }
                        }
                        let mut body = vec![0; length];
                        if reader.read_exact(&mut body).is_err() {
                            return;
                        }
                        if line.starts_with("POST /v1/metrics ") {
                            let req = ExportMetricsServiceRequest::decode(body.as_slice())
                                .expect("an OTLP metrics request");
                            let mut got = keep.lock().unwrap();
                            for rm in &req.resource_metrics {
                                for sm in &rm.scope_metrics {
                                    for m in &sm.metrics {
                                        if let Some(metric::Data::Histogram(h)) = &m.data {
                                            for p in &h.data_points {
                                                got.points.push(Point {
                                                    metric: m.name.clone(),
                                                    attributes: pairs(&p.attributes),
                                                    count: p.count,
                                                    sum: p.sum.unwrap_or_default(),
                                                });
                                            }
                                        }
                                    }
                                }
                            }
                            got.bodies.push(body);
                        } else if line.starts_with("POST /v1/traces ") {
                            let req = ExportTraceServiceRequest::decode(body.as_slice())
                                .expect("an OTLP trace request");
                            let mut got = keep.lock().unwrap();
                            for rs in &req.resource_spans {
                                if let Some(r) = &rs.resource {
                                    for (k, v) in pairs(&r.attributes) {
                                        if k == "service.name" {
                                            got.service.push(v);
                                        }
                                    }
                                }
                                for ss in &rs.scope_spans {
                                    for s in &ss.spans {
                                        got.spans.push(Span {
                                            name: s.name.clone(),
                                            trace_id: s.trace_id.clone(),
                                            span_id: s.span_id.clone(),
                                            parent: s.parent_span_id.clone(),
                                            kind: s.kind,
                                            status_code: s.status.as_ref().map_or(0, |s| s.code),
                                            start: s.start_time_unix_nano,
                                            attributes: pairs(&s.attributes),
                                            links: s
                                                .links
                                                .iter()
                                                .map(|l| (l.trace_id.clone(), l.span_id.clone()))
                                                .collect(),
                                        });
                                    }
                                }
                            }
                            got.bodies.push(body);
                            got.headers.extend(headers);
                        }
                        let _ = conn.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                        );
                    }
                });
            }
        });
        Receiver { port, got }
    }

    /// `http://127.0.0.1:PORT`, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every span received so far, in the order they started.
    pub fn spans(&self) -> Vec<Span> {
        let mut spans = self.got.lock().unwrap().spans.clone();
        spans.sort_by_key(|s| s.start);
        spans
    }

    /// Every histogram data point received so far.
    pub fn points(&self) -> Vec<Point> {
        self.got.lock().unwrap().points.clone()
    }

    /// Every request body received so far, as sent.
    pub fn bodies(&self) -> Vec<Vec<u8>> {
        self.got.lock().unwrap().bodies.clone()
    }

    /// Every header line of every request received, in lower case.
    pub fn headers(&self) -> Vec<String> {
        self.got.lock().unwrap().headers.clone()
    }

    /// The `service.name` of every resource received.
    pub fn services(&self) -> Vec<String> {
        self.got.lock().unwrap().service.clone()
    }
}
