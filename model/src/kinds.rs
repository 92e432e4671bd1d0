//! Span kinds, status codes (OTLP enums) and the traffic kinds of domain §3.

/// OTLP `Span.SpanKind`. Integer values are the OTLP enum's: 0 UNSPECIFIED, 1 INTERNAL,
/// 2 SERVER, 3 CLIENT, 4 PRODUCER, 5 CONSUMER.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SpanKind {
    /// 0, or absent.
    Unspecified,
    /// 1.
    Internal,
    /// 2.
    Server,
    /// 3.
    Client,
    /// 4.
    Producer,
    /// 5.
    Consumer,
}

impl SpanKind {
    /// Maps the OTLP integer; values outside 0..=5 are `None` (a receiver treats them as
    /// UNSPECIFIED, as proto3 does for unknown enum values).
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Unspecified,
            1 => Self::Internal,
            2 => Self::Server,
            3 => Self::Client,
            4 => Self::Producer,
            5 => Self::Consumer,
            _ => return None,
        })
    }

    /// The stored text: `UNSPECIFIED`, `INTERNAL`, `SERVER`, `CLIENT`, `PRODUCER`, `CONSUMER`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unspecified => "UNSPECIFIED",
            Self::Internal => "INTERNAL",
            Self::Server => "SERVER",
            Self::Client => "CLIENT",
            Self::Producer => "PRODUCER",
            Self::Consumer => "CONSUMER",
        }
    }
}

/// OTLP `Status.StatusCode`: 0 UNSET, 1 OK, 2 ERROR.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StatusCode {
    /// 0, absent, or `{}`.
    Unset,
    /// 1.
    Ok,
    /// 2.
    Error,
}

impl StatusCode {
    /// Maps the OTLP integer; other values are `None` (treated as UNSET by receivers).
    pub fn from_i32(v: i32) -> Option<Self> {
        Some(match v {
            0 => Self::Unset,
            1 => Self::Ok,
            2 => Self::Error,
            _ => return None,
        })
    }

    /// The stored text: `UNSET`, `OK`, `ERROR`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unset => "UNSET",
            Self::Ok => "OK",
            Self::Error => "ERROR",
        }
    }
}

/// Traffic kind of a span (domain §3).
///
/// Serialises as its stored text (`"RPC"`, `"MQ"`, `"JOB"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum TrafficKind {
    /// A SERVER span: Dubbo, gRPC, HTTP, Feign.
    Rpc,
    /// A CONSUMER span: a message taken from a queue.
    Mq,
    /// Scheduled work: a root span that is neither SERVER nor CONSUMER, or any span with
    /// attribute `job.name`.
    Job,
}

impl TrafficKind {
    /// Classifies a span by domain §3. `has_parent` is true when the span has a non-empty
    /// `parent_span_id`; `has_job_name` when it carries the attribute `job.name`.
    ///
    /// Precedence: `job.name` makes any span a JOB (explicit scheduled work); otherwise SERVER is
    /// RPC, CONSUMER is MQ, and any other root span is a JOB. Non-root INTERNAL, CLIENT and
    /// PRODUCER spans have no traffic kind (`None`).
    pub fn classify(kind: SpanKind, has_parent: bool, has_job_name: bool) -> Option<Self> {
        if has_job_name {
            return Some(Self::Job);
        }
        match kind {
            SpanKind::Server => Some(Self::Rpc),
            SpanKind::Consumer => Some(Self::Mq),
            _ if !has_parent => Some(Self::Job),
            _ => None,
        }
    }

    /// The stored text: `RPC`, `MQ`, `JOB`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rpc => "RPC",
            Self::Mq => "MQ",
            Self::Job => "JOB",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enums_map_by_otlp_value_not_ordinal() {
        let kinds: Vec<_> = (0..=5)
            .map(|v| SpanKind::from_i32(v).unwrap().as_str())
            .collect();
        assert_eq!(
            kinds,
            [
                "UNSPECIFIED",
                "INTERNAL",
                "SERVER",
                "CLIENT",
                "PRODUCER",
                "CONSUMER"
            ]
        );
        assert_eq!(SpanKind::from_i32(6), None);
        assert_eq!(StatusCode::from_i32(2), Some(StatusCode::Error));
        assert_eq!(StatusCode::from_i32(0).unwrap().as_str(), "UNSET");
    }

    #[test]
    fn traffic_kinds_follow_domain_section_3() {
        use SpanKind::*;
        assert_eq!(
            TrafficKind::classify(Server, true, false),
            Some(TrafficKind::Rpc)
        );
        assert_eq!(
            TrafficKind::classify(Server, false, false),
            Some(TrafficKind::Rpc)
        );
        assert_eq!(
            TrafficKind::classify(Consumer, true, false),
            Some(TrafficKind::Mq)
        );
        assert_eq!(
            TrafficKind::classify(Internal, false, false),
            Some(TrafficKind::Job)
        );
        assert_eq!(
            TrafficKind::classify(Client, false, false),
            Some(TrafficKind::Job)
        );
        assert_eq!(TrafficKind::classify(Internal, true, false), None);
        assert_eq!(TrafficKind::classify(Client, true, false), None);
        assert_eq!(
            TrafficKind::classify(Internal, true, true),
            Some(TrafficKind::Job)
        );
    }
}
