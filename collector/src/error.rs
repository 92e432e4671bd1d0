//! Why the receivers refuse an export ([`IngestError`]) and what they answer: the HTTP status
//! and gRPC code of its [`Category`] (the one table, `dyeline_model::status`) and the OTLP
//! retry delay (OTLP specification, "Failures" of OTLP/HTTP and OTLP/gRPC), tested row by row.

use std::time::Duration;

use dyeline_model::{Category, HasCategory};

/// Why a whole export request was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum IngestError {
    /// The body could not be decoded (bad protobuf, bad JSON, bad gzip, undecodable id):
    /// HTTP 400, gRPC INVALID_ARGUMENT; not retryable.
    #[error("{0}")]
    BadData(String),
    /// The body exceeds the size limit (after decompression): HTTP 413, gRPC RESOURCE_EXHAUSTED
    /// without `RetryInfo`; not retryable (OTLP: "The client MUST NOT retry the request when it
    /// receives `HTTP 413`"; a gRPC client treats RESOURCE_EXHAUSTED without `RetryInfo` as
    /// not retryable).
    #[error(
        "request body exceeds the limit of {limit} bytes after decompression (raise [receiver] max_body_size)"
    )]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// Content-Type or Content-Encoding not supported: HTTP 415, gRPC INVALID_ARGUMENT.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// The write path is full: HTTP 429 with Retry-After, gRPC UNAVAILABLE with RetryInfo.
    #[error("write path saturated; retry later")]
    Saturated {
        /// Suggested delay.
        retry_after: Duration,
    },
    /// The store cannot write now: HTTP 503 with Retry-After, gRPC UNAVAILABLE with RetryInfo.
    #[error("{0}")]
    Unavailable(String),
    /// The request's source is past `[otlp.rate_limit]`: HTTP 429 with Retry-After, gRPC
    /// UNAVAILABLE with RetryInfo.
    #[error("{message}")]
    RateLimited {
        /// When the source may send again.
        retry_after: Duration,
        /// Who, and the setting.
        message: String,
    },
    /// No OTLP token, or one that is not configured (`[otlp] tokens`): HTTP 401, gRPC
    /// UNAUTHENTICATED; not retryable. Refused from the request head, before the body is read.
    #[error("{0}")]
    Unauthenticated(String),
}

/// Closed set of refusal reasons, used as the `reason` metric label.
impl IngestError {
    /// The metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::BadData(_) => "bad_data",
            Self::TooLarge { .. } => "too_large",
            Self::UnsupportedMediaType(_) => "unsupported_media_type",
            Self::Saturated { .. } => "saturated",
            Self::Unavailable(_) => "unavailable",
            Self::Unauthenticated(_) => "unauthenticated",
            Self::RateLimited { .. } => "rate_limited",
        }
    }

    /// All label values.
    pub const REASONS: [&'static str; 7] = [
        "bad_data",
        "too_large",
        "unsupported_media_type",
        "saturated",
        "unavailable",
        "unauthenticated",
        "rate_limited",
    ];

    /// The HTTP status of OTLP/HTTP: the category's
    /// ([`Category::http_status`](dyeline_model::Category::http_status)).
    pub fn http_status(&self) -> http::StatusCode {
        http::StatusCode::from_u16(self.category().http_status())
            .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR)
    }

    /// The gRPC code of OTLP/gRPC: the category's
    /// ([`Category::grpc_code`](dyeline_model::Category::grpc_code)).
    pub fn grpc_code(&self) -> tonic::Code {
        tonic::Code::from(self.category().grpc_code())
    }

    /// The delay a client should wait before retrying; `None` when not retryable. Which
    /// refusals are retryable is the category table's; the delay is OTLP's own (the HTTP
    /// `Retry-After` and the gRPC `RetryInfo`): the write path's suggestion when saturated,
    /// one second when unavailable.
    pub fn retry_after(&self) -> Option<Duration> {
        if !self.category().retryable() {
            return None;
        }
        Some(match self {
            Self::Saturated { retry_after } | Self::RateLimited { retry_after, .. } => *retry_after,
            _ => Duration::from_secs(1),
        })
    }
}

