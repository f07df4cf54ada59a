//! Results as polars DataFrames: written to Parquet and CSV, read back, merged, summarised.
//! Only the sweep knows polars.

use polars::prelude::*;
use std::path::Path;

use crate::error::InputError;
use crate::sweep::run::Row;

fn err(path: &Path, e: impl std::fmt::Display) -> InputError {
    InputError::file(path, e)
}

/// The rows as a DataFrame (one row per job; `peak_memory` as a list column), with every
/// row's case columns (`global_lower_bound`, `gap`, `case_infeasible`) filled in from the
/// rows of its case ([`crate::sweep::run::fill_case_columns`]).
pub fn frame(rows: &[Row]) -> PolarsResult<DataFrame> {
    let mut filled = rows.to_vec();
    crate::sweep::run::fill_case_columns(&mut filled);
    let rows = filled.as_slice();
    fn s<'a>(rows: &'a [Row], f: impl Fn(&'a Row) -> &'a str) -> Vec<&'a str> {
        rows.iter().map(f).collect()
    }
    fn f64s(rows: &[Row], f: impl Fn(&Row) -> Option<f64>) -> Vec<Option<f64>> {
        rows.iter().map(f).collect()
    }
    let peaks: ListChunked = rows
        .iter()
        .map(|r| Some(Series::new(PlSmallStr::EMPTY, r.peak_memory.as_slice())))
        .collect();
    let columns = vec![
        Column::new("key".into(), s(rows, |r| &r.key)),
        Column::new("experiment".into(), s(rows, |r| &r.experiment)),
        Column::new("instance".into(), s(rows, |r| &r.instance)),
        Column::new(
            "processors".into(),
            rows.iter()
                .map(|r| r.processors as u32)
                .collect::<Vec<u32>>(),
        ),
        Column::new(
            "memory".into(),
            rows.iter().map(|r| r.memory).collect::<Vec<f64>>(),
        ),
        Column::new(
            "bandwidth".into(),
            rows.iter().map(|r| r.bandwidth).collect::<Vec<f64>>(),
        ),
        Column::new("algorithm".into(), s(rows, |r| &r.algorithm)),
        Column::new("algorithm_name".into(), s(rows, |r| &r.algorithm_name)),
        Column::new(
            "repetition".into(),
            rows.iter()
                .map(|r| r.repetition as u32)
                .collect::<Vec<u32>>(),
        ),
        Column::new("status".into(), s(rows, |r| &r.status)),
        Column::new("period".into(), f64s(rows, |r| r.period)),
        Column::new("planned_period".into(), f64s(rows, |r| r.planned_period)),
        Column::new("lower_bound".into(), f64s(rows, |r| r.lower_bound)),
        Column::new("speedup".into(), f64s(rows, |r| r.speedup)),
        Column::new(
            "sequential".into(),
            rows.iter().map(|r| r.sequential).collect::<Vec<f64>>(),
        ),
        peaks
            .into_series()
            .with_name("peak_memory".into())
            .into_column(),
        Column::new("peak_memory_max".into(), f64s(rows, |r| r.peak_memory_max)),
        Column::new(
            "stages".into(),
            rows.iter().map(|r| r.stages as u32).collect::<Vec<u32>>(),
        ),
        Column::new(
            "placement".into(),
            rows.iter()
                .map(|r| r.placement.as_deref())
                .collect::<Vec<Option<&str>>>(),
        ),
        Column::new("solve_seconds".into(), f64s(rows, |r| r.solve_seconds)),
        Column::new(
            "wall_seconds".into(),
            rows.iter().map(|r| r.wall_seconds).collect::<Vec<f64>>(),
        ),
        Column::new(
            "solver_status".into(),
            rows.iter()
                .map(|r| r.solver_status.as_deref())
                .collect::<Vec<Option<&str>>>(),
        ),
        Column::new("solver_gap".into(), f64s(rows, |r| r.solver_gap)),
        Column::new("nodes".into(), f64s(rows, |r| r.nodes)),
        Column::new(
            "global_lower_bound".into(),
            f64s(rows, |r| r.global_lower_bound),
        ),
        Column::new("gap".into(), f64s(rows, |r| r.gap)),
        Column::new(
            "case_infeasible".into(),
            rows.iter()
                .map(|r| r.case_infeasible)
                .collect::<Vec<bool>>(),
        ),
        Column::new("message".into(), s(rows, |r| &r.message)),
        Column::new("instance_path".into(), s(rows, |r| &r.instance_path)),
        Column::new("instance_hash".into(), s(rows, |r| &r.instance_hash)),
        Column::new("config_hash".into(), s(rows, |r| &r.config_hash)),
        Column::new("git_revision".into(), s(rows, |r| &r.git_revision)),
    ];
    DataFrame::new(rows.len(), columns)
}

