//! Bounds on what the functions of a caller's query build, where DataFusion's memory pool does
//! not look: a scalar function allocates its result outside the pool's accounting, and some
//! build results far larger than their inputs (`repeat(s, 1e11)` asks for 100 GB at once;
//! DataFusion 55 checks `repeat` against `i32::MAX` for `Utf8` and not at all for `LargeUtf8`).
//!
//! [`GuardRule`] is the last analyzer rule of the caller's session. It refuses a literal larger
//! than `[sql] max_value_bytes` and puts every scalar function call behind a [`Guard`]:
//! - every call whose result is variable-width (strings, binaries, lists, maps, structs) has
//!   its result measured, and a value grown past `max_value_bytes` (larger than the limit and
//!   than every input; `lower` of a long stored message passes) refuses the query. That bounds
//!   the functions whose result is at most a few times their input (`upper`, `encode`,
//!   `translate`, `to_hex`, `overlay`, `string_to_array`, …): one call allocates at most that
//!   factor times an input that passed the same check, so nesting them cannot grow a value
//!   step by step;
//! - the calls that can build far more than their inputs ([`Amplifier`]: a count, a range, a
//!   delimiter or replacement repeated per element, or one input repeated per argument) are
//!   predicted from their arguments *before* they run: past `max_value_bytes` per value they
//!   are refused, and the predicted bytes of the whole call (a scalar result counts once per
//!   row of the batch, since the caller repeats it to the batch's length) are reserved in the
//!   query memory pool, so what they build counts against `[sql] max_memory`. These calls are
//!   made volatile so that a constant one is computed per batch, under the reservation,
//!   instead of folded at planning into a literal copied to every row.
//!
//! Not owned here: operators that copy a row once per output row (cross, nested-loop and hash
//! joins, `unnest`) build batches DataFusion does not account; they copy values that passed
//! these checks (or stored values), at most a batch of rows at a time.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow::datatypes::DataType;
use datafusion::common::config::ConfigOptions;
use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::common::{DataFusionError, ExprSchema, Result};
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryPool, MemoryReservation};
use datafusion::logical_expr::expr::ScalarFunction;
use datafusion::logical_expr::simplify::{ExprSimplifyResult, SimplifyContext};
use datafusion::logical_expr::sort_properties::{ExprProperties, SortProperties};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, Expr, LogicalPlan, ReturnFieldArgs, ScalarFunctionArgs,
    ScalarUDF, ScalarUDFImpl, Signature, Volatility,
};
use datafusion::optimizer::AnalyzerRule;

use super::predict::{
    Amplifier, PerRow, array_row_bytes, predict, scalar_bytes, sizes, variable_width,
};

use arrow::datatypes::FieldRef;

/// A value past `[sql] max_value_bytes`: the query is refused before (or right after) the value
/// is built.
#[derive(Debug, thiserror::Error)]
#[error(
    "{what} of {} is past the largest value a query may build, {} (raise [sql] max_value_bytes)",
    human(*size),
    human(*limit)
)]
pub struct ValueTooLarge {
    /// What was refused: `repeat()`, `a literal`, ….
    pub what: String,
    /// Its size in bytes (predicted or measured).
    pub size: u64,
    /// The limit.
    pub limit: u64,
}

/// A byte count for people: `1.5 GiB`, `64 KiB`, `12 bytes`.
pub fn human(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size {
            let v = n as f64 / size as f64;
            return if v.fract() == 0.0 {
                format!("{v:.0} {unit}")
            } else {
                format!("{v:.1} {unit}")
            };
        }
    }
    format!("{n} bytes")
}

/// The limits a guard applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GuardLimits {
    /// `[sql] max_value_bytes`.
    pub max_value_bytes: u64,
}

/// The analyzer rule that refuses oversized literals and guards every scalar function call.
#[derive(Debug)]
pub struct GuardRule {
    limits: GuardLimits,
    pool: Arc<dyn MemoryPool>,
}

impl GuardRule {
    /// A rule reserving amplifiers' results in `pool`.
    pub fn new(limits: GuardLimits, pool: Arc<dyn MemoryPool>) -> Self {
        Self { limits, pool }
    }

