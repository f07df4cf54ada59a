//! The one shard policy of both kinds of sweep (periodic grid and synchronous schedules):
//! how shard files are named, what a shard says it is, and the checks every intake of
//! shards makes.
//!
//! `--shard i/n` runs jobs `i-1, i-1+n, ...` of the grid (`engine::Shard`) into its own
//! journal, `<output>/<name>/journal-shard-i-of-n.jsonl`, and records its
//! [`ShardIdentity`] (experiment, configuration hash, shard i of n) under the name
//! `shard-i-of-n` beside it: the periodic kind as its shard table
//! (`shard-i-of-n.parquet`, the identity in the Parquet metadata, with the CSV beside it),
//! the synchronous kind as `shard-i-of-n.json` (its tables need every configuration: its
//! best runs compare configurations with each other). Shards come back together by
//! identity, never by file name:
//!
//! - periodic: `pipeopt merge` joins the shard tables (`sweep::table::merge`);
//! - synchronous: the run without `--shard` takes the shard journals of its folder into its
//!   own journal ([`take_in_shards`]), runs nothing they hold and writes the tables and
//!   figures.
//!
//! Both refuse, through [`check_shards`], shards of another experiment or configuration
//! hash, shards of grids cut in different numbers, a shard given twice and a missing one,
//! naming the file at fault.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::sweep::config::ExperimentHeader;
use crate::sweep::engine::{self, JobKind, Shard};

impl Shard {
    /// `shard-i-of-n`: the name of a shard's files (its table, its identity).
    pub fn stem(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }

    /// `journal-shard-i-of-n.jsonl`: the shard's journal, in the experiment's folder.
    pub fn journal_name(&self) -> String {
        format!("journal-{}.jsonl", self.stem())
    }

    /// The shard a journal's file name says (`journal-shard-i-of-n.jsonl`), if it is one.
    pub fn of_journal_name(name: &str) -> Option<Shard> {
        let stem = name
            .strip_prefix("journal-shard-")?
            .strip_suffix(".jsonl")?;
        let (i, n) = stem.split_once("-of-")?;
        let (index, count) = (i.parse().ok()?, n.parse().ok()?);
        (1..=count)
            .contains(&index)
            .then_some(Shard { index, count })
    }
}

/// What a sweep's output holds: the experiment, the hash of its file's text, and which
/// shard of its grid (1 of 1: the whole grid, as a run without `--shard` and `merge` write
/// it). A shard's files carry it (see the module's header), so that a renamed file is still
/// what it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardIdentity {
    pub experiment: String,
    pub config_hash: String,
    /// This table's shard, 1-based.
    pub shard: usize,
    /// How many shards the grid was cut into.
    pub shards: usize,
}

impl ShardIdentity {
    /// The identity of `header`'s experiment run as `shard` (none: the whole grid).
    pub fn of(header: &ExperimentHeader, shard: Option<Shard>) -> ShardIdentity {
        let shard = shard.unwrap_or(Shard { index: 1, count: 1 });
        ShardIdentity {
            experiment: header.name.clone(),
            config_hash: header.config_hash.clone(),
            shard: shard.index,
            shards: shard.count,
        }
    }

    /// `shard-i-of-n`, as shard files are named.
    pub fn shard_name(&self) -> String {
        Shard {
            index: self.shard,
            count: self.shards,
        }
        .stem()
    }
}

/// Checks that `found` (each shard's file, named as errors should name it, with its
/// identity) is every shard of one grid exactly once. With `expected` (an experiment's
/// header), every shard must be of that experiment and that
/// configuration hash; without, of the first shard's. `whole` names the set in the error
/// about a missing shard.
pub fn check_shards(
    found: &[(String, ShardIdentity)],
    expected: Option<&ExperimentHeader>,
    whole: &str,
) -> Result<(), InputError> {
    let refuse = |source: &str, reason: String| InputError::new(source, "", reason);
    let Some((first_source, first)) = found.first() else {
        return Err(InputError::new(whole, "", "no shard"));
    };
    let (reference, experiment, config_hash) = match expected {
        Some(h) => (h.source.as_str(), h.name.as_str(), h.config_hash.as_str()),
        None => (
            first_source.as_str(),
            first.experiment.as_str(),
            first.config_hash.as_str(),
        ),
    };
    for (k, (source, identity)) in found.iter().enumerate() {
        let differs = if identity.experiment != experiment {
            Some(format!(
                "experiment {:?}, not {experiment:?}",
                identity.experiment
            ))
        } else if identity.config_hash != config_hash {
            Some(format!(
                "configuration hash {}, not {config_hash} (the experiment file changed between \
                 the shards)",
                identity.config_hash
            ))
        } else if identity.shards != first.shards {
            Some(format!(
                "a shard of {}, not of {}",
                identity.shards, first.shards
            ))
        } else {
            None
        };
        if let Some(d) = differs {
            let reference = if identity.shards != first.shards {
                first_source.as_str()
            } else {
                reference
            };
            return Err(refuse(
                source,
                format!("is {d} as {reference} is: not the same grid"),
            ));
        }
        if let Some(j) = found[..k]
            .iter()
            .position(|(_, i)| i.shard == identity.shard)
        {
            return Err(refuse(
                source,
                format!(
                    "is {} of {:?}, as {} is: each shard once",
                    identity.shard_name(),
                    identity.experiment,
                    found[j].0
                ),
            ));
        }
        if identity.shard == 0 || identity.shard > identity.shards {
            return Err(refuse(
                source,
                format!("claims to be {}, which no grid has", identity.shard_name()),
            ));
        }
    }
    let n = first.shards;
    let missing: Vec<String> = (1..=n)
        .filter(|i| !found.iter().any(|(_, x)| x.shard == *i))
        .map(|i| Shard { index: i, count: n }.stem())
        .collect();
    if !missing.is_empty() {
        return Err(InputError::new(
            whole,
            "",
            format!(
                "missing {} of {n} shards of {:?}: {}",
                missing.len(),
                first.experiment,
                missing.join(", ")
            ),
        ));
    }
    Ok(())
}

