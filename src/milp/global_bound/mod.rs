//! A lower bound on the period of every plan of a case (any allocation, any periodic
//! pattern, memory included), and proofs that no plan fits at all: the smallest period at
//! which a relaxation of the planning problem has a solution, bisected on the period.
//! docs/bounds.md derives the relaxation and says why each of its facts and premises holds.
//!
//! The modules, each using only those listed before it:
//! - `relaxation`: [`Relaxation`], the case's quantities, and its closed forms (copies,
//!   windows, waits, one processor's facts, over the stage structures of its runs in its
//!   child `stages`; [`relaxation_fits`] on one assignment);
//! - `premises`: what the bound learns cannot fit ([`Premise`]), and the premises an
//!   assignment that fails the closed forms gives;
//! - [`anneal`]: simulated annealing over assignments by their closed-form threshold
//!   (seeds for `best`); [`infinite`]: the packing search at an infinite period;
//! - `scheduled`: the scheduled checks (each processor's focused scheduling MILP, then
//!   groups of them) and the premises their proofs give;
//! - `model`: the relaxation at one period as a MILP, the premises as rows;
//! - [`search`]: the exact search over assignments at one period;
//! - `probe`: one probe at one period (the search, then the MILP's loop), and what the
//!   probes of a case learn ([`Learnt`]);
//! - `exact`: [`decide_period`], the probe's loop with an exact check of every assignment
//!   that passes it;
//! - `bisection`: [`global_lower_bound`], the bisection over the period;
//! - `tests`: the unit tests of these modules.

// Index loops mirror the formulation (x[l][p], ...) and read better than iterators here.
#![allow(clippy::needless_range_loop)]

use std::time::Duration;

pub mod anneal;
mod bisection;
mod exact;
pub mod infinite;
mod model;
mod premises;
mod probe;
mod relaxation;
mod scheduled;
pub mod search;

pub use bisection::{global_lower_bound, global_lower_bound_learning, BoundOptions, GlobalBound};
pub use exact::{decide_period, Decision, Verdict};
pub use premises::Premise;
pub use probe::{probe_period, relaxation_feasible, Learnt, ProbeAnswer};
pub use relaxation::{relaxation_fits, stash_charges, Holding, Relaxation};

// The tuning constants, each with why it is where it is.

/// Periods of transfers per layer that fact 3's transfer term counts: beyond, they are left
/// out, which only weakens the bound (each level is a binary per layer in the MILP).
pub const MAX_TRANSFER_PERIODS: usize = 1;

/// Levels per period of fact 3's transfer term (each a binary per layer in the MILP).
const LEVELS_PER_PERIOD: usize = 1;

/// A plan within this relative gap of the bound closes its case, so with a known plan the
/// bisection probes the period that decides it early.
pub const CLOSING_GAP: f64 = 0.05;

/// Probes of the first phase before the closing one: the first probes, far from the
/// threshold, are cheap and teach the loop the premises the closing one needs.
const CLOSING_PROBE_AFTER: usize = 3;

/// Precision of the first phase (closed forms alone): the second phase goes on from where
/// it stops, so a finer one would be spent twice.
const FIRST_PHASE_PRECISION: f64 = 0.01;

/// The share of a probe's time the search gets before the MILP's loop: the search decides
/// most probes, and the loop keeps a third for those it does not.
const SEARCH_SHARE: f64 = 0.67;

/// Loops after an undecided search, all undecided, after which the search gets the whole
/// of each later probe of the case ([`Learnt`]): on the longest chains the loop's first
/// MILP may not get through its root node in the time left (docs/bounds.md, "When the
/// MILP's loop decides nothing").
const FUTILE_MILP_LOOPS: usize = 2;

/// The search's time in a probe without a time limit: the MILP decides what it leaves.
const SEARCH_WITHOUT_LIMIT: Duration = Duration::from_secs(60);

/// The most layers a scheduled check keeps on the processors it focuses on: its MILP has an
/// integer per two of their operations. A processor holding more is checked on its first
/// ones, the others left out, and a group takes only processors that fit whole.
const MAX_SCHEDULED_LAYERS: usize = 24;

/// The longest one scheduled check may take: one cut short proves nothing, and the time is
/// better spent on the next assignments.
const SCHEDULED_CHECK_LIMIT: Duration = Duration::from_secs(3);

/// What each check gets in the first pass over an assignment's processors: one proof
/// excludes the assignment, and most come in a fraction of a second.
const QUICK_CHECK_LIMIT: Duration = Duration::from_millis(300);

/// The least a proof's generalisation gets (else four times what the proof took): a weaker
/// problem may have a pattern that HiGHS takes long to find.
const GENERALISING_LIMIT: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests;
