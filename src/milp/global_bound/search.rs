//! The relaxation at one finite period, decided by a depth-first search over assignments
//! instead of the MILP: the same question ([`relaxation_fits`]: is there an assignment of
//! layers to processors that meets every closed-form fact of the parent module at the
//! period?), answered exactly, often in milliseconds where the MILP needs seconds.
//!
//! The search places the layers in chain order, each on a processor already used or on the
//! next unused one (processors are identical: labels by first appearance). A partial
//! assignment of layers `1..=k` is a processor holding its layers so far, with the cuts
//! so far crossing; every per-layer fact of [`Relaxation::holding_fits`] only gets harder
//! when a processor receives later layers and more cuts cross (the parent module's
//! premises rest on the same property), so a partial assignment that fails it has no
//! completion that passes. The search prunes with
//! - each processor's facts on its layers so far (the processor that received layer `k`;
//!   every processor when the cut before `k` crosses, since its transfers lengthen every
//!   window upstream);
//! - link loads so far;
//! - the load of the layers still to place against the time left on all processors;
//! - what the layers still to place add at least to the average memory of whichever
//!   processor takes them (static memory and each stash over its window `S(j) / T`)
//!   against the room left under the processors' averages;
//! - the facts of the stage structures (`stages.rs`) of a processor whose runs are all
//!   closed, checked when a cut after its last layer crosses: a run still open may grow,
//!   and a longer run may be cut into stages that need less.
//!
//! A complete assignment is accepted only by [`relaxation_fits`] itself, so "feasible"
//! comes with an assignment the MILP would accept too, and "infeasible" means that every
//! assignment was excluded by a fact it fails: exactly the MILP's answer (the tests check
//! both against exhaustive enumeration). One it rejects gives the premises of its
//! processors that fail ([`Premise::Exact`]), which prune the rest of the search as soon as
//! their last layer is placed. A deadline makes it undecided.
//!
//! The premises that the closed forms do not imply (a processor's runs that its scheduling
//! MILP proved unschedulable, [`Premise::Scheduled`]; an assignment an exact check
//! excluded, [`Premise::Excluded`]) prune too: each as soon as its last layer is placed
//! (one with a tail also whenever a cut below it crosses, since the transfer below only
//! grows), and all of them on a complete assignment. A caller's `leaf` check may add premises
//! against an assignment that passes the rest (the scheduled checks); the search then goes
//! on, which keeps it exact: the branches already closed were closed by fewer premises.
//!
//! A search cut short by its deadline, or ended by an assignment it returns, says where it
//! stopped ([`Position`]: the choice taken at each depth, in the order the search tries
//! them, which depends only on the layers placed before). Everything before that position
//! was excluded by facts and premises valid at the period, hence at every shorter one (a
//! plan at a shorter period stretches into one at the longer), so a later search at that
//! period or a shorter one may start there ([`Frontiers`], kept with the premises of the
//! case) instead of walking again through what was excluded: the bisection's probes, and
//! `best`'s exact checks, which ask one period again and again as they exclude assignments
//! one at a time. A caller that lifts an exclusion it had not proven (an assignment set
//! aside for a while) moves the positions back to it.

use std::time::Instant;

use super::anneal::canonical;
use super::infinite::Answer;
use super::premises::{held_apart, Premise};
use super::relaxation::{relaxation_fits, ChainWindows, Holding, Relaxation, Windows};

/// What a caller's check says of an assignment that passes the relaxation: premises that
/// exclude it (none: accepted).
pub type Leaf<'a> = dyn FnMut(&[usize]) -> crate::error::Result<Vec<Premise>> + 'a;

