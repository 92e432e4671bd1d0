//! The analyzer's errors ([`AnalyzeError`]): a Parquet file that could not be read keeps its
//! path and the reader's error; a failed scan or conversion of spans is a [`SqlError`]; a
//! reading task that did not finish is internal. Each reads as the `internal error: …` the
//! analyzer wrote before it had its own type, so messages are unchanged; its status category
//! is the [`SqlError`]'s it reads as.

use std::path::PathBuf;

use dyeline_model::{Category, HasCategory};

use crate::sql::SqlError;

/// Why an analysis, or a load of its spans, failed.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A Parquet file of the store could not be opened, decoded or projected.
    #[error("internal error: {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reader's error (I/O, Parquet or Arrow).
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A scan of `spans`, or the conversion of its batches into span records, failed.
    #[error(transparent)]
    Query(#[from] SqlError),
    /// A fault of the analyzer: a reading task panicked or was cancelled, a memory segment
    /// did not decode.
    #[error("internal error: {0}")]
    Internal(String),
}

impl AnalyzeError {
    /// A read error of the file `path`.
    pub fn read(
        path: &std::path::Path,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Read {
            path: path.to_path_buf(),
            source: source.into(),
        }
    }

    /// A stable machine-readable code (the API's `error.code`): `internal`, or the
    /// [`SqlError`]'s.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Query(e) => e.code(),
            Self::Read { .. } | Self::Internal(_) => "internal",
        }
    }
}

impl HasCategory for AnalyzeError {
    /// The [`SqlError`]'s; a read error and a fault of the analyzer are internal.
    fn category(&self) -> Category {
        match self {
            Self::Query(e) => e.category(),
            Self::Read { .. } | Self::Internal(_) => Category::Internal,
        }
    }
}

impl From<AnalyzeError> for SqlError {
    /// The same message as a [`SqlError`] (a read error is internal, its path first).
    fn from(e: AnalyzeError) -> Self {
        match e {
            AnalyzeError::Read { path, source } => {
                SqlError::Internal(format!("{}: {source}", path.display()))
            }
            AnalyzeError::Query(e) => e,
            AnalyzeError::Internal(m) => SqlError::Internal(m),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_those_of_the_sql_errors_they_replace() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let read = AnalyzeError::read(std::path::Path::new("/d/x.parquet"), io);
        assert_eq!(read.to_string(), "internal error: /d/x.parquet: gone");
        assert_eq!(read.code(), "internal");
        assert_eq!(
            SqlError::from(read).to_string(),
            "internal error: /d/x.parquet: gone"
        );
        let internal = AnalyzeError::Internal("task cancelled".into());
        assert_eq!(internal.to_string(), "internal error: task cancelled");
        let query = AnalyzeError::from(SqlError::Syntax("near x".into()));
        assert_eq!(query.to_string(), "SQL syntax error: near x");
        assert_eq!(query.code(), "syntax_error");
    }

    #[test]
    fn the_category_is_that_of_the_sql_error_it_reads_as() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let rows = [
            AnalyzeError::read(std::path::Path::new("/d/x.parquet"), io),
            AnalyzeError::Internal("task cancelled".into()),
            AnalyzeError::from(SqlError::Syntax("near x".into())),
            AnalyzeError::from(SqlError::Busy(1)),
        ];
        let expected = [
            Category::Internal,
            Category::Internal,
            Category::InvalidArgument,
            Category::Saturated,
        ];
        for (e, category) in rows.into_iter().zip(expected) {
            assert_eq!(e.category(), category, "{e:?}");
            assert_eq!(SqlError::from(e).category(), category);
        }
    }
}
