//! Rows written before the lane columns (`spans` schema version 1) still read, with those
//! columns null: through SQL over the table provider, through the per-file reader
//! ([`crate::file_read::FileSource::open`]), and from a WAL that an earlier binary left.

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Int64Array, RecordBatch, StringArray, UInt32Array,
    new_null_array,
};
use arrow::datatypes::{DataType, Schema};
use datafusion::prelude::SessionContext;
use dyeline_model::schema::{ENVIRONMENT_COLUMNS, LANE_COLUMNS, col, spans_schema};

use crate::file_read::DICTIONARY_COLUMNS;
use crate::test_support::{close, open_unsynced, rows};
use crate::wal::Wal;
use crate::{Store, StoreConfig, segment};

/// `n` whole `spans` rows from row `first` on (keys as [`rows`]), `service_name` `svc`,
/// `lane` / `lane_tag` `gray`, `malformed_lane_tags` 1 and `deployment_environment` `prod`;
/// with `version_1`, in the layout of schema version 1 (without the lane columns, and without
/// the environment column version 3 added).
fn spans_rows(first: u64, n: u64, version_1: bool) -> (RecordBatch, Vec<dyeline_model::SpanKey>) {
    let (keys_batch, keys) = rows(first, n);
    let n = n as usize;
    let schema = spans_schema();
    let mut fields = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for f in schema.fields() {
        let name = f.name().as_str();
        if version_1 && (LANE_COLUMNS.contains(&name) || ENVIRONMENT_COLUMNS.contains(&name)) {
            continue;
        }
        let column: ArrayRef = if let Some(c) = keys_batch.column_by_name(name) {
            Arc::clone(c)
        } else if [
            col::SERVICE_NAME,
            col::LANE,
            col::LANE_TAG,
            col::DEPLOYMENT_ENVIRONMENT,
        ]
        .contains(&name)
        {
            Arc::new(StringArray::from(vec![
                match name {
                    col::SERVICE_NAME => "svc",
                    col::DEPLOYMENT_ENVIRONMENT => "prod",
                    _ => "gray",
                };
                n
            ]))
        } else if name == col::MALFORMED_LANE_TAGS {
            Arc::new(UInt32Array::from(vec![1; n]))
        } else if f.is_nullable() {
            new_null_array(f.data_type(), n)
        } else {
            match f.data_type() {
                DataType::Utf8 => Arc::new(StringArray::from(vec!["x"; n])),
                DataType::Int64 => Arc::new(Int64Array::from(vec![0; n])),
                DataType::Boolean => Arc::new(BooleanArray::from(vec![false; n])),
                DataType::UInt32 => Arc::new(UInt32Array::from(vec![0; n])),
                other => panic!("no value for {name}: {other}"),
            }
        };
        fields.push(Arc::clone(f));
        columns.push(column);
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap();
    (batch, keys)
}

async fn write_rows(store: &Store, first: u64, n: u64, version_1: bool) {
    let (batch, keys) = spans_rows(first, n, version_1);
    let report = store
        .try_write(batch, keys)
        .unwrap()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.stored, n);
}

/// `(span_id, service_name, lane, lane_tag, malformed_lane_tags, lane_invalid_values is
/// null)` of every row, through SQL.
async fn sql_rows(
    store: &Store,
) -> Vec<(
    String,
    String,
    Option<String>,
    Option<String>,
    Option<u32>,
    bool,
)> {
    let ctx = SessionContext::new();
    ctx.register_table("spans", store.table()).unwrap();
    let batches = ctx
        .sql(
            "SELECT span_id, service_name, lane, lane_tag, malformed_lane_tags, \
             lane_invalid_values IS NULL AS no_invalid FROM spans ORDER BY span_id",
        )
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    let mut out = Vec::new();
    for b in &batches {
        let s = |i: usize| b.column(i).as_string::<i32>().clone();
        let (span, service, lane, tag) = (s(0), s(1), s(2), s(3));
        let malformed = b.column(4).as_primitive::<arrow::datatypes::UInt32Type>();
        let none = b.column(5).as_boolean();
        for r in 0..b.num_rows() {
            let opt = |c: &arrow::array::StringArray| c.is_valid(r).then(|| c.value(r).to_owned());
            out.push((
                span.value(r).to_owned(),
                service.value(r).to_owned(),
                opt(&lane),
                opt(&tag),
                malformed.is_valid(r).then(|| malformed.value(r)),
                none.value(r),
            ));
        }
    }
    out
}

