//! Assignments whose relaxation threshold is low, found by simulated annealing: starting
//! points for plans of any allocation.
//!
//! The relaxation of the parent module judges an assignment (the processor of each layer)
//! in microseconds by its closed forms ([`relaxation_fits`]: loads, static memory, the
//! batches each stash must hold along one batch's chain, the waits a resource forces, the
//! average memory). The smallest period at which an assignment satisfies them, its
//! *threshold*, is a lower bound on every plan of that assignment, and on the real chains
//! the assignments with the lowest thresholds are often the ones with the shortest plans
//! (where several stages of a processor do not interleave much with the others'). This
//! module searches the assignments by that proxy with argmin's simulated annealing
//! (Kirkpatrick, Gelatt, Vecchi, *Optimization by Simulated Annealing*, Science 220, 1983):
//! a move reassigns one layer, moves a range of up to [`MAX_RANGE`] consecutive layers to
//! one processor, or exchanges the processors of two neighbouring layers. `best` schedules
//! the assignments it returns exactly (the scheduling MILP) and judges them; nothing here
//! is a proof, and nothing here is trusted without the judge.
//!
//! Runs are deterministic: the random numbers come from a generator seeded by the caller.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

use argmin::core::{CostFunction, Error, Executor};
use argmin::solver::simulatedannealing::{Anneal, SATempFunc, SimulatedAnnealing};
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::relaxation::{relaxation_fits, tighten, Relaxation};

/// The longest range of consecutive layers one move reassigns.
pub const MAX_RANGE: usize = 8;

/// Relative precision of each threshold (a bisection on the period).
const THRESHOLD_PRECISION: f64 = 1e-3;

/// Initial temperature, relative to the lowest period (costs are periods over it): a move
/// that lengthens the threshold by 2% of that period is taken about once in four at first.
const INITIAL_TEMPERATURE: f64 = 0.02;

/// What [`anneal_assignments`] is asked.
#[derive(Debug, Clone)]
pub struct AnnealOptions {
    /// Where each run of the annealing starts (one run per start, in order); assignments
    /// with `relaxation.processors` labels at most.
    pub starts: Vec<Vec<usize>>,
    /// Iterations of each run.
    pub iterations: u64,
    /// No run starts, and a run stops, after this instant.
    pub deadline: Option<Instant>,
    /// The distinct assignments to return, lowest thresholds first.
    pub keep: usize,
    /// Seed of the moves and of the acceptance test.
    pub seed: u64,
}

/// The problem argmin anneals: an assignment, its threshold as the cost.
struct Thresholds<'a> {
    relax: &'a Relaxation,
    processors: usize,
    /// Thresholds lie in `[lo, hi]`; an assignment that does not fit at `hi` costs `2 hi`.
    lo: f64,
    hi: f64,
    deadline: Option<Instant>,
    rng: RefCell<Xoshiro256PlusPlus>,
    /// Every assignment evaluated (canonical labels) with its threshold.
    seen: RefCell<HashMap<Vec<usize>, f64>>,
}

impl Thresholds<'_> {
    fn below(&self, k: usize) -> usize {
        (self.rng.borrow_mut().next_u64() % k as u64) as usize
    }

    /// The threshold of `assignment`, remembered under its canonical labels.
    fn threshold(&self, assignment: &[usize]) -> f64 {
        let key = canonical(assignment);
        if let Some(&t) = self.seen.borrow().get(&key) {
            return t;
        }
        let t = if relaxation_fits(self.relax, &key, self.hi) {
            tighten(self.relax, &key, self.lo, self.hi, THRESHOLD_PRECISION)
        } else {
            2.0 * self.hi
        };
        self.seen.borrow_mut().insert(key, t);
        t
    }
}

impl CostFunction for Thresholds<'_> {
    type Param = Vec<usize>;
    type Output = f64;

    fn cost(&self, assignment: &Self::Param) -> Result<f64, Error> {
        Ok(self.threshold(assignment) / self.lo)
    }
}

impl Anneal for Thresholds<'_> {
    type Param = Vec<usize>;
    type Output = Vec<usize>;
    type Float = f64;

    fn anneal(&self, assignment: &Vec<usize>, _temperature: f64) -> Result<Vec<usize>, Error> {
        let n = assignment.len();
        let mut next = assignment.clone();
        if n < 2 || self.deadline.is_some_and(|d| Instant::now() >= d) {
            return Ok(next);
        }
        match self.below(3) {
            0 => {
                let l = self.below(n);
                next[l] = self.below(self.processors);
            }
            1 => {
                let first = self.below(n);
                let last = (first + self.below(MAX_RANGE)).min(n - 1);
                let p = self.below(self.processors);
                next[first..=last].iter_mut().for_each(|q| *q = p);
            }
            _ => {
                let l = self.below(n - 1);
                next.swap(l, l + 1);
            }
        }
        Ok(next)
    }
}

/// Relabels processors in order of first use (the canonical form of an assignment up to
/// the symmetry of identical processors).
pub fn canonical(assignment: &[usize]) -> Vec<usize> {
    let mut map = HashMap::new();
    assignment
        .iter()
        .map(|&p| {
            let next = map.len();
            *map.entry(p).or_insert(next)
        })
        .collect()
}

