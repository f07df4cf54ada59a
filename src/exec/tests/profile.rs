//! The networks of `nets/` as libtorch layers, the profiler and the executor on them, on the
//! CPU (feature `torch`). Real numbers come from a GPU
//! (`pipeopt profile --device cuda`, results/profiles.md); here: the layers compute the
//! shapes and sizes the descriptions promise, the profile is an exact-size instance, and a
//! real network runs a plan with gradients equal to the sequential run's.

use super::plan_file;
use crate::exec::profile::{profile, profile_ops, ProfileOptions};
use crate::exec::torchnet::{batches, build, BuildOptions};
use crate::exec::{alloc, execute, tensor_bytes, ExecOptions};
use crate::model::{Allocation, Platform};
use crate::nets::{analytic_instance, network, op_instance, DType, DeviceModel};
use crate::schedule::one_f_one_b_star::min_period_fitting;
use tch::{Device, Kind, Tensor};

const CPU: BuildOptions = BuildOptions {
    dtype: DType::F32,
    device: Device::Cpu,
    seed: 1,
    dropout: false,
};

/// torchvision's parameter counts (`sum(p.numel() for p in model.parameters())`), here
/// counted on the tensors the builder made, not on the descriptions.
#[test]
fn built_layers_have_torchvision_parameter_counts() {
    for (name, count) in [
        ("resnet50", 25_557_032i64),
        ("resnet101", 44_549_160),
        ("inception_v3", 23_834_568),
        ("densenet121", 7_978_856),
        ("vgg16", 138_357_544),
    ] {
        let desc = network(name, 224).unwrap();
        let net = build(&desc, CPU);
        let n: i64 = net
            .layers
            .iter()
            .flat_map(|l| &l.params)
            .map(Tensor::numel)
            .map(|n| n as i64)
            .sum();
        assert_eq!(n, count, "{name}");
        assert_eq!(net.layers.len(), desc.blocks.len());
    }
}

/// Every block's output has the shape its description computed (so `out` is exact), for
/// image sizes that exercise ceil-mode pooling and odd feature maps.
#[test]
fn every_block_computes_its_described_shape() {
    for (name, image) in [
        ("resnet50", 67),
        ("inception_v3", 107),
        ("densenet121", 71),
        ("vgg16", 45),
    ] {
        let desc = network(name, image).unwrap();
        let net = build(&desc, CPU);
        let data = batches(&desc, 2, 1, 5, DType::F32, Device::Cpu).remove(0);
        let mut x = data.input;
        tch::no_grad(|| {
            for (layer, block) in net.layers.iter().zip(&desc.blocks) {
                x = (layer.forward)(&layer.params, &x);
                let want: Vec<i64> = std::iter::once(2)
                    .chain(block.output_shape().iter().map(|&d| d as i64))
                    .collect();
                assert_eq!(x.size(), want, "{name} at {image}: block {}", block.name);
            }
        });
        let loss = (net.loss)(&x, &data.target);
        assert!(loss.double_value(&[]).is_finite());
    }
}

/// The transformer blocks (embedding, attention, layer norm, GELU, tied sizes) run and give
/// their described shapes: gpt24's embedding, first three layers and head (the whole stack
/// holds 1.2 billion parameters, too many for a CPU test).
#[test]
fn transformer_blocks_run() {
    let mut desc = network("gpt24", 224).unwrap();
    let head = desc.blocks.pop().unwrap();
    desc.blocks.truncate(4);
    desc.blocks.push(head);
    let net = build(
        &desc,
        BuildOptions {
            dropout: true,
            ..CPU
        },
    );
    let seq = desc.input[0] as i64;
    let mut x = Tensor::randint(1000, [1, seq], (Kind::Int64, Device::Cpu));
    tch::no_grad(|| {
        for (layer, block) in net.layers.iter().zip(&desc.blocks) {
            x = (layer.forward)(&layer.params, &x);
            let want: Vec<i64> = std::iter::once(1)
                .chain(block.output_shape().iter().map(|&d| d as i64))
                .collect();
            assert_eq!(x.size(), want, "block {}", block.name);
        }
    });
}

/// The shim's `grad` equals tch's backward from `(y * g).sum()`.
#[test]
fn grad_with_an_upstream_gradient_equals_the_scalar_backward() {
    let desc = network("resnet50", 64).unwrap();
    let net = build(&desc, CPU);
    let data = batches(&desc, 2, 1, 3, DType::F32, Device::Cpu).remove(0);
    let layer = &net.layers[0];
    let ps: Vec<Tensor> = layer
        .params
        .iter()
        .map(|p| p.detach().set_requires_grad(true))
        .collect();
    let inputs: Vec<&Tensor> = ps.iter().collect();
    let y = (layer.forward)(&ps, &data.input);
    let g = y.randn_like();
    let mine = alloc::grad(&y, &g, &inputs).unwrap();
    let y2 = (layer.forward)(&ps, &data.input);
    let theirs = Tensor::run_backward(&[(&y2 * &g).sum(Kind::Float)], &inputs, false, false);
    for (a, b) in mine.iter().zip(&theirs) {
        let err = (a - b).abs().max().double_value(&[]);
        let scale = b.abs().max().double_value(&[]);
        assert!(err <= 1e-4 * scale, "{err} vs {scale}");
    }
    // Its error path: an output that needs no gradient.
    let z = Tensor::ones([2], (Kind::Float, Device::Cpu));
    assert!(alloc::backward_with(&z, &z, &[&z]).is_err());
    // No allocator statistics on the CPU; the version is the one of the headers.
    assert!(alloc::stats(Device::Cpu).is_none());
    assert!(alloc::torch_version().starts_with("2."));
}

