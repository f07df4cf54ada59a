//! Results as polars DataFrames: written to Parquet and CSV, read back, merged, summarised.
//! Only the sweep knows polars.

use polars::prelude::*;
use polars_io::parquet::write::KeyValueMetadata;
use polars_io::prelude::{CsvWriter, ParquetReader, ParquetWriter, SerReader, SerWriter};
use std::path::{Path, PathBuf};

use crate::error::InputError;
use crate::sweep::row::{fill_case_columns, Row};
use crate::sweep::shard::{check_shards, ShardIdentity};

fn err(path: &Path, e: impl std::fmt::Display) -> InputError {
    InputError::file(path, e)
}

/// One serialized record's fields, in declaration order (a `serde_json::Map` would sort
/// them).
struct Fields(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Fields {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Fields;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a record")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Fields, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Fields(fields))
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// How a table stores a field whose values are lists of numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lists {
    /// A list column (Parquet).
    Column,
    /// The list as JSON text (CSV, which has no list type).
    Json,
}

/// Records as a DataFrame, through serde: a column per field, named and ordered as the
/// record serializes, typed from the values (unsigned or signed integers, floats, booleans,
/// text, lists of numbers; a field that is null in every record is a float column).
pub fn frame_of<R: serde::Serialize>(records: &[R], lists: Lists) -> PolarsResult<DataFrame> {
    let to_polars = |e: serde_json::Error| PolarsError::ComputeError(e.to_string().into());
    let mut names: Vec<String> = Vec::new();
    let mut values: Vec<Vec<serde_json::Value>> = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let text = serde_json::to_string(record).map_err(to_polars)?;
        let Fields(fields) = serde_json::from_str(&text).map_err(to_polars)?;
        for (name, value) in fields {
            let k = match names.iter().position(|n| *n == name) {
                Some(k) => k,
                None => {
                    names.push(name);
                    values.push(vec![serde_json::Value::Null; i]);
                    names.len() - 1
                }
            };
            values[k].push(value);
        }
        for column in &mut values {
            column.resize(i + 1, serde_json::Value::Null);
        }
    }
    let columns = names
        .iter()
        .zip(&values)
        .map(|(name, v)| column_of(name, v, lists))
        .collect();
    DataFrame::new(records.len(), columns)
}

/// One column from its JSON values (see [`frame_of`]).
fn column_of(name: &str, values: &[serde_json::Value], lists: Lists) -> Column {
    use serde_json::Value;
    let name: PlSmallStr = name.into();
    let present = || values.iter().filter(|v| !v.is_null());
    if present().any(Value::is_array) {
        if lists == Lists::Json {
            let text: Vec<Option<String>> = values
                .iter()
                .map(|v| (!v.is_null()).then(|| v.to_string()))
                .collect();
            return Column::new(name, text);
        }
        let lists: ListChunked = values
            .iter()
            .map(|v| {
                v.as_array().map(|items| {
                    let numbers: Vec<Option<f64>> = items.iter().map(Value::as_f64).collect();
                    Series::new(PlSmallStr::EMPTY, numbers)
                })
            })
            .collect();
        return lists.into_series().with_name(name).into_column();
    }
    if present().any(Value::is_string) {
        let text: Vec<Option<String>> = values
            .iter()
            .map(|v| match v {
                Value::Null => None,
                Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            })
            .collect();
        return Column::new(name, text);
    }
    if present().next().is_some() && present().all(Value::is_boolean) {
        return Column::new(name, values.iter().map(Value::as_bool).collect::<Vec<_>>());
    }
    if present().next().is_some() && present().all(Value::is_u64) {
        return Column::new(name, values.iter().map(Value::as_u64).collect::<Vec<_>>());
    }
    if present().next().is_some() && present().all(Value::is_i64) {
        return Column::new(name, values.iter().map(Value::as_i64).collect::<Vec<_>>());
    }
    Column::new(name, values.iter().map(Value::as_f64).collect::<Vec<_>>())
}