    fn rewrite(&self, e: Expr) -> Result<Transformed<Expr>> {
        match e {
            Expr::Literal(ref v, _) => {
                let size = scalar_bytes(v);
                if size > self.limits.max_value_bytes {
                    return Err(DataFusionError::External(Box::new(ValueTooLarge {
                        what: "a literal".into(),
                        size,
                        limit: self.limits.max_value_bytes,
                    })));
                }
                Ok(Transformed::no(e))
            }
            Expr::ScalarFunction(f) if !is_guard(&f.func) => {
                let guard = Guard::new(&f.func, self.limits, &self.pool);
                Ok(Transformed::yes(Expr::ScalarFunction(
                    ScalarFunction::new_udf(Arc::new(ScalarUDF::new_from_impl(guard)), f.args),
                )))
            }
            other => Ok(Transformed::no(other)),
        }
    }
}

impl AnalyzerRule for GuardRule {
    fn analyze(&self, plan: LogicalPlan, _config: &ConfigOptions) -> Result<LogicalPlan> {
        plan.transform_up_with_subqueries(|p| {
            p.map_expressions(|e| e.transform_up(|e| self.rewrite(e)))
        })
        .map(|t| t.data)
    }

    fn name(&self) -> &str {
        "dyeline_value_guard"
    }
}

fn is_guard(f: &ScalarUDF) -> bool {
    let inner: &dyn std::any::Any = f.inner().as_ref();
    inner.downcast_ref::<Guard>().is_some()
}

/// Ids of amplifier guards: each call site holds its own reservation.
static NEXT_SITE: AtomicU64 = AtomicU64::new(1);

/// One guarded function call site.
#[derive(Debug)]
pub struct Guard {
    inner: ScalarUDF,
    limits: GuardLimits,
    amplifier: Option<Amplifier>,
    /// For an amplifier: its volatile signature, a site id and the reservation of its largest
    /// call so far (released when the query's plan is dropped).
    signature: Signature,
    site: u64,
    reservation: Option<Arc<MemoryReservation>>,
}

impl PartialEq for Guard {
    fn eq(&self, other: &Self) -> bool {
        self.inner == other.inner && self.limits == other.limits && self.site == other.site
    }
}

impl Eq for Guard {}

impl Hash for Guard {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.inner.hash(state);
        self.limits.hash(state);
        self.site.hash(state);
    }
}

impl Guard {
    fn new(inner: &ScalarUDF, limits: GuardLimits, pool: &Arc<dyn MemoryPool>) -> Self {
        let amplifier = Amplifier::of(inner.name());
        let mut signature = inner.signature().clone();
        let (site, reservation) = match amplifier {
            Some(_) => {
                signature.volatility = Volatility::Volatile;
                let consumer = MemoryConsumer::new(format!("{}()", inner.name()));
                (
                    NEXT_SITE.fetch_add(1, Ordering::Relaxed),
                    Some(Arc::new(consumer.register(pool))),
                )
            }
            None => (0, None),
        };
        Self {
            inner: inner.clone(),
            limits,
            amplifier,
            signature,
            site,
            reservation,
        }
    }

    fn rewrap(&self, inner: ScalarUDF) -> Self {
        Self {
            inner,
            limits: self.limits,
            amplifier: self.amplifier,
            signature: self.signature.clone(),
            site: self.site,
            reservation: self.reservation.clone(),
        }
    }

    fn refuse_value(&self, size: u64) -> Result<()> {
        if size > self.limits.max_value_bytes {
            return Err(DataFusionError::External(Box::new(ValueTooLarge {
                what: format!("a value of {}()", self.inner.name()),
                size,
                limit: self.limits.max_value_bytes,
            })));
        }
        Ok(())
    }

    /// Holds `total` bytes in the pool (the largest call of this site so far).
    fn reserve(&self, total: u64) -> Result<()> {
        if let Some(r) = &self.reservation {
            let total = usize::try_from(total).unwrap_or(usize::MAX);
            if total > r.size() {
                r.try_grow(total - r.size())?;
            }
        }
        Ok(())
    }
}