impl HasCategory for IngestError {
    fn category(&self) -> Category {
        match self {
            Self::BadData(_) => Category::InvalidArgument,
            Self::TooLarge { .. } => Category::PayloadTooLarge,
            Self::UnsupportedMediaType(_) => Category::UnsupportedMediaType,
            Self::Saturated { .. } => Category::Saturated,
            Self::Unavailable(_) => Category::Unavailable,
            Self::Unauthenticated(_) => Category::Unauthenticated,
            Self::RateLimited { .. } => Category::Saturated,
        }
    }
}

impl From<crate::sink::SinkError> for IngestError {
    fn from(e: crate::sink::SinkError) -> Self {
        match e {
            crate::sink::SinkError::Saturated { retry_after } => Self::Saturated { retry_after },
            crate::sink::SinkError::Unavailable(m) => Self::Unavailable(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_maps_to_its_otlp_status() {
        let d = Duration::from_secs(2);
        let rows = [
            (
                IngestError::BadData("x".into()),
                400,
                tonic::Code::InvalidArgument,
                None,
            ),
            (
                IngestError::TooLarge { limit: 1 },
                413,
                tonic::Code::ResourceExhausted,
                None,
            ),
            (
                IngestError::UnsupportedMediaType("x".into()),
                415,
                tonic::Code::InvalidArgument,
                None,
            ),
            (
                IngestError::Saturated { retry_after: d },
                429,
                tonic::Code::Unavailable,
                Some(d),
            ),
            (
                IngestError::Unavailable("x".into()),
                503,
                tonic::Code::Unavailable,
                Some(Duration::from_secs(1)),
            ),
            (
                IngestError::Unauthenticated("x".into()),
                401,
                tonic::Code::Unauthenticated,
                None,
            ),
            (
                IngestError::RateLimited {
                    retry_after: d,
                    message: "x".into(),
                },
                429,
                tonic::Code::Unavailable,
                Some(d),
            ),
        ];
        for (err, http, grpc, retry) in rows {
            assert_eq!(err.http_status().as_u16(), http, "{err:?}");
            assert_eq!(err.grpc_code(), grpc, "{err:?}");
            assert_eq!(err.retry_after(), retry, "{err:?}");
            assert!(IngestError::REASONS.contains(&err.reason()));
            // The gRPC status carries RetryInfo exactly when the refusal is retryable.
            use tonic_types::StatusExt;
            let status = crate::grpc::to_status(&err);
            assert_eq!(status.code(), grpc, "{err:?}");
            let retry_info = status.get_details_retry_info();
            assert_eq!(
                retry_info.and_then(|r| r.retry_delay),
                retry,
                "{err:?}: RetryInfo"
            );
        }
    }

    /// Every category's gRPC number is the `tonic::Code` named for it: for the five the
    /// receivers answer (invalid argument, payload too large, unsupported media type,
    /// saturated, unavailable) the code they answered before the category table.
    #[test]
    fn every_category_is_the_grpc_code_it_was() {
        use tonic::Code as C;
        let rows = [
            (Category::InvalidArgument, C::InvalidArgument),
            (Category::NotFound, C::NotFound),
            (Category::Conflict, C::FailedPrecondition),
            (Category::PreconditionFailed, C::Aborted),
            (Category::Unauthenticated, C::Unauthenticated),
            (Category::PermissionDenied, C::PermissionDenied),
            (Category::PayloadTooLarge, C::ResourceExhausted),
            (Category::UnsupportedMediaType, C::InvalidArgument),
            (Category::Saturated, C::Unavailable),
            (Category::Unavailable, C::Unavailable),
            (Category::Internal, C::Internal),
        ];
        assert_eq!(rows.map(|r| r.0), Category::ALL);
        for (c, code) in rows {
            assert_eq!(tonic::Code::from(c.grpc_code()), code, "{c:?}");
            assert_eq!(c.grpc_code(), code as i32, "{c:?}");
        }
    }

    #[test]
    fn a_size_refusal_names_the_setting_that_raises_it() {
        let e = IngestError::TooLarge { limit: 1024 };
        assert_eq!(
            e.to_string(),
            "request body exceeds the limit of 1024 bytes after decompression \
             (raise [receiver] max_body_size)"
        );
        assert_eq!(e.reason(), "too_large");
    }
}