/// Decides the relaxation at `period` (finite) until `deadline` or after `node_limit`
/// nodes (undecided then): with `premises` (those valid at `period`; the ones `leaf` adds
/// are appended), and `leaf` asked about every assignment that passes everything else;
/// starting from `from` (everything before it is taken as excluded; the start:
/// `Position::default()`). With the answer, where the search stopped: the assignment
/// found, the first subtree left unexplored, or [`Position::end`] when no assignment is
/// left.
pub fn decide_from(
    relax: &Relaxation,
    period: f64,
    premises: &mut Vec<Premise>,
    deadline: Option<Instant>,
    leaf: &mut Leaf<'_>,
    from: &Position,
    node_limit: u64,
) -> crate::error::Result<(Answer, Position)> {
    let n = relax.layers;
    let procs = relax.processors.min(n).max(1);
    let mut rest_load = vec![0.0; n + 1];
    let mut rest_memory = vec![0.0; n + 1];
    for j in (0..n).rev() {
        rest_load[j] = rest_load[j + 1] + relax.u[j];
        rest_memory[j] =
            rest_memory[j + 1] + 3.0 * relax.weights[j] + relax.stash[j] * relax.suffix(j) / period;
    }
    let mut search = Search {
        relax,
        period,
        procs,
        cap_time: period * (1.0 + relax.slack),
        cap_mem: relax.memory * (1.0 + relax.slack),
        rest_load,
        rest_memory,
        deadline,
        node_limit,
        assignment: Vec::with_capacity(n),
        path: Vec::with_capacity(n),
        from: &from.0,
        on_path: !from.0.is_empty(),
        stopped_at: None,
        loads: vec![0.0; procs],
        links: vec![0.0; procs * procs],
        needs: vec![0.0; procs],
        chain: ChainWindows::new(relax, &vec![false; n], period, Windows::Waited),
        crossing: vec![false; n],
        premises,
        leaf,
        error: None,
        nodes: 0,
        out_of_time: false,
    };
    let found = search.place(0);
    if let Some(e) = search.error {
        return Err(e);
    }
    let stopped_at = search.stopped_at.take();
    Ok(if found {
        (Answer::Feasible(search.assignment), Position(search.path))
    } else if search.out_of_time {
        (
            Answer::Undecided,
            stopped_at.map_or_else(|| from.clone(), Position),
        )
    } else {
        (Answer::Infeasible, Position::end())
    })
}

/// A place in the search's depth-first order: at each depth, the index of the choice taken
/// among the processors the search tries there, in the order it tries them (which depends
/// only on the layers placed before: see [`Search::order`]). Positions compare as the
/// order visits them: one before another (lexicographically, a prefix first) starts
/// earlier; a search that stopped at a position has finished every assignment before it
/// and none at or after it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Position(pub Vec<usize>);

impl Position {
    /// After every assignment: a search from here has nothing left.
    pub fn end() -> Position {
        Position(vec![usize::MAX])
    }

    /// The position of the complete assignment `a` (relabelled by first appearance, as the
    /// search labels processors).
    pub fn of(relax: &Relaxation, a: &[usize]) -> Position {
        let a = canonical(a);
        let procs = relax.processors.min(relax.layers).max(1);
        let mut loads = vec![0.0; procs];
        let mut path = Vec::with_capacity(a.len());
        for (k, &p) in a.iter().enumerate() {
            let order = Search::order(&a[..k], &loads, procs);
            // Every canonical label is among the choices (the used ones and the next).
            path.push(order.iter().position(|&q| q == p).unwrap_or(usize::MAX));
            if let Some(l) = loads.get_mut(p) {
                *l += relax.u[k];
            }
        }
        Position(path)
    }
}

/// How far the searches at each period got, kept across probes of one case: at a recorded
/// period, every assignment before the recorded position is excluded by facts and premises
/// valid there, hence at every shorter period (a plan at a shorter period stretches into
/// one at the longer); so a search at `T` may start from the furthest position recorded at
/// `T` or above. Only proven exclusions may stand behind a position: one that a caller
/// lifts again (an assignment set aside, not proven) moves the positions back to it
/// ([`Frontiers::back_to`]).
#[derive(Debug, Clone, Default)]
pub struct Frontiers {
    reached: Vec<(f64, Position)>,
}