/// On the CPU the profile is an instance with exact sizes (the analytic ones), measured
/// positive times, and an honest `meta` (stash analytic: no allocator statistics).
#[test]
fn a_cpu_profile_is_an_exact_size_instance() {
    let desc = network("resnet50", 64).unwrap();
    let options = ProfileOptions {
        batch: 2,
        warmup: 0,
        reps: 1,
        ..ProfileOptions::default()
    };
    let (inst, report) = profile(&desc, &options).unwrap();
    inst.check().unwrap();
    let analytic = analytic_instance(&desc, 2, DType::F32, &DeviceModel::h100()).unwrap();
    assert_eq!(inst.len(), analytic.len());
    assert_eq!(inst.input, analytic.input);
    for (m, a) in inst.layers.iter().zip(&analytic.layers) {
        assert_eq!(m.out, a.out, "{}", m.name);
        assert_eq!(m.weights, a.weights, "{}", m.name);
        assert_eq!(m.stash, a.stash, "{}", m.name);
        assert!(m.fwd > 0.0 && m.bwd > 0.0, "{}", m.name);
    }
    assert!(report.out_equal && report.weights_equal);
    assert!(report.stash_total_ratio.is_none());
    assert!(report.whole_forward > 0.0 && report.whole_step > report.whole_forward * 0.5);
    assert!(report.forward_ratio.is_finite() && report.step_ratio.is_finite());
    assert_eq!(inst.meta["times"], "measured");
    assert!(inst.meta["stash"].as_str().unwrap().starts_with("analytic"));
    assert_eq!(inst.meta["torch_version"], alloc::torch_version());
    // Bad options: errors, not panics.
    let zero = ProfileOptions {
        reps: 0,
        ..options.clone()
    };
    assert!(profile(&desc, &zero).is_err());
}

/// The op-level profile is the op-level chain of `op_instance` (same linearization: same
/// layers, sizes, overlaps and shared tensors) with measured times: every timed op
/// positive, each chain layer's time the sum of its ops', views untimed.
#[test]
fn an_op_level_profile_is_the_op_chain_with_measured_times() {
    for name in ["resnet50", "inception_v3"] {
        let desc = network(name, 75).unwrap();
        let options = ProfileOptions {
            batch: 2,
            warmup: 0,
            reps: 1,
            back_to_back: 2,
            ..ProfileOptions::default()
        };
        let (inst, report) = profile_ops(&desc, &options).unwrap();
        inst.check().unwrap();
        let analytic = op_instance(&desc, 2, DType::F32, &DeviceModel::h100()).unwrap();
        assert_eq!(inst.name, format!("{}-measured", analytic.name));
        assert_eq!(inst.len(), analytic.len(), "{name}");
        assert_eq!(inst.stash_shared, analytic.stash_shared, "{name}");
        for (m, a) in inst.layers.iter().zip(&analytic.layers) {
            assert_eq!(m.name, a.name);
            assert_eq!((m.out, m.weights, m.stash), (a.out, a.weights, a.stash));
            assert_eq!(m.stash_overlap, a.stash_overlap, "{}", m.name);
            assert!(m.fwd > 0.0 && m.bwd >= 0.0, "{}", m.name);
        }
        assert_eq!(report.granularity, "op");
        assert!(report.out_equal && report.weights_equal, "{name}");
        assert!(report.layers.iter().all(|o| o.fwd > 0.0));
        // Every timed op is in the chain once: the sums agree (up to rounding).
        let chain: f64 = inst.layers.iter().map(|l| l.fwd + l.bwd).sum();
        assert!((chain - report.sum_fwd_bwd).abs() <= 1e-9 * chain, "{name}");
        // Flatten is a view: not timed, not in the report.
        assert!(report.layers.iter().all(|o| !o.name.ends_with("flatten")));
        assert_eq!(inst.meta["granularity"], "op");
        assert_eq!(inst.meta["timing"]["back_to_back"], 2);
    }
}

/// A real network (ResNet-50 at 32x32, batch 2) runs a 1F1B* plan on 3 processors: the
/// pipelined gradients equal the sequential run's, and every batch's loss is finite.
#[test]
fn resnet50_runs_a_pipelined_plan_with_exact_gradients() {
    let desc = network("resnet50", 32).unwrap();
    let instance = analytic_instance(&desc, 2, DType::F32, &DeviceModel::h100()).unwrap();
    let l = instance.len();
    let alloc = Allocation::from_starts(&[0, l / 3, 2 * l / 3], l).unwrap();
    let platform = Platform::new(3, 1e12, 12e9);
    let r = min_period_fitting(&instance, &platform, &alloc).unwrap();
    let plan = plan_file(&instance, platform, &alloc, r.pattern, "1f1b*");
    let net = build(&desc, CPU);
    let batches_n = 5;
    let data = batches(&desc, 2, batches_n, 40, DType::F32, Device::Cpu);
    let report = execute(
        &plan,
        &net,
        &data,
        &ExecOptions {
            batches: batches_n,
            ..Default::default()
        },
    )
    .unwrap();
    let g = report.gradients.unwrap();
    assert!(
        g.passed,
        "gradient error {:.2e} at {:?}",
        g.max_relative_error, g.worst
    );
    assert!(report.losses.iter().all(|x| x.is_finite()));
    assert!(report.stash_per_batch.is_none() && report.device_peak.is_none());
    // Sizes of the data agree with the instance's input.
    assert_eq!(tensor_bytes(&data[0].input), instance.input);
}
