
/// The dynamic programs stop at their deadline and say so: no plan claimed, nothing called
/// infeasible that was not searched.
#[test]
fn the_dynamic_programs_stop_at_their_deadline() {
    use pipeopt::algorithm::{Outcome, Planner, Problem};
    use pipeopt::model::Platform;
    use pipeopt::nets::random::random_chain;
    use std::time::{Duration, Instant};
    let chain = random_chain(3, 60);
    let platform = Platform::new(4, 1e6, 6.0);
    let problem = Problem {
        instance: &chain,
        platform: &platform,
    };
    let config = pipeopt::partition::madpipe::MadPipeConfig::default();
    let stopped = pipeopt::partition::madpipe::algorithm1_within(
        &chain,
        &platform,
        &config,
        Some(Duration::ZERO),
    );
    assert!(matches!(
        stopped,
        Err(pipeopt::partition::madpipe::MadPipeError::OutOfTime)
    ));
    let fwd: Vec<f64> = chain.layers.iter().map(|l| l.fwd).collect();
    let bwd: Vec<f64> = chain.layers.iter().map(|l| l.bwd).collect();
    assert!(pipeopt::partition::bipartition::fast_within(&fwd, &bwd, 4, Some(Instant::now())).is_err());
    assert!(pipeopt::partition::bipartition::fast_within(&fwd, &bwd, 4, None).is_ok());
    let pipedream = pipeopt::partition::pipedream::PipeDreamPlanner {
        period: None,
        ignore_memory: false,
        time_limit: Some(Duration::ZERO),
    };
    assert!(matches!(
        pipedream.plan(&problem).unwrap(),
        Outcome::NoPlanWithinLimit { .. }
    ));
    let bipartition = pipeopt::partition::bipartition::BiPartitionPlanner {
        time_limit: Some(Duration::ZERO),
    };
    assert!(matches!(
        bipartition.plan(&problem).unwrap(),
        Outcome::NoPlanWithinLimit { .. }
    ));
    // With time, the same planners find their plans.
    let pipedream = pipeopt::partition::pipedream::PipeDreamPlanner {
        time_limit: Some(Duration::from_secs(60)),
        ..pipedream
    };
    assert!(matches!(pipedream.plan(&problem).unwrap(), Outcome::Found(_)));
}

/// A model built under a size budget stops growing past it and is never handed to HiGHS.
#[test]
fn a_model_past_its_budget_is_not_solved() {
    use pipeopt::milp::solver::{MilpOptions, Model, SolveStatus};
    use std::time::Duration;
    let limit = Some(Duration::from_micros(10));
    let mut m = Model::new();
    m.set_budget(limit);
    let x: Vec<_> = (0..100).map(|_| m.binary(-1.0)).collect();
    for _ in 0..10 {
        let terms: Vec<_> = x.iter().map(|&v| (v, 1.0)).collect();
        m.le(&terms, 50.0);
    }
    assert!(m.over_budget());
    let r = m.solve(&MilpOptions::default(), limit).unwrap();
    assert_eq!(r.status, SolveStatus::NoSolutionWithinLimit);
}