/// Writes the rows as Parquet and CSV, each atomically (the CSV has the per-processor peaks
/// as a JSON list in `peak_memory`, since CSV has no list type).
pub fn write_tables(rows: &[Row], parquet: &Path, csv: &Path) -> Result<(), crate::Error> {
    let err = crate::Error::io;
    let mut df = frame(rows).map_err(|e| err(parquet, e))?;
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf)
        .finish(&mut df)
        .map_err(|e| err(parquet, e))?;
    crate::error::write_atomic(parquet, &buf)?;
    let peaks_json: Vec<String> = rows
        .iter()
        .map(|r| serde_json::to_string(&r.peak_memory).expect("numbers serialize"))
        .collect();
    let mut flat = df.drop("peak_memory").map_err(|e| err(csv, e))?;
    let pos = flat.get_column_index("peak_memory_max").unwrap_or(0);
    flat.insert_column(pos, Column::new("peak_memory".into(), peaks_json))
        .map_err(|e| err(csv, e))?;
    let mut buf = Vec::new();
    CsvWriter::new(&mut buf)
        .finish(&mut flat)
        .map_err(|e| err(csv, e))?;
    crate::error::write_atomic(csv, &buf)
}

/// Reads a Parquet results table.
pub fn read_frame(path: &Path) -> Result<DataFrame, InputError> {
    let file = std::fs::File::open(path).map_err(|e| err(path, e))?;
    ParquetReader::new(file).finish().map_err(|e| err(path, e))
}

/// Reads a Parquet results table back into rows.
pub fn read_rows(path: &Path) -> Result<Vec<Row>, InputError> {
    let df = read_frame(path)?;
    let e = |e: PolarsError| err(path, e);
    let text = |name: &str| -> Result<Vec<String>, InputError> {
        let c = df.column(name).map_err(e)?.str().map_err(e)?.clone();
        Ok(c.iter().map(|v| v.unwrap_or("").to_string()).collect())
    };
    let opt_text = |name: &str| -> Result<Vec<Option<String>>, InputError> {
        let c = df.column(name).map_err(e)?.str().map_err(e)?.clone();
        Ok(c.iter().map(|v| v.map(str::to_string)).collect())
    };
    let num = |name: &str| -> Result<Vec<Option<f64>>, InputError> {
        let c = df
            .column(name)
            .map_err(e)?
            .cast(&DataType::Float64)
            .map_err(e)?;
        Ok(c.f64().map_err(e)?.iter().collect())
    };
    let (key, experiment, instance, algorithm, algorithm_name, status, message) = (
        text("key")?,
        text("experiment")?,
        text("instance")?,
        text("algorithm")?,
        text("algorithm_name")?,
        text("status")?,
        text("message")?,
    );
    let (instance_path, instance_hash, config_hash, git_revision) = (
        text("instance_path")?,
        text("instance_hash")?,
        text("config_hash")?,
        text("git_revision")?,
    );
    let solver_status = opt_text("solver_status")?;
    // Tables written before the column have no `placement`.
    let placement = if df.column("placement").is_ok() {
        opt_text("placement")?
    } else {
        vec![None; df.height()]
    };
    let (processors, memory, bandwidth, repetition) = (
        num("processors")?,
        num("memory")?,
        num("bandwidth")?,
        num("repetition")?,
    );
    let (period, planned, bound, speedup, sequential) = (
        num("period")?,
        num("planned_period")?,
        num("lower_bound")?,
        num("speedup")?,
        num("sequential")?,
    );
    let (peak_max, stages, solve, wall, gap, nodes) = (
        num("peak_memory_max")?,
        num("stages")?,
        num("solve_seconds")?,
        num("wall_seconds")?,
        // Tables written before the global bound call the solver's gap `gap`.
        if df.column("solver_gap").is_ok() {
            num("solver_gap")?
        } else {
            num("gap")?
        },
        num("nodes")?,
    );
    let optional = |name: &str| -> Result<Vec<Option<f64>>, InputError> {
        if df.column(name).is_ok() {
            num(name)
        } else {
            Ok(vec![None; df.height()])
        }
    };
    let global = optional("global_lower_bound")?;
    let infeasible: Vec<bool> = match df.column("case_infeasible") {
        Ok(c) => c
            .bool()
            .map_err(e)?
            .iter()
            .map(|v| v.unwrap_or(false))
            .collect(),
        Err(_) => vec![false; df.height()],
    };
    let peaks = df
        .column("peak_memory")
        .map_err(e)?
        .list()
        .map_err(e)?
        .clone();
    let mut rows = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let peak_memory = match peaks.get_as_series(i) {
            Some(s) => s
                .f64()
                .map_err(e)?
                .iter()
                .map(|v| v.unwrap_or(f64::NAN))
                .collect(),
            None => vec![],
        };
        rows.push(Row {
            key: key[i].clone(),
            experiment: experiment[i].clone(),
            config_hash: config_hash[i].clone(),
            git_revision: git_revision[i].clone(),
            instance: instance[i].clone(),
            instance_path: instance_path[i].clone(),
            instance_hash: instance_hash[i].clone(),
            processors: processors[i].unwrap_or(0.0) as usize,
            memory: memory[i].unwrap_or(f64::NAN),
            bandwidth: bandwidth[i].unwrap_or(f64::NAN),
            algorithm: algorithm[i].clone(),
            algorithm_name: algorithm_name[i].clone(),
            repetition: repetition[i].unwrap_or(0.0) as usize,
            status: status[i].clone(),
            period: period[i],
            planned_period: planned[i],
            lower_bound: bound[i],
            speedup: speedup[i],
            sequential: sequential[i].unwrap_or(f64::NAN),
            peak_memory,
            peak_memory_max: peak_max[i],
            stages: stages[i].unwrap_or(0.0) as usize,
            placement: placement[i].clone(),
            solve_seconds: solve[i],
            wall_seconds: wall[i].unwrap_or(f64::NAN),
            solver_status: solver_status[i].clone(),
            solver_gap: gap[i],
            nodes: nodes[i],
            global_lower_bound: global[i],
            gap: None,
            case_infeasible: infeasible[i],
            message: message[i].clone(),
        });
    }
    Ok(rows)
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

