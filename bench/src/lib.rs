//! Benchmark support: a deterministic generator of realistic OTLP trace export requests, shared
//! by the load generator (`loadgen`) and the decode floor (`decode_floor`) so both measure the
//! same bytes.
//!
//! Each request holds `spans_per_request` spans (default 1,000) in traces of 5 spans, grouped
//! by resource as an SDK batch would be; 40 services × 4 instances (hosts named with their colour,
//! `svc07-blue-2`), ~12 attributes per span (HTTP / RPC / DB semantic conventions plus the
//! `x-deploy-channel-type` decision), ids unique across the whole run so no span is a duplicate.

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{AnyValue, InstrumentationScope, KeyValue, any_value};
use opentelemetry_proto::tonic::resource::v1::Resource;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, Status};

/// A small deterministic PRNG (xorshift64*), so runs are reproducible without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator (a zero seed is replaced).
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

fn kv_str(k: &str, v: impl Into<String>) -> KeyValue {
    KeyValue {
        key: k.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::StringValue(v.into())),
        }),
        ..Default::default()
    }
}

fn kv_int(k: &str, v: i64) -> KeyValue {
    KeyValue {
        key: k.to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::IntValue(v)),
        }),
        ..Default::default()
    }
}

/// Services, instances per service.
pub const SERVICES: u64 = 40;
/// Instances per service (half blue, half green).
pub const INSTANCES: u64 = 4;

/// Start of the second that request `index` covers, Unix ns: its spans start within the
/// 0.9 s after it (request 0 at 2025-11-30T00:00:00Z, one second per request).
pub fn request_base_unix_nano(index: u64) -> u64 {
    1_764_460_800_000_000_000 + index * 1_000_000_000
}

/// Shifts every span time of `req` by `offset_ns` (e.g. to the present for a live load).
pub fn shift_times(req: &mut ExportTraceServiceRequest, offset_ns: i64) {
    for span in req
        .resource_spans
        .iter_mut()
        .flat_map(|r| r.scope_spans.iter_mut())
        .flat_map(|s| s.spans.iter_mut())
    {
        span.start_time_unix_nano = span.start_time_unix_nano.saturating_add_signed(offset_ns);
        span.end_time_unix_nano = span.end_time_unix_nano.saturating_add_signed(offset_ns);
    }
}