impl Frontiers {
    /// Where a search at `period` may start: the furthest position recorded at `period` or
    /// above (the very start when none).
    pub fn start(&self, period: f64) -> Position {
        self.reached
            .iter()
            .filter(|(t, _)| *t >= period)
            .map(|(_, p)| p)
            .max()
            .cloned()
            .unwrap_or_default()
    }

    /// Records that a search at `period` finished everything before `position`; records
    /// that this one makes useless (at a period no longer, no further) are dropped.
    pub fn record(&mut self, period: f64, position: Position) {
        if self
            .reached
            .iter()
            .any(|(t, p)| *t >= period && *p >= position)
        {
            return;
        }
        self.reached
            .retain(|(t, p)| !(*t <= period && *p <= position));
        self.reached.push((period, position));
    }

    /// Moves every position recorded at `period` or below back to `position` where it is
    /// further: what lies after `position` there is no longer known to be excluded.
    pub fn back_to(&mut self, period: f64, position: &Position) {
        for (t, p) in &mut self.reached {
            if *t <= period && *p > *position {
                *p = position.clone();
            }
        }
    }
}

/// Whether `premise` excludes the partial assignment `a` (layers `0..a.len()`); with
/// `complete`, `a` is the whole chain, otherwise only a premise whose last layer is the
/// last one placed is looked at (earlier ones were, when their last layer was placed).
fn excludes(relax: &Relaxation, premise: &Premise, a: &[usize], complete: bool) -> bool {
    let (holdings, tail) = match premise {
        Premise::Excluded { assignment, .. } => {
            return complete && canonical(assignment) == canonical(a);
        }
        Premise::Scheduled { holdings, tail, .. } => (holdings.as_slice(), *tail),
        // Learnt from the facts of the stage structures, which the search checks only on
        // processors whose runs are closed and on complete assignments (`accept`): they
        // prune as soon as their last layer is placed.
        Premise::Exact(h) => (std::slice::from_ref(h), None),
        // Implied by the facts the search checks (they come from them).
        Premise::Limited(_) => return false,
    };
    let last = holdings
        .iter()
        .map(|h| {
            h.runs
                .last()
                .map_or(0, |r| r.1)
                .max(h.cuts.last().map_or(0, |c| c + 1))
        })
        .max()
        .unwrap_or(0);
    if last >= a.len() {
        return false;
    }
    let Some(x) = tail else {
        return (complete || last + 1 == a.len()) && held_apart(holdings, a);
    };
    // With a tail: also whenever a cut below the holding's last layer has just crossed
    // (the transfer below only grows as the chain goes on).
    let k = a.len();
    let below = holdings[0].runs.last().map_or(0, |r| r.1);
    let crossed_below = k >= 2 && k - 2 > below && a[k - 2] != a[k - 1];
    (complete || last + 1 == k || crossed_below)
        && Relaxation::reaches(relax.tail_transfer(&holdings[0], a), x)
        && held_apart(holdings, a)
}

struct Search<'a, 'b> {
    relax: &'a Relaxation,
    period: f64,
    procs: usize,
    cap_time: f64,
    cap_mem: f64,
    /// Load of layers `k..`.
    rest_load: Vec<f64>,
    /// The least that layers `k..` add to the averages of the processors that take them.
    rest_memory: Vec<f64>,
    deadline: Option<Instant>,
    node_limit: u64,
    assignment: Vec<usize>,
    /// The index of each choice of `assignment` among those tried at its depth.
    path: Vec<usize>,
    /// Where the search starts ([`Position`]), and whether it is still on the way there
    /// (every choice so far the one `from` names).
    from: &'a [usize],
    on_path: bool,
    /// The first subtree left unexplored when the time ran out.
    stopped_at: Option<Vec<usize>>,
    loads: Vec<f64>,
    /// `links[p * procs + q]` (`p < q`): the load of the link between `p` and `q`.
    links: Vec<f64>,
    /// Each processor's average need ([`Relaxation::holding_need`]) on its layers so far.
    needs: Vec<f64>,
    /// The transfers and waits of the cuts crossing so far (`crossing`), shared by every
    /// processor's check and computed again only when a cut crosses.
    chain: ChainWindows,
    crossing: Vec<bool>,
    premises: &'a mut Vec<Premise>,
    leaf: &'a mut Leaf<'b>,
    /// The first error of `leaf`: the search stops.
    error: Option<crate::error::Error>,
    nodes: u64,
    out_of_time: bool,
}