/// A table cell as JSON (lists as arrays; integer columns as integers).
fn json_of(v: &AnyValue) -> serde_json::Value {
    match v {
        AnyValue::Null => serde_json::Value::Null,
        AnyValue::String(s) => serde_json::Value::from(*s),
        AnyValue::StringOwned(s) => serde_json::Value::from(s.as_str()),
        AnyValue::Boolean(b) => serde_json::Value::from(*b),
        AnyValue::List(series) => serde_json::Value::Array(
            (0..series.len())
                .map(|i| {
                    series
                        .get(i)
                        .map_or(serde_json::Value::Null, |v| json_of(&v))
                })
                .collect(),
        ),
        v => match v.extract::<f64>() {
            Some(x) if !v.dtype().is_float() && x.fract() == 0.0 && x.abs() < 9e15 => {
                serde_json::Value::from(x as i64)
            }
            Some(x) => serde_json::Value::from(x),
            None => serde_json::Value::from(v.to_string()),
        },
    }
}

/// Every row of a DataFrame as a JSON object (column name to cell).
pub fn records(df: &DataFrame) -> Vec<serde_json::Value> {
    let columns = df.columns();
    (0..df.height())
        .map(|i| {
            let object: serde_json::Map<String, serde_json::Value> = columns
                .iter()
                .map(|c| {
                    let v = c.get(i).map_or(serde_json::Value::Null, |v| json_of(&v));
                    (c.name().to_string(), v)
                })
                .collect();
            serde_json::Value::Object(object)
        })
        .collect()
}

/// The rows as a DataFrame (one row per job; `peak_memory` as a list column), with every
/// row's case columns (`global_lower_bound`, `gap`, `case_infeasible`) filled in from the
/// rows of its case and of the cases that dominate it ([`fill_case_columns`]).
pub fn frame(rows: &[Row]) -> PolarsResult<DataFrame> {
    frame_of(&filled(rows), Lists::Column)
}

/// The rows with their case columns filled in ([`fill_case_columns`]), as a periodic
/// sweep's tables hold them.
pub fn filled(rows: &[Row]) -> Vec<Row> {
    let mut filled = rows.to_vec();
    fill_case_columns(&mut filled);
    filled
}

/// The key of a results table's [`ShardIdentity`] in its Parquet metadata (a JSON object),
/// so that it survives a renamed file; `merge` takes only tables that carry one.
pub const IDENTITY_KEY: &str = "pipeopt.table";

/// Reads a Parquet table's [`ShardIdentity`], or none when it has none (a table pipeopt
/// did not write as a sweep's, or written before tables carried one).
pub fn read_identity(path: &Path) -> Result<Option<ShardIdentity>, InputError> {
    let file = std::fs::File::open(path).map_err(|e| err(path, e))?;
    let mut reader = ParquetReader::new(file);
    let metadata = reader.get_metadata().map_err(|e| err(path, e))?;
    let Some(value) = metadata
        .key_value_metadata()
        .iter()
        .flatten()
        .find(|kv| kv.key == IDENTITY_KEY)
        .and_then(|kv| kv.value.clone())
    else {
        return Ok(None);
    };
    serde_json::from_str(&value).map(Some).map_err(|e| {
        InputError::new(
            path.display().to_string(),
            IDENTITY_KEY,
            format!("is not a table identity: {e}"),
        )
    })
}

/// Where [`write_tables`] writes one table, and how.
#[derive(Debug, Clone)]
pub struct TableFiles {
    pub parquet: PathBuf,
    /// Lists (the per-processor or per-worker peaks) as JSON text: CSV has no list type.
    pub csv: PathBuf,
    /// The records as a JSON array, when wanted.
    pub json: Option<PathBuf>,
    /// The JSON on one line (large tables) rather than indented.
    pub compact_json: bool,
    /// The table's identity in its Parquet metadata (a periodic sweep's tables and shards:
    /// `merge` reads it).
    pub identity: Option<ShardIdentity>,
}

impl TableFiles {
    /// `<dir>/<name>.parquet`, `.csv` and `.json` (indented), with no identity.
    pub fn in_dir(dir: &Path, name: &str) -> TableFiles {
        TableFiles {
            parquet: dir.join(format!("{name}.parquet")),
            csv: dir.join(format!("{name}.csv")),
            json: Some(dir.join(format!("{name}.json"))),
            compact_json: false,
            identity: None,
        }
    }

    /// `<stem>.parquet` and `<stem>.csv` (whatever extension `stem` has), with `identity`.
    pub fn with_identity(stem: &Path, identity: ShardIdentity) -> TableFiles {
        TableFiles {
            parquet: stem.with_extension("parquet"),
            csv: stem.with_extension("csv"),
            json: None,
            compact_json: false,
            identity: Some(identity),
        }
    }
}