impl ScalarUDFImpl for Guard {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn aliases(&self) -> &[String] {
        self.inner.aliases()
    }

    fn schema_name(&self, args: &[Expr]) -> Result<String> {
        self.inner.inner().schema_name(args)
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, arg_types: &[DataType]) -> Result<DataType> {
        self.inner.inner().return_type(arg_types)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        self.inner.inner().return_field_from_args(args)
    }

    #[allow(deprecated)]
    fn is_nullable(&self, args: &[Expr], schema: &dyn ExprSchema) -> bool {
        self.inner.inner().is_nullable(args, schema)
    }

    fn is_strict(&self) -> bool {
        self.inner.inner().is_strict()
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rows = args.number_rows as u64;
        if let Some(kind) = self.amplifier {
            let (largest, total) = predict(kind, &args.args, rows)?;
            self.refuse_value(largest)?;
            self.reserve(total)?;
        } else if !variable_width(args.return_type()) {
            return self.inner.invoke_with_args(args);
        }
        let inputs = self.amplifier.is_none().then(|| args.args.clone());
        let out = self.inner.invoke_with_args(args)?;
        let (largest, total) = match &out {
            ColumnarValue::Scalar(v) => {
                let b = scalar_bytes(v);
                (b, b.saturating_mul(rows))
            }
            ColumnarValue::Array(a) => {
                let sizes = array_row_bytes(a.as_ref());
                (
                    sizes.iter().copied().max().unwrap_or(0),
                    sizes.iter().fold(0u64, |s, b| s.saturating_add(*b)),
                )
            }
        };
        // A function that is not an amplifier may pass a large input on (`lower` of a long
        // stored message); it is refused only when it grows a value past the limit.
        let grew = match &inputs {
            Some(inputs) => {
                largest > self.limits.max_value_bytes && largest > largest_input(inputs)?
            }
            None => true,
        };
        if grew {
            self.refuse_value(largest)?;
        }
        self.reserve(total)?;
        Ok(out)
    }

    fn with_updated_config(&self, config: &ConfigOptions) -> Option<ScalarUDF> {
        let updated = self.inner.inner().with_updated_config(config)?;
        Some(ScalarUDF::new_from_impl(self.rewrap(updated)))
    }

    fn simplify(&self, args: Vec<Expr>, info: &SimplifyContext) -> Result<ExprSimplifyResult> {
        // An amplifier's rewrite (concat folding its literals, say) would put the unguarded
        // function back; the others may need theirs (`now()` is only ever simplified).
        if self.amplifier.is_some() {
            return Ok(ExprSimplifyResult::Original(args));
        }
        self.inner.inner().simplify(args, info)
    }

    fn conditional_arguments<'a>(
        &self,
        args: &'a [Expr],
    ) -> Option<(Vec<&'a Expr>, Vec<&'a Expr>)> {
        self.inner.inner().conditional_arguments(args)
    }

    fn short_circuits(&self) -> bool {
        self.inner.inner().short_circuits()
    }

    fn output_ordering(&self, inputs: &[ExprProperties]) -> Result<SortProperties> {
        self.inner.inner().output_ordering(inputs)
    }

    fn preserves_lex_ordering(&self, inputs: &[ExprProperties]) -> Result<bool> {
        self.inner.inner().preserves_lex_ordering(inputs)
    }

    fn coerce_types(&self, arg_types: &[DataType]) -> Result<Vec<DataType>> {
        self.inner.inner().coerce_types(arg_types)
    }

    fn documentation(&self) -> Option<&Documentation> {
        self.inner.inner().documentation()
    }
}

/// The largest value among `args`.
fn largest_input(args: &[ColumnarValue]) -> Result<u64> {
    let mut largest = 0;
    for a in args {
        largest = largest.max(match sizes(Some(a))? {
            PerRow::Same(b) => b,
            PerRow::Each(v) => v.into_iter().max().unwrap_or(0),
        });
    }
    Ok(largest)
}