/// Merges Parquet tables (shards of one grid) into one, keeping one row per job key (the
/// last file wins), and writes it as Parquet and CSV beside `out`.
pub fn merge(inputs: &[std::path::PathBuf], out: &Path) -> Result<usize, crate::Error> {
    // Shards of one grid (`shard-i-of-n.parquet`): all n must be there, and their rows are
    // interleaved back into grid order (shard i holds jobs i-1, i-1+n, ...).
    let shards: Vec<Option<(usize, usize)>> = inputs.iter().map(|p| shard_of(p)).collect();
    let sharded = !shards.is_empty() && shards.iter().all(Option::is_some);
    if sharded {
        let n = shards[0].map(|s| s.1).unwrap_or(0);
        if let Some(i) = shards.iter().position(|s| s.map(|s| s.1) != Some(n)) {
            return Err(crate::Error::Input(InputError::new(
                inputs[i].display().to_string(),
                "",
                format!(
                    "is a shard of {} but the first table is a shard of {n}",
                    shards[i].map_or(0, |s| s.1)
                ),
            )));
        }
        let have: std::collections::HashSet<usize> = shards.iter().flatten().map(|s| s.0).collect();
        let missing: Vec<String> = (1..=n)
            .filter(|i| !have.contains(i))
            .map(|i| format!("shard-{i}-of-{n}"))
            .collect();
        if !missing.is_empty() {
            return Err(crate::Error::Input(InputError::new(
                "merge",
                "",
                format!(
                    "missing {} of {n} shards: {}",
                    missing.len(),
                    missing.join(", ")
                ),
            )));
        }
    }
    let mut all: Vec<(usize, usize, Row)> = Vec::new();
    for (t, path) in inputs.iter().enumerate() {
        let i = shards[t].map_or(t, |s| s.0);
        for (j, r) in read_rows(path)?.into_iter().enumerate() {
            all.push((j, i, r));
        }
    }
    if sharded {
        all.sort_by_key(|&(j, i, _)| (j, i));
    }
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
    // `-o x.csv` and `-o x.parquet` both write x.parquet and x.csv.
    write_tables(
        &rows,
        &out.with_extension("parquet"),
        &out.with_extension("csv"),
    )?;
    Ok(rows.len())
}

/// `(i, n)` when the file is named `shard-i-of-n.<ext>`.
fn shard_of(path: &Path) -> Option<(usize, usize)> {
    let stem = path.file_stem()?.to_str()?;
    let (i, n) = stem.strip_prefix("shard-")?.split_once("-of-")?;
    Some((i.parse().ok()?, n.parse().ok()?))
}