/// The one writer of every sweep table, whatever its records (a periodic sweep's `Row`s, a
/// synchronous sweep's runs, best runs and optima): a column per serialized field
/// ([`frame_of`]) as Parquet (lists as list columns; the identity, if any, in its metadata),
/// as CSV (lists as JSON text) and, if asked, the records as JSON, each file atomically.
/// Returns the files written: CSV, JSON, Parquet.
pub fn write_tables<R: serde::Serialize>(
    records: &[R],
    files: &TableFiles,
) -> Result<Vec<PathBuf>, crate::Error> {
    let parquet = &files.parquet;
    let mut df = frame_of(records, Lists::Column).map_err(|e| crate::Error::io(parquet, e))?;
    let metadata = match &files.identity {
        None => None,
        Some(identity) => {
            let text = serde_json::to_string(identity).map_err(|e| crate::Error::io(parquet, e))?;
            Some(KeyValueMetadata::from_static(vec![(
                IDENTITY_KEY.to_string(),
                text,
            )]))
        }
    };
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf)
        .with_key_value_metadata(metadata)
        .finish(&mut df)
        .map_err(|e| crate::Error::io(parquet, e))?;
    crate::error::write_atomic(parquet, &buf)?;
    let csv = &files.csv;
    write_csv(
        &mut frame_of(records, Lists::Json).map_err(|e| crate::Error::io(csv, e))?,
        csv,
    )?;
    let mut written = vec![csv.clone()];
    if let Some(json) = &files.json {
        let text = if files.compact_json {
            serde_json::to_vec(records)
        } else {
            serde_json::to_vec_pretty(records)
        }
        .map_err(|e| crate::Error::io(json, e))?;
        crate::error::write_atomic(json, &text)?;
        written.push(json.clone());
    }
    written.push(parquet.clone());
    Ok(written)
}

/// Writes a DataFrame as CSV, atomically.
pub fn write_csv(df: &mut DataFrame, path: &Path) -> Result<(), crate::Error> {
    let mut buf = Vec::new();
    CsvWriter::new(&mut buf)
        .finish(df)
        .map_err(|e| crate::Error::io(path, e))?;
    crate::error::write_atomic(path, &buf)
}

/// Reads a Parquet results table.
pub fn read_frame(path: &Path) -> Result<DataFrame, InputError> {
    let file = std::fs::File::open(path).map_err(|e| err(path, e))?;
    ParquetReader::new(file).finish().map_err(|e| err(path, e))
}

/// Reads a Parquet results table back into rows (tables of every earlier format:
/// [`Row::from_json`]).
pub fn read_rows(path: &Path) -> Result<Vec<Row>, InputError> {
    let df = read_frame(path)?;
    records(&df)
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            Row::from_json(r).map_err(|e| {
                InputError::new(
                    path.display().to_string(),
                    format!("row {}", i + 1),
                    e.to_string(),
                )
            })
        })
        .collect()
}

/// Where `merge` writes when no output is given: `results/<dir>.parquet` for tables in
/// `results/<dir>/` (the shards of one grid), beside that directory.
pub fn default_merge_output(
    tables: &[std::path::PathBuf],
) -> Result<std::path::PathBuf, InputError> {
    let first = tables
        .first()
        .ok_or_else(|| InputError::new("merge", "", "no table to merge"))?;
    let dir = first
        .parent()
        .and_then(|d| d.file_name())
        .ok_or_else(|| InputError::new("--out", "", "cannot guess the output name; give --out"))?;
    let base = first
        .parent()
        .and_then(|d| d.parent())
        .unwrap_or(Path::new("."));
    Ok(base.join(format!("{}.parquet", dir.to_string_lossy())))
}