/// Where a shard of the synchronous kind records its identity: `shard-i-of-n.json` in the
/// experiment's folder `dir`.
pub fn identity_path(dir: &Path, shard: Shard) -> PathBuf {
    dir.join(format!("{}.json", shard.stem()))
}

/// Records a shard's identity beside its journal (atomically), before it runs, so that even
/// a shard cut short is taken in as what it is.
pub fn write_identity(dir: &Path, identity: &ShardIdentity) -> Result<PathBuf, crate::Error> {
    let shard = Shard {
        index: identity.shard,
        count: identity.shards,
    };
    let path = identity_path(dir, shard);
    let text = serde_json::to_vec_pretty(identity).map_err(|e| crate::Error::io(&path, e))?;
    crate::error::write_atomic(&path, &text)?;
    Ok(path)
}

/// The shard journals in `dir` (`journal-shard-i-of-n.jsonl`), sorted, each with its
/// identity (`shard-i-of-n.json` beside it; a journal without one is refused).
fn shard_journals(dir: &Path) -> Result<Vec<(PathBuf, ShardIdentity)>, InputError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(Vec::new()); // no output folder yet: no shard
    };
    let mut journals: Vec<(PathBuf, Shard)> = entries
        .filter_map(|e| {
            let path = e.ok()?.path();
            let shard = Shard::of_journal_name(path.file_name()?.to_str()?)?;
            Some((path, shard))
        })
        .collect();
    journals.sort_by(|a, b| a.0.cmp(&b.0));
    journals
        .into_iter()
        .map(|(journal, shard)| {
            let path = identity_path(dir, shard);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                InputError::new(
                    journal.display().to_string(),
                    "",
                    format!(
                        "has no identity ({}: {e}); a shard run writes one beside its journal",
                        path.display()
                    ),
                )
            })?;
            let identity = serde_json::from_str(&text).map_err(|e| {
                InputError::new(
                    path.display().to_string(),
                    "",
                    format!("is not a shard identity: {e}"),
                )
            })?;
            Ok((journal, identity))
        })
        .collect()
}

/// Takes the shard journals of `dir` (the experiment's folder) into its journal
/// (`journal.jsonl`): after [`check_shards`] against `header`, every record that is no error and whose key the journal lacks is appended, so
/// that the run without a shard finds those jobs done. The journal keeps the last record of
/// a key, so taking a shard in twice changes nothing.
pub fn take_in_shards<K: JobKind>(
    dir: &Path,
    header: &ExperimentHeader,
) -> Result<(), crate::Error> {
    let shards = shard_journals(dir)?;
    if shards.is_empty() {
        return Ok(());
    }
    let found: Vec<(String, ShardIdentity)> = shards
        .iter()
        .map(|(p, i)| (p.display().to_string(), i.clone()))
        .collect();
    check_shards(&found, Some(header), &dir.display().to_string()).map_err(|mut e| {
        e.reason = format!(
            "{}; run the missing or stale shards with this file, or remove the shard files \
             (journal-shard-*, shard-*) from {}",
            e.reason,
            dir.display()
        );
        e
    })?;
    let path = dir.join("journal.jsonl");
    let mut journal = engine::Journal::open(&path)?;
    let have: std::collections::HashSet<String> = engine::read_journal::<K>(&path)?
        .iter()
        .filter(|r| !K::is_error(r))
        .map(|r| K::record_key(r).to_string())
        .collect();
    for (shard, _) in &shards {
        for record in engine::read_journal::<K>(shard)? {
            if !K::is_error(&record) && !have.contains(K::record_key(&record)) {
                journal
                    .append(&record)
                    .map_err(|e| crate::Error::io(&path, e))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_names_round_trip_and_others_are_no_shard() {
        let s = Shard {
            index: 3,
            count: 16,
        };
        assert_eq!(s.stem(), "shard-3-of-16");
        assert_eq!(Shard::of_journal_name(&s.journal_name()), Some(s));
        for name in [
            "journal.jsonl",
            "journal-shard-0-of-2.jsonl",
            "journal-shard-3-of-2.jsonl",
            "journal-shard-1-of-2.json",
            "shard-1-of-2.json",
        ] {
            assert_eq!(Shard::of_journal_name(name), None, "{name}");
        }
    }
}
