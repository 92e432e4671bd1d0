//! One status category for the whole house: every error a request can meet says which
//! [`Category`] it is ([`HasCategory`]), and one table gives each category its HTTP status, its
//! gRPC code and whether the same request sent again may succeed. The receivers, the control
//! API, the SQL and analysis API and the dashboard all answer through this table, so a status
//! is decided once (GreptimeDB `status_code.rs`, without its second and third mapping in the
//! servers that drift from it).
//!
//! Plain numbers, no I/O: a crate with `http` or `tonic` turns them into
//! `http::StatusCode::from_u16` or `tonic::Code::from(i32)` where it answers. It does not own
//! the bodies of error responses, their `code` strings or the OTLP retry delays
//! (`collector/src/error.rs`).

/// What kind of failure an error is, as a caller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Category {
    /// The request is wrong as sent: bad id, bad body, bad query, a query a limit refused.
    InvalidArgument,
    /// The thing named does not exist.
    NotFound,
    /// The request conflicts with the current state (a release already running): it cannot
    /// succeed until that state changes.
    Conflict,
    /// A condition the request set (`If-Match`) does not hold: read again, then retry.
    PreconditionFailed,
    /// No credentials, or credentials that are not known.
    Unauthenticated,
    /// Known credentials that may not do this.
    PermissionDenied,
    /// The request body is larger than the limit (OTLP: the client must not retry it).
    PayloadTooLarge,
    /// The body's Content-Type or Content-Encoding is not one the endpoint reads.
    UnsupportedMediaType,
    /// Too much at once (a full write queue, every query slot taken): retry shortly.
    Saturated,
    /// The service cannot do it now (the store is closed or failing, a listener limit):
    /// retry later.
    Unavailable,
    /// A fault of the server.
    Internal,
}

/// An error that knows its [`Category`].
pub trait HasCategory {
    /// The category of this error.
    fn category(&self) -> Category;
}

/// gRPC status code numbers, as the gRPC specification numbers them (`doc/statuscodes.md`);
/// only those the table uses.
pub mod grpc {
    /// INVALID_ARGUMENT.
    pub const INVALID_ARGUMENT: i32 = 3;
    /// NOT_FOUND.
    pub const NOT_FOUND: i32 = 5;
    /// PERMISSION_DENIED.
    pub const PERMISSION_DENIED: i32 = 7;
    /// RESOURCE_EXHAUSTED.
    pub const RESOURCE_EXHAUSTED: i32 = 8;
    /// FAILED_PRECONDITION.
    pub const FAILED_PRECONDITION: i32 = 9;
    /// ABORTED.
    pub const ABORTED: i32 = 10;
    /// INTERNAL.
    pub const INTERNAL: i32 = 13;
    /// UNAVAILABLE.
    pub const UNAVAILABLE: i32 = 14;
    /// UNAUTHENTICATED.
    pub const UNAUTHENTICATED: i32 = 16;
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The HTTP status.
    pub http: u16,
    /// The gRPC code number ([`grpc`]).
    pub grpc: i32,
    /// Whether the same request, sent again unchanged, may succeed.
    pub retryable: bool,
}

impl Category {
    /// Every category, in declaration order.
    pub const ALL: [Category; 11] = [
        Category::InvalidArgument,
        Category::NotFound,
        Category::Conflict,
        Category::PreconditionFailed,
        Category::Unauthenticated,
        Category::PermissionDenied,
        Category::PayloadTooLarge,
        Category::UnsupportedMediaType,
        Category::Saturated,
        Category::Unavailable,
        Category::Internal,
    ];

    /// The table: the one place a category becomes a status.
    ///
    /// The gRPC codes follow the gRPC specification's guide where HTTP has no twin:
    /// - `Conflict` is FAILED_PRECONDITION ("the client should not retry until the system
    ///   state has been explicitly fixed") and `PreconditionFailed` is ABORTED ("a
    ///   client-specified test-and-set fails, indicating the client should restart a
    ///   read-modify-write sequence"); the names cross, the meanings do not.
    /// - `PayloadTooLarge` is RESOURCE_EXHAUSTED with no `RetryInfo`, which an OTLP client
    ///   does not retry; `UnsupportedMediaType` is INVALID_ARGUMENT.
    /// - `Saturated` is UNAVAILABLE, not RESOURCE_EXHAUSTED: an OTLP client retries
    ///   UNAVAILABLE always and RESOURCE_EXHAUSTED only with `RetryInfo` (OTLP specification,
    ///   "Failures"), and the receivers have answered UNAVAILABLE since they were written.
    pub const fn status(self) -> Status {
        use Category::*;
        let (http, grpc, retryable) = match self {
            InvalidArgument => (400, grpc::INVALID_ARGUMENT, false),
            NotFound => (404, grpc::NOT_FOUND, false),
            Conflict => (409, grpc::FAILED_PRECONDITION, false),
            PreconditionFailed => (412, grpc::ABORTED, false),
            Unauthenticated => (401, grpc::UNAUTHENTICATED, false),
            PermissionDenied => (403, grpc::PERMISSION_DENIED, false),
            PayloadTooLarge => (413, grpc::RESOURCE_EXHAUSTED, false),
            UnsupportedMediaType => (415, grpc::INVALID_ARGUMENT, false),
            Saturated => (429, grpc::UNAVAILABLE, true),
            Unavailable => (503, grpc::UNAVAILABLE, true),
            Internal => (500, grpc::INTERNAL, false),
        };
        Status {
            http,
            grpc,
            retryable,
        }
    }

    /// The HTTP status (a valid status code, 100..=599).
    pub const fn http_status(self) -> u16 {
        self.status().http
    }

    /// The gRPC code number ([`grpc`]).
    pub const fn grpc_code(self) -> i32 {
        self.status().grpc
    }

    /// Whether the same request, sent again unchanged, may succeed.
    pub const fn retryable(self) -> bool {
        self.status().retryable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_category_has_its_row() {
        use Category::*;
        // A new variant does not compile here until it has a row below and a place in ALL.
        match Internal {
            InvalidArgument | NotFound | Conflict | PreconditionFailed | Unauthenticated
            | PermissionDenied | PayloadTooLarge | UnsupportedMediaType | Saturated
            | Unavailable | Internal => {}
        }
        let rows = [
            (InvalidArgument, 400, 3, false),
            (NotFound, 404, 5, false),
            (Conflict, 409, 9, false),
            (PreconditionFailed, 412, 10, false),
            (Unauthenticated, 401, 16, false),
            (PermissionDenied, 403, 7, false),
            (PayloadTooLarge, 413, 8, false),
            (UnsupportedMediaType, 415, 3, false),
            (Saturated, 429, 14, true),
            (Unavailable, 503, 14, true),
            (Internal, 500, 13, false),
        ];
        assert_eq!(
            rows.map(|r| r.0),
            Category::ALL,
            "ALL lists every row, in order"
        );
        for (c, http, grpc, retryable) in rows {
            assert_eq!(c.http_status(), http, "{c:?}");
            assert_eq!(c.grpc_code(), grpc, "{c:?}");
            assert_eq!(c.retryable(), retryable, "{c:?}");
            assert_eq!(
                c.status(),
                Status {
                    http,
                    grpc,
                    retryable
                },
                "{c:?}"
            );
            assert!((100..=599).contains(&http), "{c:?}");
            assert!((1..=16).contains(&grpc), "{c:?}: not OK, within the spec");
        }
    }
}
