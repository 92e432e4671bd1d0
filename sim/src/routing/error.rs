//! [`RouteError`]: the one error type of the routing library (no instance, none in the
//! request's lane, every instance at weight 0, the control API unreachable or refusing).

/// Errors of the routing library.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// The registry lists no instance of the app.
    #[error("no instance of app {0:?} is registered")]
    NoInstance(String),
    /// The lane stage left no instance: a strict lane the app has no instance of, or base
    /// traffic to an app with only lane instances (and no reverse fallback).
    #[error("no instance of app {app:?} may serve lane {lane:?}")]
    NoLaneInstance {
        /// The app.
        app: String,
        /// The lane asked for (`base` for untagged traffic).
        lane: String,
    },
    /// Every instance of the app has weight 0.
    #[error("every instance of app {0:?} has weight 0")]
    AllZero(String),
    /// The control API could not be reached or answered an error.
    #[error("control API: {0}")]
    Control(String),
}
