//! The records of the operation log, as the control plane keeps them in memory and its store
//! ports persist them: a channel operation ([`OpRecord`]) and a lane group operation
//! ([`LaneGroupRecord`]), numbered in one sequence. Here so both the plane and the stores use
//! them without importing each other.

use dyeline_model::ChannelId;
use dyeline_model::release::{LaneGroupOp, Op};

/// One recorded operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpRecord {
    /// Sequence number: increasing, never reused (also across restarts).
    pub seq: u64,
    /// When it was applied (for imports: the time in the imported timeline).
    pub t_unix_nano: i64,
    /// The channel.
    pub channel: ChannelId,
    /// The operation.
    pub op: Op,
    /// Token name of the writer, or `import`.
    pub actor: String,
    /// True for history recorded by `dyeline import --timeline`.
    pub imported: bool,
    /// Free text recorded with the operation (trimmed, 1..=[`NOTE_MAX_CHARS`](crate::plane::NOTE_MAX_CHARS) characters),
    /// e.g. why a ratio was raised while an alert fired; `None` when none was given.
    pub note: Option<String>,
}

/// One recorded lane group operation.
#[derive(Clone, Debug, PartialEq)]
pub struct LaneGroupRecord {
    /// Sequence number, shared with the channel operations: increasing, never reused.
    pub seq: u64,
    /// When it was applied (for imports: the time in the imported timeline).
    pub t_unix_nano: i64,
    /// The operation.
    pub op: LaneGroupOp,
    /// Token name of the writer, or `import`.
    pub actor: String,
    /// True for history recorded by `dyeline import --timeline`.
    pub imported: bool,
    /// The imported event's note, if it had one.
    pub note: Option<String>,
}