impl Search<'_, '_> {
    /// The processors the search tries for the layer after `placed`, in order: the
    /// processor of the layer before first (no cut), then the others, least loaded first,
    /// then a new one.
    fn order(placed: &[usize], loads: &[f64], procs: usize) -> Vec<usize> {
        let used = placed.iter().max().map_or(0, |&m| m + 1);
        let before = placed.last().copied();
        let mut order: Vec<usize> = before.into_iter().collect();
        let mut others: Vec<usize> = (0..used).filter(|&p| Some(p) != before).collect();
        others.sort_by(|&a, &b| loads[a].total_cmp(&loads[b]));
        order.extend(others);
        if used < procs {
            order.push(used);
        }
        order
    }

    /// Whether layers `k..` can be placed after the current ones.
    fn place(&mut self, k: usize) -> bool {
        let relax = self.relax;
        if k == relax.layers {
            return self.accept();
        }
        self.nodes += 1;
        if self.nodes >= self.node_limit
            || (self.nodes & 255 == 0 && self.deadline.is_some_and(|d| Instant::now() >= d))
        {
            if !self.out_of_time {
                self.stopped_at = Some(self.path.clone());
            }
            self.out_of_time = true;
        }
        if self.out_of_time {
            return false;
        }
        let before = self.assignment.last().copied();
        let order = Self::order(&self.assignment, &self.loads, self.procs);
        // On the way to `from`: the choices before its own were finished by an earlier
        // search.
        let resume = if self.on_path {
            self.from.get(k).copied()
        } else {
            None
        };
        for (i, p) in order.into_iter().enumerate().skip(resume.unwrap_or(0)) {
            self.on_path = resume == Some(i);
            if self.loads[p] + relax.u[k] > self.cap_time {
                continue;
            }
            let link = before
                .filter(|&q| q != p)
                .map(|q| q.min(p) * self.procs + q.max(p));
            if let Some(e) = link {
                let load = self.links[e] + relax.link_factor * relax.comm[k - 1];
                if load > self.cap_time {
                    continue;
                }
            }
            // Time left on every processor for the rest of the chain.
            let room: f64 = self
                .loads
                .iter()
                .enumerate()
                .map(|(q, &l)| self.cap_time - l - if q == p { relax.u[k] } else { 0.0 })
                .sum();
            if self.rest_load[k + 1] > room {
                continue;
            }
            self.assignment.push(p);
            self.path.push(i);
            let saved = self.needs.clone();
            let saved_chain = link.map(|_| {
                self.crossing[k - 1] = true;
                let mut chain = self.chain.clone();
                chain.cross(relax, &self.crossing, self.period, k - 1);
                std::mem::replace(&mut self.chain, chain)
            });
            let fits = self.memory_fits(p, link.is_some())
                && !self
                    .premises
                    .iter()
                    .any(|h| excludes(relax, h, &self.assignment, false));
            if fits {
                // Restored from copies, not by subtraction: no rounding drift over the search.
                let (load, link_load) = (self.loads[p], link.map(|e| self.links[e]));
                self.loads[p] += relax.u[k];
                if let Some(e) = link {
                    self.links[e] += relax.link_factor * relax.comm[k - 1];
                }
                if self.place(k + 1) {
                    return true;
                }
                self.loads[p] = load;
                if let (Some(e), Some(v)) = (link, link_load) {
                    self.links[e] = v;
                }
            }
            self.assignment.pop();
            self.path.pop();
            self.needs = saved;
            if let Some(chain) = saved_chain {
                self.crossing[k - 1] = false;
                self.chain = chain;
            }
            if self.out_of_time {
                return false;
            }
        }
        self.on_path = false;
        false
    }

