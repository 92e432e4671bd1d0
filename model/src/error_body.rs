//! The JSON body of every refused API request, `{"error": {"code", "message"}}`, with its
//! OpenAPI schema: shared by the control routes and the analysis routes, so both document
//! the same `ErrorBody`.

use serde::Serialize;
use utoipa::ToSchema;

/// The error body of every refused request.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// Code and message of an error.
#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable code, e.g. `invalid_blue_percent`, `version_mismatch`.
    pub code: String,
    /// What went wrong, for people.
    pub message: String,
}