/// A summary table: per group (`by` columns and algorithm), how many runs, how many valid and
/// infeasible, the mean speedup, and with `ratio_to`, the geometric mean over the other
/// coordinates of `period / period of ratio_to` on the same instance, processors, memory,
/// bandwidth and repetition (Beaumont et al., ScaDL 2022, Figure 7), over the cases both
/// solved.
pub fn summary(df: &DataFrame, by: &[String], ratio_to: Option<&str>) -> PolarsResult<DataFrame> {
    // Sizes and bandwidths grouped in units people read.
    let df = &df
        .clone()
        .lazy()
        .with_columns([
            (col("memory") / lit(1073741824.0)).alias("memory_GiB"),
            (col("bandwidth") / lit(1e9)).alias("bandwidth_GBps"),
        ])
        .collect()?;
    let by: Vec<String> = by
        .iter()
        .map(|c| match c.as_str() {
            "memory" => "memory_GiB".to_string(),
            "bandwidth" => "bandwidth_GBps".to_string(),
            other => other.to_string(),
        })
        .collect();
    let by = by.as_slice();
    let mut group: Vec<Expr> = by.iter().map(|c| col(c.as_str())).collect();
    group.push(col("algorithm"));
    let base = df.clone().lazy().group_by_stable(group.clone()).agg([
        len().alias("runs"),
        col("status").eq(lit("valid")).sum().alias("valid"),
        col("status").eq(lit("timeout")).sum().alias("timeout"),
        col("status")
            .eq(lit("infeasible"))
            .sum()
            .alias("infeasible"),
        col("status").eq(lit("error")).sum().alias("error"),
        col("speedup").mean().alias("mean_speedup"),
        col("solve_seconds").mean().alias("mean_solve_seconds"),
    ]);
    let Some(reference) = ratio_to else {
        return base
            .sort(
                by.iter()
                    .map(String::as_str)
                    .chain(["algorithm"])
                    .collect::<Vec<_>>(),
                Default::default(),
            )
            .collect();
    };
    let keys = [
        "instance",
        "processors",
        "memory",
        "bandwidth",
        "repetition",
    ];
    let solved = df.clone().lazy().filter(col("period").is_not_null());
    let reference_periods = solved
        .clone()
        .filter(col("algorithm").eq(lit(reference)))
        .select(
            keys.iter()
                .map(|k| col(*k))
                .chain([col("period").alias("reference_period")])
                .collect::<Vec<_>>(),
        );
    let key_exprs: Vec<Expr> = keys.iter().map(|k| col(*k)).collect();
    let ratios = solved
        .join(
            reference_periods,
            key_exprs.clone(),
            key_exprs,
            JoinArgs::new(JoinType::Inner),
        )
        .with_column(
            (col("period") / col("reference_period"))
                .log(lit(std::f64::consts::E))
                .alias("log_ratio"),
        )
        .group_by_stable(group.clone())
        .agg([
            col("log_ratio")
                .mean()
                .exp()
                .alias(format!("geomean_ratio_to_{reference}")),
            len().alias("compared"),
        ]);
    base.join(ratios, group.clone(), group, JoinArgs::new(JoinType::Left))
        .sort(
            by.iter()
                .map(String::as_str)
                .chain(["algorithm"])
                .collect::<Vec<_>>(),
            Default::default(),
        )
        .collect()
}

/// A DataFrame as a JSON array of objects, for `--json`.
pub fn to_json(df: &DataFrame) -> serde_json::Value {
    let columns = df.columns();
    let mut out = Vec::with_capacity(df.height());
    for i in 0..df.height() {
        let mut obj = serde_json::Map::new();
        for c in columns {
            let v = match c.get(i) {
                Ok(AnyValue::Null) | Err(_) => serde_json::Value::Null,
                Ok(AnyValue::String(s)) => serde_json::Value::from(s),
                Ok(AnyValue::StringOwned(s)) => serde_json::Value::from(s.as_str()),
                Ok(AnyValue::Boolean(b)) => serde_json::Value::from(b),
                Ok(v) => match v.extract::<f64>() {
                    Some(x) if x.fract() == 0.0 && x.abs() < 9e15 && !v.dtype().is_float() => {
                        serde_json::Value::from(x as i64)
                    }
                    Some(x) => serde_json::Value::from(x),
                    None => serde_json::Value::from(v.to_string()),
                },
            };
            obj.insert(c.name().to_string(), v);
        }
        out.push(serde_json::Value::Object(obj));
    }
    serde_json::Value::Array(out)
}