    /// Whether a complete assignment passes: the relaxation, every premise, then `leaf`
    /// (whose premises join the others).
    fn accept(&mut self) -> bool {
        let a = &self.assignment;
        if self
            .premises
            .iter()
            .any(|h| excludes(self.relax, h, a, true))
        {
            return false;
        }
        if !relaxation_fits(self.relax, a, self.period) {
            // What the search did not check on the way (the stage structures' facts):
            // the processors that fail, as premises that prune the rest of the search.
            let learnt = self.relax.violated(a, self.period, Windows::Waited);
            self.premises.extend(learnt);
            return false;
        }
        match (self.leaf)(a) {
            Ok(found) if found.is_empty() => true,
            Ok(found) => {
                self.premises.extend(found);
                false
            }
            Err(e) => {
                self.error = Some(e);
                self.out_of_time = true;
                false
            }
        }
    }

    /// Whether the processors' facts hold on the current partial assignment (processor `p`
    /// just received a layer; with `crossed`, a cut crossed before it and every processor
    /// is checked again), and the rest of the chain still fits under their averages.
    fn memory_fits(&mut self, p: usize, crossed: bool) -> bool {
        let relax = self.relax;
        let k = self.assignment.len();
        let check: Vec<usize> = if crossed {
            (0..self.procs).collect()
        } else {
            vec![p]
        };
        for q in check {
            let Some(h) = Holding::of(&self.assignment, q) else {
                continue;
            };
            match relax.holding_need_on(&h, self.period, &self.chain) {
                Some(need) => self.needs[q] = need,
                None => return false,
            }
        }
        // The processor of the layer before the cut that just crossed has closed its last
        // run: its runs no longer change, so the facts of their stage structures hold for
        // every completion (later cuts only lengthen the windows, more runs only add).
        if crossed && relax.stage_facts {
            let closed = self.assignment[k - 2];
            if let Some(h) = Holding::of(&self.assignment, closed) {
                let fixed = relax.fixed_memory(&h);
                if !relax.stages_fit(&h, self.period, &self.chain, fixed, true) {
                    return false;
                }
            }
        }
        let room: f64 = self.needs.iter().map(|&need| self.cap_mem - need).sum();
        self.rest_memory[k] <= room
    }
}

#[cfg(test)]
mod tests {
    use super::super::premises::obeys;
    use super::*;
    use crate::milp::general::for_each_allocation;
    use crate::model::Platform;
    use crate::nets::random::{one_processor_memory, random_chain};

    /// The search's answer against every assignment of small random chains, at periods from
    /// the load bound up and memory from loose to tight: "infeasible" exactly when no
    /// assignment passes [`relaxation_fits`], and every assignment it returns passes.
    #[test]
    fn agrees_with_exhaustive_search() {
        let mut decided = [0usize; 2];
        for seed in 1..=30u64 {
            let n = 4 + (seed as usize % 4);
            let instance = random_chain(seed, n);
            let total: f64 = instance.layers.iter().map(|l| l.fwd + l.bwd).sum();
            for procs in [2, 3] {
                for share in [0.35, 0.6, 1.0] {
                    for bandwidth in [2.0, 20.0] {
                        let platform = Platform::new(
                            procs,
                            share * one_processor_memory(&instance),
                            bandwidth,
                        );
                        let relax = Relaxation::new(&instance, &platform);
                        for factor in [0.4, 0.6, 0.9, 1.5] {
                            let period = factor * total;
                            let mut any = false;
                            for_each_allocation(n, procs, |a| {
                                any |= relaxation_fits(&relax, a, period)
                            });
                            let mut none = Vec::new();
                            let (answer, _) = decide_from(
                                &relax,
                                period,
                                &mut none,
                                None,
                                &mut |_| Ok(Vec::new()),
                                &Position::default(),
                                u64::MAX,
                            )
                            .unwrap();
                            match answer {
                                Answer::Feasible(a) => {
                                    assert!(relaxation_fits(&relax, &a, period));
                                    decided[1] += 1;
                                }
                                Answer::Infeasible => {
                                    assert!(!any, "seed {seed}, P = {procs}, {share}, {period}");
                                    decided[0] += 1;
                                }
                                Answer::Undecided => unreachable!("no deadline"),
                            }
                        }
                    }
                }
            }
        }
        // Both answers occur, so neither direction is checked vacuously.
        assert!(decided[0] > 100 && decided[1] > 100, "{decided:?}");
    }