/// Assignments with low thresholds in `[lo, hi]` (module docs), lowest first, each with its
/// threshold; at most `options.keep`, all distinct up to relabelling.
pub fn anneal_assignments(
    relax: &Relaxation,
    lo: f64,
    hi: f64,
    options: &AnnealOptions,
) -> Result<Vec<(f64, Vec<usize>)>, Error> {
    let closed = relax.clone().closed_forms_only();
    let n = relax.layers;
    let processors = relax.processors.min(n).max(1);
    let lo = lo.max(f64::MIN_POSITIVE);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(options.seed);
    let mut seen = HashMap::new();
    for start in &options.starts {
        if start.len() != n || start.iter().any(|&p| p >= processors) {
            continue;
        }
        if options.deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        let problem = Thresholds {
            relax: &closed,
            processors,
            lo,
            hi,
            deadline: options.deadline,
            rng: RefCell::new(Xoshiro256PlusPlus::seed_from_u64(rng.next_u64())),
            seen: RefCell::new(std::mem::take(&mut seen)),
        };
        let solver = SimulatedAnnealing::new_with_rng(
            INITIAL_TEMPERATURE,
            Xoshiro256PlusPlus::seed_from_u64(rng.next_u64()),
        )?
        .with_temp_func(SATempFunc::Boltzmann);
        let result = Executor::new(problem, solver)
            .configure(|state| state.param(start.clone()).max_iters(options.iterations))
            .run()?;
        if let Some(problem) = result.problem.problem {
            seen = problem.seen.into_inner();
        }
    }
    let mut out: Vec<(f64, Vec<usize>)> = seen
        .into_iter()
        .filter(|(_, t)| *t <= hi)
        .map(|(a, t)| (t, a))
        .collect();
    out.sort_by(|x, y| x.0.total_cmp(&y.0).then_with(|| x.1.cmp(&y.1)));
    out.truncate(options.keep);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Platform;
    use crate::nets::random::random_chain;

    #[test]
    fn every_returned_threshold_is_the_assignments_own_and_the_run_is_deterministic() {
        let inst = random_chain(7, 10);
        // Memory for about half of the chain's weights and two batches of its stashes:
        // memory binds on every processor.
        let sums = inst.sums();
        let memory = 1.5 * sums.weights(1, inst.len()) + 2.0 * sums.stash(1, inst.len());
        let plat = Platform::new(3, memory / 3.0 * 1.5, 10.0);
        let relax = Relaxation::new(&inst, &plat);
        let lo = crate::model::bounds::period_lower_bound(&inst, &plat);
        let hi = relax.sequential_period();
        let contiguous: Vec<usize> = (0..inst.len()).map(|l| l * 3 / inst.len()).collect();
        let options = AnnealOptions {
            starts: vec![contiguous],
            iterations: 300,
            deadline: None,
            keep: 5,
            seed: 1,
        };
        let found = anneal_assignments(&relax, lo, hi, &options).unwrap();
        assert!(!found.is_empty());
        let closed = relax.clone().closed_forms_only();
        for w in found.windows(2) {
            assert!(w[0].0 <= w[1].0);
            assert_ne!(w[0].1, w[1].1);
        }
        for (t, a) in &found {
            assert!(relaxation_fits(&closed, a, *t), "{a:?} does not fit at {t}");
            assert!(
                !relaxation_fits(&closed, a, *t / (1.0 + 2.0 * THRESHOLD_PRECISION))
                    || *t <= lo * (1.0 + 2.0 * THRESHOLD_PRECISION)
            );
        }
        assert_eq!(found, anneal_assignments(&relax, lo, hi, &options).unwrap());
    }

    #[test]
    fn on_a_small_chain_the_annealing_finds_the_lowest_threshold_of_every_assignment() {
        let processors = 3;
        for seed in [3, 11] {
            let inst = random_chain(seed, 7);
            let sums = inst.sums();
            let memory = 1.5 * sums.weights(1, inst.len()) + 2.0 * sums.stash(1, inst.len());
            let plat = Platform::new(processors, memory / 1.5, 5.0);
            let relax = Relaxation::new(&inst, &plat);
            let closed = relax.clone().closed_forms_only();
            let lo = crate::model::bounds::period_lower_bound(&inst, &plat);
            let hi = relax.sequential_period();
            // Every assignment, exhaustively.
            let n = inst.len();
            let mut lowest = f64::INFINITY;
            for code in 0..processors.pow(n as u32) {
                let a: Vec<usize> = (0..n)
                    .map(|l| code / processors.pow(l as u32) % processors)
                    .collect();
                if relaxation_fits(&closed, &a, hi) {
                    lowest = lowest.min(tighten(&closed, &a, lo, hi, THRESHOLD_PRECISION));
                }
            }
            assert!(lowest.is_finite());
            let options = AnnealOptions {
                starts: vec![vec![0; n], (0..n).map(|l| l * processors / n).collect()],
                iterations: 3000,
                deadline: None,
                keep: 3,
                seed,
            };
            let found = anneal_assignments(&relax, lo, hi, &options).unwrap();
            assert!(
                found[0].0 <= lowest * (1.0 + THRESHOLD_PRECISION),
                "seed {seed}: annealing {} against {lowest}",
                found[0].0
            );
        }
    }
}
