//! The executor and the profiler on the CPU, through the library's public paths (as a user's
//! code would call them). They are unit tests of the library rather than integration tests
//! so that the libtorch tier builds no second `pipeopt` binary: cargo builds the binaries for
//! every integration test, and a binary with libtorch is 53 MB that these tests never run.

mod executor;
mod profile;

use crate::model::{Allocation, Instance, Pattern, Placement, Plan, Platform};

/// The plan file of `algorithm`'s `pattern` of `allocation`, as `pipeopt plan` writes one.
fn plan_file(
    instance: &Instance,
    platform: Platform,
    allocation: &Allocation,
    pattern: Pattern,
    algorithm: &str,
) -> Plan {
    Plan {
        instance: instance.clone(),
        instance_hash: instance.content_hash(),
        platform,
        algorithm: algorithm.into(),
        planned_period: None,
        placement: Placement::Stages(allocation.clone()),
        pattern: Some(pattern),
        lower_bound: None,
        solve_seconds: None,
    }
}