/// Request number `index` of a run with `seed`: `spans` spans (a multiple of 5 is best).
pub fn request(seed: u64, index: u64, spans: usize) -> ExportTraceServiceRequest {
    let mut rng = Rng::new(seed ^ (index.wrapping_add(1)).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let base_ns: u64 = request_base_unix_nano(index);
    // Group spans by (service, instance) as one SDK batch per resource.
    let mut groups: Vec<(u64, u64, Vec<Span>)> = Vec::new();
    let mut made = 0usize;
    let mut trace_no = 0u64;
    while made < spans {
        let trace_hi = (index << 24) | trace_no;
        trace_no += 1;
        let trace_id = ((u128::from(seed) << 96)
            | (u128::from(trace_hi) << 32)
            | u128::from(rng.next_u64() as u32 | 1))
        .to_be_bytes()
        .to_vec();
        let decision = format!(
            "trade={}&pay={}",
            if rng.below(2) == 0 { "blue" } else { "green" },
            if rng.below(2) == 0 { "blue" } else { "green" }
        );
        let mut parent: Vec<u8> = Vec::new();
        for depth in 0..5u64 {
            if made == spans {
                break;
            }
            let svc = rng.below(SERVICES);
            let inst = rng.below(INSTANCES);
            let span_id = ((trace_hi << 8) | (depth + 1)).to_be_bytes().to_vec();
            let start = base_ns + rng.below(900_000_000) + depth * 1_000_000;
            let duration = 200_000 + rng.below(50_000_000);
            let server = depth % 2 == 0;
            let status = if rng.below(100) == 0 { 2 } else { 0 };
            let http_status = if status == 2 { 503 } else { 200 };
            let attributes = vec![
                kv_str(
                    "http.request.method",
                    if rng.below(3) == 0 { "POST" } else { "GET" },
                ),
                kv_str(
                    "url.path",
                    format!("/api/v1/svc{svc:02}/items/{}", rng.below(1000)),
                ),
                kv_int("http.response.status_code", http_status),
                kv_str("server.address", format!("svc{svc:02}.prod.internal")),
                kv_int("server.port", 8080),
                kv_str("rpc.system", "apache_dubbo"),
                kv_str("rpc.service", format!("Svc{svc:02}Service")),
                kv_str("rpc.method", format!("call{}", rng.below(8))),
                kv_str("x-deploy-channel-type", decision.clone()),
                kv_str("thread.name", format!("dubbo-worker-{}", rng.below(64))),
                kv_str(
                    "user.tier",
                    ["gold", "silver", "bronze"][rng.below(3) as usize],
                ),
                kv_int("net.sock.peer.port", 30000 + rng.below(30000) as i64),
            ];
            let span = Span {
                trace_id: trace_id.clone(),
                span_id: span_id.clone(),
                parent_span_id: parent.clone(),
                name: format!("Svc{svc:02}Service/call"),
                kind: if server { 2 } else { 3 },
                start_time_unix_nano: start,
                end_time_unix_nano: start + duration,
                attributes,
                status: Some(Status {
                    code: status,
                    message: String::new(),
                }),
                flags: 0x101,
                ..Default::default()
            };
            parent = span_id;
            match groups.iter_mut().find(|(s, i, _)| *s == svc && *i == inst) {
                Some(g) => g.2.push(span),
                None => groups.push((svc, inst, vec![span])),
            }
            made += 1;
        }
    }
    ExportTraceServiceRequest {
        resource_spans: groups
            .into_iter()
            .map(|(svc, inst, spans)| {
                let color = if inst % 2 == 0 { "blue" } else { "green" };
                let host = format!("svc{svc:02}-{color}-{}", inst / 2 + 1);
                ResourceSpans {
                    resource: Some(Resource {
                        attributes: vec![
                            kv_str("service.name", format!("svc{svc:02}")),
                            kv_str("service.instance.id", host.clone()),
                            kv_str("host.name", host),
                            kv_str("service.version", "2.4.1"),
                            kv_str("telemetry.sdk.language", "java"),
                        ],
                        ..Default::default()
                    }),
                    scope_spans: vec![ScopeSpans {
                        scope: Some(InstrumentationScope {
                            name: "io.opentelemetry.apache-dubbo-2.7".into(),
                            version: "2.9.0".into(),
                            ..Default::default()
                        }),
                        spans,
                        schema_url: String::new(),
                    }],
                    schema_url: String::new(),
                }
            })
            .collect(),
    }
}

/// Marks `req` as a gray release of the seed-001 kind would (domain §7.1), for measuring lane
/// resolution on spans that carry lanes: every fourth resource gets the Nacos metadata
/// attribute `nacos.metadata.gray = "true"` (a gray instance under a `[[lane_rules]]` attribute
/// rule); every second span the captured header `http.request.header.gray = ["true"]` (a user
/// carrier's key) and every fourth other span the baggage-copied `x-deploy-lane = "gray"` (the
/// first built-in carrier). The request keeps its spans and ids.
pub fn stain_lanes(req: &mut ExportTraceServiceRequest) {
    let header = KeyValue {
        key: "http.request.header.gray".to_owned(),
        value: Some(AnyValue {
            value: Some(any_value::Value::ArrayValue(
                opentelemetry_proto::tonic::common::v1::ArrayValue {
                    values: vec![AnyValue {
                        value: Some(any_value::Value::StringValue("true".into())),
                    }],
                },
            )),
        }),
        ..Default::default()
    };
    let mut n = 0usize;
    for (k, r) in req.resource_spans.iter_mut().enumerate() {
        if k % 4 == 0
            && let Some(resource) = r.resource.as_mut()
        {
            resource
                .attributes
                .push(kv_str("nacos.metadata.gray", "true"));
        }
        for span in r.scope_spans.iter_mut().flat_map(|s| s.spans.iter_mut()) {
            if n.is_multiple_of(2) {
                span.attributes.push(header.clone());
            } else if n % 8 == 1 {
                span.attributes.push(kv_str("x-deploy-lane", "gray"));
            }
            n += 1;
        }
    }
}

/// Process CPU time (user + system) of `pid` in seconds, from `/proc/<pid>/stat`.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = f.get(11)?.parse().ok()?;
    let stime: f64 = f.get(12)?.parse().ok()?;
    // Linux reports clock ticks; USER_HZ is 100 on every mainstream Linux build.
    Some((utime + stime) / 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn requests_are_deterministic_unique_and_about_400_bytes_per_span() {
        let a = request(7, 0, 1000);
        assert_eq!(a, request(7, 0, 1000));
        let n: usize = a
            .resource_spans
            .iter()
            .flat_map(|r| &r.scope_spans)
            .map(|s| s.spans.len())
            .sum();
        assert_eq!(n, 1000);
        let b = request(7, 1, 1000);
        let id = |r: &ExportTraceServiceRequest| {
            r.resource_spans[0].scope_spans[0].spans[0].span_id.clone()
        };
        assert_ne!(id(&a), id(&b));
        let per_span = a.encode_to_vec().len() / 1000;
        assert!((300..600).contains(&per_span), "{per_span} B/span");
    }
}
