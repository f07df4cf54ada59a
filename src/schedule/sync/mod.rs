//! MODEL.md section 7: synchronous pipeline schedules as data, one ordered instruction
//! stream per worker. Only the stream types and the GPipe and DAPPLE generators exist so
//! far; the simulator and the other generators (GEMS, Chimera, MixPipe, BaPipe) are not
//! written yet.

pub mod dapple;
pub mod gpipe;
pub mod sim;

use serde::{Deserialize, Serialize};

/// Direction of a pipeline: `Down` runs stage 0 on worker 0; `Up` (bidirectional schemes)
/// runs stage 0 on worker D-1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Pipeline {
    Down,
    Up,
}

/// One operation of a worker's stream. Stages and micro-batches are numbered from 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Instr {
    Forward {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
    Backward {
        stage: usize,
        micro_batch: usize,
        pipeline: Pipeline,
    },
}

/// One ordered stream per worker: `schedule[w]` is worker `w`'s program.
pub type Schedule = Vec<Vec<Instr>>;

pub(crate) fn f(stage: usize, micro_batch: usize) -> Instr {
    Instr::Forward {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

pub(crate) fn b(stage: usize, micro_batch: usize) -> Instr {
    Instr::Backward {
        stage,
        micro_batch,
        pipeline: Pipeline::Down,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Every (stage, micro-batch, F/B) appears exactly once, on worker == stage.
    pub(crate) fn check_single_pipeline(s: &Schedule, d: usize, n: usize) {
        assert_eq!(s.len(), d);
        let mut seen = HashSet::new();
        for (w, stream) in s.iter().enumerate() {
            assert_eq!(stream.len(), 2 * n);
            for op in stream {
                let stage = match *op {
                    Instr::Forward { stage, .. } | Instr::Backward { stage, .. } => stage,
                };
                assert_eq!(stage, w);
                assert!(seen.insert(*op), "{op:?} twice");
            }
        }
        assert_eq!(seen.len(), 2 * n * d);
    }

    #[test]
    fn gpipe_and_dapple_hold_every_op_once() {
        for d in 1..6 {
            for n in 1..12 {
                check_single_pipeline(&gpipe::gpipe(d, n), d, n);
                check_single_pipeline(&dapple::dapple(d, n), d, n);
            }
        }
    }

    #[test]
    fn dapple_worker0_warms_up_d_forwards() {
        let s = dapple::dapple(4, 8);
        assert_eq!(&s[0][..5], &[f(0, 0), f(0, 1), f(0, 2), f(0, 3), b(0, 0)]);
        assert_eq!(&s[3][..3], &[f(3, 0), b(3, 0), f(3, 1)]);
    }
}