#[tokio::test]
async fn files_written_before_the_lane_columns_read_them_as_nulls_in_sql_and_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = open_unsynced(dir.path());
    // One file of version 1, one of version 2.
    write_rows(&store, 0, 3, true).await;
    store.flush().await.unwrap();
    write_rows(&store, 3, 2, false).await;
    store.flush().await.unwrap();

    let got = sql_rows(&store).await;
    assert_eq!(got.len(), 5);
    for (i, (span, service, lane, tag, malformed, no_invalid)) in got.iter().enumerate() {
        assert_eq!(span, &format!("{:016x}", i + 1));
        assert_eq!(service, "svc");
        assert!(no_invalid);
        if i < 3 {
            assert_eq!((lane, tag, malformed), (&None, &None, &None), "row {i}");
        } else {
            let gray = Some("gray".to_owned());
            assert_eq!((lane, tag, malformed), (&gray, &gray, &Some(1)), "row {i}");
        }
    }
    // The environment column (version 3) of the old file's rows is null too.
    let ctx = SessionContext::new();
    ctx.register_table("spans", store.table()).unwrap();
    let envs: Vec<Option<String>> = ctx
        .sql("SELECT deployment_environment FROM spans ORDER BY span_id")
        .await
        .unwrap()
        .collect()
        .await
        .unwrap()
        .iter()
        .flat_map(|b| {
            let c = b.column(0).as_string::<i32>();
            (0..b.num_rows())
                .map(|r| c.is_valid(r).then(|| c.value(r).to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    let prod = Some("prod".to_owned());
    assert_eq!(envs, [None, None, None, prod.clone(), prod]);

    // The per-file reader: the old file's lane columns are nulls, after the file's columns,
    // the dictionary ones typed as dictionaries.
    let snap = store.snapshot();
    let files = snap.files_in(i64::MIN, i64::MAX);
    assert_eq!(files.len(), 2);
    let asked = [
        col::LANE_TAG,
        col::SPAN_ID,
        col::MALFORMED_LANE_TAGS,
        col::SERVICE_NAME,
        col::LANE_INVALID_VALUES,
    ];
    let mut read = Vec::new();
    for file in &files {
        let batches: Vec<RecordBatch> = file
            .open(&asked, &DICTIONARY_COLUMNS)
            .unwrap()
            .reader
            .map(Result::unwrap)
            .collect();
        assert_eq!(batches.len(), 1);
        read.push(batches.into_iter().next().unwrap());
    }
    read.sort_by_key(RecordBatch::num_rows);
    let (new, old) = (&read[0], &read[1]);
    assert_eq!(old.num_rows(), 3);
    let names = |b: &RecordBatch| -> Vec<String> {
        b.schema()
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect()
    };
    // The old file: its own columns in file order, then the lacking ones in the order asked.
    assert_eq!(
        names(old),
        [
            col::SPAN_ID,
            col::SERVICE_NAME,
            col::LANE_TAG,
            col::MALFORMED_LANE_TAGS,
            col::LANE_INVALID_VALUES
        ]
    );
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    for b in [old, new] {
        let schema = b.schema();
        assert_eq!(
            schema.field_with_name(col::LANE_TAG).unwrap().data_type(),
            &dictionary
        );
    }
    for name in [
        col::LANE_TAG,
        col::MALFORMED_LANE_TAGS,
        col::LANE_INVALID_VALUES,
    ] {
        assert_eq!(old.column_by_name(name).unwrap().null_count(), 3, "{name}");
    }
    assert_eq!(new.column_by_name(col::LANE_TAG).unwrap().null_count(), 0);
    // A name that is no column of `spans` is still an error.
    assert!(files[0].open(&["no_such_column"], &[]).is_err());
    close(store).await;
}

/// A WAL record an earlier binary wrote (version 1 rows) replays into the current layout: a
/// scan of memory reads it, its lane columns null.
#[tokio::test]
async fn a_wal_written_before_the_lane_columns_replays_with_them_null() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut wal = Wal::open(&dir.path().join("wal")).unwrap();
        wal.append(&segment::encode_record(&spans_rows(0, 4, true).0).unwrap())
            .unwrap();
        wal.commit(true).unwrap();
    }
    let mut config = StoreConfig::new(dir.path());
    config.read_only = true;
    let store = Store::open(config).unwrap();
    let got = sql_rows(&store).await;
    assert_eq!(got.len(), 4);
    assert!(
        got.iter().all(|(_, s, lane, tag, m, _)| s == "svc"
            && lane.is_none()
            && tag.is_none()
            && m.is_none()),
        "{got:?}"
    );
    close(store).await;
}
