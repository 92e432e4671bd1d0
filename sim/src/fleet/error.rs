//! [`BoxError`]: why the demo fleet could not start or deploy.

/// Errors while starting the fleet.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
