//! docs/model.md section 3: stages (contiguous layer ranges) mapped to processors.

use serde::{Deserialize, Serialize};

use crate::error::InputError;

/// A contiguous range of layers `first..=last` (1-based) on one processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Stage {
    pub first: usize,
    pub last: usize,
    pub processor: usize,
}

/// A partitioning of the chain into stages, in chain order, each on a processor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Allocation {
    pub stages: Vec<Stage>,
}

impl Allocation {
    pub fn new(stages: Vec<Stage>) -> Self {
        Allocation { stages }
    }

    /// Stage `i` is layers `starts[i]+1 ..= starts[i+1]` on processor `i`, where `starts`
    /// holds the 0-based index of each stage's first layer (`0,60,120,180`).
    pub fn from_starts(starts: &[usize], layers: usize) -> Result<Self, InputError> {
        let bad = |r: String| Err(InputError::new("--partition", "", r));
        if starts.first() != Some(&0) {
            return bad("the first stage must start at layer index 0".into());
        }
        let mut stages = Vec::with_capacity(starts.len());
        for (i, &s) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(layers);
            if end <= s {
                return bad(format!(
                    "stage starts must increase and stay below L = {layers}: {s} then {end}"
                ));
            }
            stages.push(Stage {
                first: s + 1,
                last: end,
                processor: i,
            });
        }
        Ok(Allocation { stages })
    }

    /// Stage `i` is layers `sizes[0]+..+sizes[i-1]+1 ..` on processor `i`.
    pub fn from_boundaries(lasts: &[usize]) -> Self {
        let mut first = 1;
        let stages = lasts
            .iter()
            .enumerate()
            .map(|(p, &last)| {
                let s = Stage {
                    first,
                    last,
                    processor: p,
                };
                first = last + 1;
                s
            })
            .collect();
        Allocation { stages }
    }

    pub fn len(&self) -> usize {
        self.stages.len()
    }

    pub fn is_empty(&self) -> bool {
        self.stages.is_empty()
    }

    /// True when every processor holds at most one stage.
    pub fn is_contiguous(&self) -> bool {
        let mut seen = std::collections::HashSet::new();
        self.stages.iter().all(|s| seen.insert(s.processor))
    }

    /// Whether the cut after stage `s` crosses processors (needs CF_s and CB_s).
    pub fn crosses(&self, s: usize) -> bool {
        s + 1 < self.stages.len() && self.stages[s].processor != self.stages[s + 1].processor
    }

    /// Checks that stages cover `1..=layers` in order with no gap and name processors `< processors`.
    pub fn check(&self, layers: usize, processors: usize) -> Result<(), InputError> {
        let bad = |i: usize, f: &str, r: String| {
            Err(InputError::new("plan", format!("stages[{i}].{f}"), r))
        };
        if self.stages.is_empty() {
            return Err(InputError::new("plan", "stages", "no stage"));
        }
        let mut next = 1;
        for (i, s) in self.stages.iter().enumerate() {
            if s.first != next {
                return bad(
                    i,
                    "first",
                    format!(
                        "is {} but the previous stage ends at layer {}",
                        s.first,
                        next - 1
                    ),
                );
            }
            if s.last < s.first || s.last > layers {
                return bad(
                    i,
                    "last",
                    format!("is {} (first {}, L = {layers})", s.last, s.first),
                );
            }
            if s.processor >= processors {
                return bad(
                    i,
                    "processor",
                    format!("is {} but there are {processors} processors", s.processor),
                );
            }
            next = s.last + 1;
        }
        if next != layers + 1 {
            return Err(InputError::new(
                "plan",
                "stages",
                format!("cover layers 1..={} of {layers}", next - 1),
            ));
        }
        Ok(())
    }
}
