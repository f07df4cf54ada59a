//! Tests of the PyTorch schedule files: schedules written as PyTorch writes them and read
//! back, every send before the use of its receive, and malformed files refused.

use super::*;
use crate::schedule::sync::sim::{simulate, Execution, StageCosts};
use crate::schedule::sync::{b, f, input_gradient, weight_gradient, SCHEDULES};

#[test]
fn dapple_on_two_stages_is_written_as_pytorch_writes_it() {
    let s = crate::schedule::sync::dapple::dapple(2, 2);
    let text = write(&s, "dapple", TorchFormat::ComputeOnly).unwrap();
    assert_eq!(text, "0F0,0F1,0B0,0B1\n1F0,1B0,1F1,1B1\n");
    // What PyTorch 2.11's runtime builds from the compute-only rows (its markers, then
    // `_add_send_recv`): rank 0 computes 0F0 and sends it (1RECV_F0 lands on rank 1), rank 1
    // runs 1F0; in the next round rank 0 sends 0F1 (1RECV_F1) before rank 1 runs 1B0 and
    // sends its gradient back.
    let text = write(&s, "dapple", TorchFormat::WithCommunication).unwrap();
    assert_eq!(
        text,
        "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,0REDUCE_GRAD,0RESHARD\n\
         1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,1REDUCE_GRAD,1RESHARD\n"
    );
}

/// ZB-H1's split backwards are PyTorch's `I` and `W` actions; only `I` sends a gradient,
/// and `REDUCE_GRAD` follows the stage's last `W`.
#[test]
fn split_backwards_are_written_as_i_and_w() {
    let s = (crate::schedule::sync::zero_bubble::ZB_H1.generate)(2, 2, None, None).unwrap();
    let text = write(&s, "zb-h1", TorchFormat::ComputeOnly).unwrap();
    assert_eq!(text, "0F0,0F1,0I0,0W0,0I1,0W1\n1F0,1I0,1F1,1I1,1W0,1W1\n");
    let text = write(&s, "zb-h1", TorchFormat::WithCommunication).unwrap();
    let rows: Vec<&str> = text.lines().collect();
    assert!(rows[1].contains("1I0,1SEND_B0"), "{text}");
    assert!(!text.contains("SEND_B0,1W") && rows[1].ends_with("1W1,1REDUCE_GRAD,1RESHARD"));
    let (back, d, n) = read(&text).unwrap();
    assert_eq!((back, d, n), (s.clone(), 2, 2));
    assert_eq!(s[0][2..4], [input_gradient(0, 0), weight_gradient(0, 0)]);
}

/// Every one-direction schedule of the registry, written in both formats and read back,
/// gives its own streams, which the simulator runs to the same iteration time.
#[test]
fn every_one_direction_schedule_round_trips() {
    let (d, n) = (4, 8);
    let costs = StageCosts::uniform(d, 1.0, 2.0, 0.0);
    let mut written = 0;
    for desc in SCHEDULES {
        let kind = desc.default_kind(d);
        let Ok(schedule) = kind.generate(d, n) else {
            continue;
        };
        let result = write(&schedule, desc.name, TorchFormat::ComputeOnly);
        if schedule
            .iter()
            .flatten()
            .any(|i| i.pipeline() == Pipeline::Up)
        {
            assert!(
                matches!(result, Err(TorchCsvError::Bidirectional(_))),
                "{}",
                desc.name
            );
            continue;
        }
        if desc.stages_per_worker > 1 {
            // Compute-only, which PyTorch lowers itself; not read back (several stages per
            // rank).
            let text = result.unwrap();
            assert_eq!(text.lines().count(), d / desc.stages_per_worker);
            assert!(read(&text).is_err());
            assert!(matches!(
                write(&schedule, desc.name, TorchFormat::WithCommunication),
                Err(TorchCsvError::LoweringVirtualStages(_))
            ));
            continue;
        }
        for format in [TorchFormat::ComputeOnly, TorchFormat::WithCommunication] {
            let text = write(&schedule, desc.name, format).unwrap();
            let (back, dd, nn) = read(&text).unwrap();
            assert_eq!(
                (back.clone(), dd, nn),
                (schedule.clone(), d, n),
                "{}",
                desc.name
            );
            let a = simulate(&schedule, &costs, Execution::Serial).unwrap();
            let b = simulate(&back, &costs, Execution::Serial).unwrap();
            assert_eq!(a.makespan_seconds, b.makespan_seconds);
        }
        written += 1;
    }
    assert!(written >= 4, "only {written} one-direction schedules");
}

/// Each transfer of the lowering appears once, the send after the computation it follows on
/// the sender's row, the receive before the computation that needs it on the receiver's.
#[test]
fn every_send_precedes_its_receive_use() {
    let s = crate::schedule::sync::gpipe::gpipe(4, 6);
    let text = write(&s, "gpipe", TorchFormat::WithCommunication).unwrap();
    let rows: Vec<Vec<&str>> = text.lines().map(|l| l.split(',').collect()).collect();
    for (rank, row) in rows.iter().enumerate() {
        for mb in 0..6 {
            let at = |a: String| row.iter().position(|x| *x == a);
            if rank > 0 {
                let recv = at(format!("{rank}RECV_F{mb}")).unwrap();
                assert!(recv < at(format!("{rank}F{mb}")).unwrap());
                assert!(
                    at(format!("{rank}SEND_B{mb}")).unwrap() > at(format!("{rank}B{mb}")).unwrap()
                );
            }
            if rank < 3 {
                assert!(
                    at(format!("{rank}SEND_F{mb}")).unwrap() > at(format!("{rank}F{mb}")).unwrap()
                );
                let recv = at(format!("{rank}RECV_B{mb}")).unwrap();
                assert!(recv < at(format!("{rank}B{mb}")).unwrap());
            }
        }
    }
}

#[test]
fn files_pipeopt_cannot_model_are_refused_naming_the_action() {
    let err = |text: &str| read(text).unwrap_err().to_string();
    assert!(err("0F0,1F0\n0B0\n").contains("stage 1 on rank 0"));
    assert!(err("0F0,0X0\n").contains("unknown action type"));
    assert!(err("F0\n").contains("starts with its stage"));
    assert!(err("0Fx\n").contains("row 0"));
    assert_eq!(read("\n").unwrap_err(), TorchCsvError::Empty);
    // The actions PyTorch adds for sharded stages are skipped; idle steps are empty cells.
    let (s, d, n) = read("0UNSHARD,0F0,,0B0,0RESHARD\n").unwrap();
    assert_eq!((s, d, n), (vec![vec![f(0, 0), b(0, 0)]], 1, 1));
}