    /// A search cut short again and again (a few nodes at a time), each time going on from
    /// where the last one stopped, with every assignment it returns excluded before it goes
    /// on (as [`super::decide_period`] does), returns every assignment that passes the
    /// relaxation exactly once, in its order, at the position [`Position::of`] gives, and
    /// ends "infeasible" only after the last one: resuming skips nothing and repeats nothing.
    #[test]
    fn resuming_where_a_search_stopped_misses_nothing() {
        let mut returned = 0usize;
        for seed in 61..81u64 {
            let n = 4 + (seed as usize % 4);
            let instance = random_chain(seed, n);
            let total: f64 = instance.layers.iter().map(|l| l.fwd + l.bwd).sum();
            for procs in [2, 3] {
                for share in [0.5, 1.0] {
                    let platform =
                        Platform::new(procs, share * one_processor_memory(&instance), 10.0);
                    let relax = Relaxation::new(&instance, &platform);
                    for factor in [0.5, 0.9] {
                        let period = factor * total;
                        let mut expected = Vec::new();
                        for_each_allocation(n, procs, |a| {
                            if relaxation_fits(&relax, a, period) {
                                expected.push(canonical(a));
                            }
                        });
                        let mut premises = Vec::new();
                        let mut from = Position::default();
                        let mut found: Vec<Vec<usize>> = Vec::new();
                        // Enough nodes to walk back down to `from` and take one step more.
                        let limit = (n + 2 + (seed as usize % 5)) as u64;
                        loop {
                            let (answer, at) = decide_from(
                                &relax,
                                period,
                                &mut premises,
                                None,
                                &mut |_| Ok(Vec::new()),
                                &from,
                                limit,
                            )
                            .unwrap();
                            match answer {
                                Answer::Infeasible => {
                                    assert_eq!(at, Position::end());
                                    break;
                                }
                                Answer::Feasible(a) => {
                                    assert!(relaxation_fits(&relax, &a, period));
                                    assert_eq!(at, Position::of(&relax, &a));
                                    assert!(at >= from, "{at:?} before {from:?}");
                                    premises.push(Premise::Excluded {
                                        assignment: a.clone(),
                                        period,
                                    });
                                    found.push(a);
                                }
                                Answer::Undecided => {
                                    assert!(at > from, "no progress from {from:?}");
                                }
                            }
                            from = at;
                        }
                        // Each passing assignment once, in the search's order.
                        let positions: Vec<Position> =
                            found.iter().map(|a| Position::of(&relax, a)).collect();
                        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{found:?}");
                        let mut sorted = found.clone();
                        sorted.sort();
                        expected.sort();
                        assert_eq!(sorted, expected, "seed {seed}, P = {procs}, T = {period}");
                        returned += found.len();
                    }
                }
            }
        }
        assert!(returned > 100, "{returned}");
    }