/// Merges the shards of one grid into one table, rows back in grid order, and writes it
/// as Parquet and CSV beside `out` (its identity: shard 1 of 1).
///
/// Every input must carry a [`ShardIdentity`] (file names do not count: a renamed shard
/// merges as what it is), all of one experiment and one configuration hash, cut into the
/// same number of shards, each shard exactly once and none missing; anything else is
/// refused, naming the table at fault.
pub fn merge(inputs: &[std::path::PathBuf], out: &Path) -> Result<usize, crate::Error> {
    let identities = shard_identities(inputs)?;
    // Shard i holds jobs i-1, i-1+n, ...: row j of shard i is job j n + i - 1.
    let mut all: Vec<(usize, usize, Row)> = Vec::new();
    for (path, identity) in inputs.iter().zip(&identities) {
        for (j, r) in read_rows(path)?.into_iter().enumerate() {
            all.push((j, identity.shard, r));
        }
    }
    all.sort_by_key(|&(j, i, _)| (j, i));
    let mut rows: Vec<Row> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (_, _, r) in all {
        match index.get(&r.key) {
            Some(&i) => rows[i] = r,
            None => {
                index.insert(r.key.clone(), rows.len());
                rows.push(r);
            }
        }
    }
    let whole = ShardIdentity {
        shard: 1,
        shards: 1,
        ..identities[0].clone()
    };
    // `-o x.csv` and `-o x.parquet` both write x.parquet and x.csv.
    write_tables(&filled(&rows), &TableFiles::with_identity(out, whole))?;
    Ok(rows.len())
}

/// The identities of the tables `merge` is given, checked to be every shard of one grid
/// exactly once.
fn shard_identities(inputs: &[std::path::PathBuf]) -> Result<Vec<ShardIdentity>, InputError> {
    if inputs.is_empty() {
        return Err(InputError::new("merge", "", "no table to merge"));
    }
    let mut found = Vec::with_capacity(inputs.len());
    for path in inputs {
        let identity = read_identity(path)?.ok_or_else(|| {
            InputError::new(
                path.display().to_string(),
                "",
                format!(
                    "is not a shard of a sweep: its Parquet metadata has no `{IDENTITY_KEY}` \
                     (experiment, configuration hash, shard i of n)"
                ),
            )
        })?;
        found.push((path.display().to_string(), identity));
    }
    check_shards(&found, None, "merge")?;
    Ok(found.into_iter().map(|(_, i)| i).collect())
}

/// Checks the arguments of [`summary`] against the table `df` read from `path`: every
/// `by` is one of its columns and `ratio_to` one of its algorithms; the error names the flag
/// and lists what the table has.
pub fn check_summary_args(
    df: &DataFrame,
    path: &Path,
    by: &[String],
    ratio_to: Option<&str>,
) -> Result<(), InputError> {
    let columns: Vec<String> = df
        .get_column_names()
        .iter()
        .map(|c| c.to_string())
        .collect();
    if let Some(c) = by.iter().find(|c| !columns.contains(c)) {
        return Err(InputError::new(
            "--by",
            "",
            format!(
                "{} has no column {c:?}; its columns: {}",
                path.display(),
                columns.join(", ")
            ),
        ));
    }
    if let Some(r) = ratio_to {
        check_algorithm(&algorithms_of(df), path, r)?;
    }
    Ok(())
}

/// The algorithms (labels) of a results table, sorted.
pub fn algorithms_of(df: &DataFrame) -> Vec<String> {
    let mut all: Vec<String> = records(df)
        .iter()
        .filter_map(|r| r.get("algorithm")?.as_str().map(str::to_string))
        .collect();
    all.sort();
    all.dedup();
    all
}

/// `--ratio-to`: one of the table's `algorithms`.
pub fn check_algorithm(algorithms: &[String], path: &Path, name: &str) -> Result<(), InputError> {
    if algorithms.iter().any(|a| a == name) {
        return Ok(());
    }
    Err(InputError::new(
        "--ratio-to",
        "",
        format!(
            "{} has no algorithm {name:?}; its algorithms: {}",
            path.display(),
            algorithms.join(", ")
        ),
    ))
}