    /// A search at a period starts from the furthest position recorded at that period or a
    /// longer one, never from one recorded only at shorter periods; moving back applies to
    /// the records at the period and below.
    #[test]
    fn frontiers_start_from_longer_periods_only() {
        let at = |v: &[usize]| Position(v.to_vec());
        let mut f = Frontiers::default();
        assert_eq!(f.start(1.0), Position::default());
        f.record(2.0, at(&[0, 1]));
        f.record(1.0, at(&[0, 2]));
        assert_eq!(f.start(2.5), at(&[]));
        assert_eq!(f.start(2.0), at(&[0, 1]));
        assert_eq!(f.start(1.5), at(&[0, 1]));
        assert_eq!(f.start(1.0), at(&[0, 2]));
        assert_eq!(f.start(0.5), at(&[0, 2]));
        // A record no further at a longer period is dropped by one further.
        f.record(3.0, at(&[1]));
        assert_eq!(f.start(0.5), at(&[1]));
        assert_eq!(f.start(3.0), at(&[1]));
        f.back_to(1.0, &at(&[0, 0, 1]));
        assert_eq!(f.start(3.0), at(&[1]));
        assert_eq!(f.start(1.0), at(&[1]));
        f.back_to(3.0, &at(&[0]));
        assert_eq!(f.start(0.5), at(&[0]));
        assert!(Position::end() > at(&[7, 7, 7]));
    }

    /// With a caller's check that rejects assignments by premises (here: any processor
    /// holding three layers or more, a premise on its runs and crossing cuts), the search
    /// either returns an assignment that passes the relaxation and the check, or has
    /// learnt premises that exclude every assignment passing the relaxation: it goes on
    /// after a rejection without losing any assignment, and prunes by the premises.
    #[test]
    fn premises_added_during_the_search_keep_it_exact() {
        let mut answers = [0usize; 2];
        for seed in 40..60u64 {
            let n = 4 + (seed as usize % 3);
            let instance = random_chain(seed, n);
            let total: f64 = instance.layers.iter().map(|l| l.fwd + l.bwd).sum();
            for procs in [2, 3] {
                let platform = Platform::new(procs, one_processor_memory(&instance), 20.0);
                let relax = Relaxation::new(&instance, &platform);
                let period = 0.8 * total;
                let mut premises = Vec::new();
                // Every other seed, the premises have tails: the cuts below the holding's
                // last layer as a transfer sum (`Premise::Scheduled::tail`).
                let tails = seed % 2 == 0;
                let mut leaf = |a: &[usize]| {
                    Ok((0..procs)
                        .filter_map(|q| Holding::of(a, q))
                        .filter(|h| h.layers() >= 3)
                        .map(|mut holding| {
                            let tail = tails.then(|| {
                                let last = holding.runs.last().unwrap().1;
                                holding.cuts.retain(|&c| c <= last);
                                relax.tail_transfer(&holding, a)
                            });
                            Premise::Scheduled {
                                holdings: vec![holding],
                                period,
                                tail,
                            }
                        })
                        .collect::<Vec<_>>())
                };
                let (answer, _) = decide_from(
                    &relax,
                    period,
                    &mut premises,
                    None,
                    &mut leaf,
                    &Position::default(),
                    u64::MAX,
                )
                .unwrap();
                let excluded = |a: &[usize]| premises.iter().any(|p| !obeys(&relax, p, a, period));
                match answer {
                    Answer::Feasible(a) => {
                        assert!(relaxation_fits(&relax, &a, period) && !excluded(&a));
                        // Only processors of at most two layers pass the check.
                        assert!((0..procs).all(|q| a.iter().filter(|&&p| p == q).count() < 3));
                        answers[1] += 1;
                    }
                    Answer::Infeasible => {
                        for_each_allocation(n, procs, |a| {
                            assert!(
                                !relaxation_fits(&relax, a, period) || excluded(a),
                                "seed {seed}, P = {procs}: {a:?} passes and was not excluded"
                            );
                        });
                        answers[0] += 1;
                    }
                    Answer::Undecided => unreachable!("no deadline"),
                }
            }
        }
        assert!(answers[0] > 5 && answers[1] > 5, "{answers:?}");
    }
}