/// A summary table: per group (`by` columns and algorithm), how many runs, how many valid and
/// infeasible, the mean speedup, and with `ratio_to`, the geometric mean over the other
/// coordinates of `period / period of ratio_to` on the same instance, processors, memory,
/// bandwidth and repetition (Beaumont et al., ScaDL 2022, Figure 7), over the cases both
/// solved.
///
/// Written with polars' eager frames (grouping, joins, sorting): its lazy engine would add a
/// query planner and about thirty crates to the build for one table of a few thousand rows
/// (docs/build.md).
pub fn summary(df: &DataFrame, by: &[String], ratio_to: Option<&str>) -> PolarsResult<DataFrame> {
    // Sizes and bandwidths grouped in units people read.
    let mut df = df.clone();
    for (column, unit, name) in [
        ("memory", 1073741824.0, "memory_GiB"),
        ("bandwidth", 1e9, "bandwidth_GBps"),
    ] {
        let scaled = df
            .column(column)?
            .cast(&DataType::Float64)?
            .as_materialized_series()
            / unit;
        df.with_column(scaled.with_name(name.into()).into_column())?;
    }
    let group: Vec<String> = by
        .iter()
        .map(|c| match c.as_str() {
            "memory" => "memory_GiB".to_string(),
            "bandwidth" => "bandwidth_GBps".to_string(),
            other => other.to_string(),
        })
        .chain(["algorithm".to_string()])
        .collect();
    let mut base = per_group(&df, &group, |runs| {
        let status = runs.column("status")?.str()?;
        let count = |s: &str| status.equal(s).sum().unwrap_or(0);
        let mean = |c: &str| -> PolarsResult<Option<f64>> {
            Ok(runs
                .column(c)?
                .cast(&DataType::Float64)?
                .as_materialized_series()
                .mean())
        };
        Ok(vec![
            Column::new("runs".into(), [runs.height() as IdxSize]),
            Column::new("valid".into(), [count("valid")]),
            Column::new("timeout".into(), [count("timeout")]),
            Column::new("infeasible".into(), [count("infeasible")]),
            Column::new("error".into(), [count("error")]),
            Column::new("mean_speedup".into(), [mean("speedup")?]),
            Column::new("mean_solve_seconds".into(), [mean("solve_seconds")?]),
        ])
    })?;
    if let Some(reference) = ratio_to {
        let ratios = ratios_to(&df, &group, reference)?;
        base = base.join(&ratios, &group, &group, JoinArgs::new(JoinType::Left), None)?;
    }
    base.sort(group, SortMultipleOptions::default())
}

/// Per group of `rows` (the values of the `group` columns, in the order they first appear),
/// the group's values and the one-row columns `aggregate` computes from its rows.
fn per_group(
    rows: &DataFrame,
    group: &[String],
    aggregate: impl Fn(&DataFrame) -> PolarsResult<Vec<Column>> + Send + Sync,
) -> PolarsResult<DataFrame> {
    let one_row = |runs: DataFrame| {
        let mut columns: Vec<Column> = group
            .iter()
            .map(|c| Ok(runs.column(c)?.head(Some(1))))
            .collect::<PolarsResult<_>>()?;
        columns.extend(aggregate(&runs)?);
        DataFrame::new(1, columns)
    };
    if rows.height() == 0 {
        // polars groups no empty frame: the columns of one group of nulls, none of its rows.
        let mut columns: Vec<Column> = group
            .iter()
            .map(|c| Ok(Column::full_null(c.into(), 1, rows.column(c)?.dtype())))
            .collect::<PolarsResult<_>>()?;
        columns.extend(aggregate(rows)?);
        return Ok(DataFrame::new(1, columns)?.clear());
    }
    rows.group_by_stable(group)?.apply(one_row)
}

/// Per group, the geometric mean of `period / period of reference` over the runs whose
/// case (instance, processors, memory, bandwidth, repetition) both solved, and how many.
fn ratios_to(df: &DataFrame, group: &[String], reference: &str) -> PolarsResult<DataFrame> {
    let keys = [
        "instance",
        "processors",
        "memory",
        "bandwidth",
        "repetition",
    ];
    let solved = df.filter(&df.column("period")?.is_not_null())?;
    let mut reference_periods = solved
        .filter(&solved.column("algorithm")?.str()?.equal(reference))?
        .select(keys.iter().copied().chain(["period"]))?;
    reference_periods.rename("period", "reference_period".into())?;
    let both = solved.join(
        &reference_periods,
        keys,
        keys,
        JoinArgs::new(JoinType::Inner),
        None,
    )?;
    let name = format!("geomean_ratio_to_{reference}");
    per_group(&both, group, |runs| {
        let float = |c: &str| runs.column(c)?.cast(&DataType::Float64);
        let ratio = (float("period")?.as_materialized_series()
            / float("reference_period")?.as_materialized_series())?;
        let e = Series::new(PlSmallStr::EMPTY, [std::f64::consts::E]);
        let log_mean = ratio.log(&e).mean();
        Ok(vec![
            Column::new(name.as_str().into(), [log_mean.map(f64::exp)]),
            Column::new("compared".into(), [runs.height() as IdxSize]),
        ])
    })
}

/// A DataFrame as a JSON array of objects, for `--json`.
pub fn to_json(df: &DataFrame) -> serde_json::Value {
    serde_json::Value::Array(records(df))
}
