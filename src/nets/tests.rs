//! Tests of the built-in networks: shapes, parameter counts and the committed instances.

use super::analytic::{block_stash, op_cost};
use super::*;

/// torchvision's `sum(p.numel() for p in m.parameters())` (numbers printed by torchvision).
#[test]
fn parameter_counts_match_torchvision() {
    for (name, image, count) in [
        ("resnet50", 224, 25_557_032u64),
        ("resnet101", 224, 44_549_160),
        ("inception_v3", 299, 23_834_568),
        ("densenet121", 224, 7_978_856),
        ("vgg16", 224, 138_357_544),
    ] {
        let net = network(name, image).unwrap();
        assert_eq!(net.parameter_count(), count, "{name}");
        // Parameter counts do not depend on the image size (adaptive pools).
        assert_eq!(
            network(name, 1000).unwrap().parameter_count(),
            count,
            "{name} at 1000"
        );
    }
}

fn feature_map(name: &str, image: usize) -> Shape {
    let net = network(name, image).unwrap();
    let head = net.blocks.last().unwrap();
    head.input_shape().clone()
}

#[test]
fn final_feature_maps() {
    assert_eq!(feature_map("resnet50", 224), vec![2048, 7, 7]);
    assert_eq!(feature_map("resnet50", 1000), vec![2048, 32, 32]);
    assert_eq!(feature_map("resnet101", 1000), vec![2048, 32, 32]);
    assert_eq!(feature_map("inception_v3", 299), vec![2048, 8, 8]);
    // 1000 -> 499 -> 497 -> 497 -> 248 -> 248 -> 246 -> 122 -> (6a) 60 -> (7a) 29.
    assert_eq!(feature_map("inception_v3", 1000), vec![2048, 29, 29]);
    assert_eq!(feature_map("densenet121", 224), vec![1024, 7, 7]);
    assert_eq!(feature_map("densenet121", 1000), vec![1024, 31, 31]);
    let vgg = network("vgg16", 224).unwrap();
    assert_eq!(vgg.blocks[17].output_shape(), &vec![512, 7, 7]);
    let vgg = network("vgg16", 1000).unwrap();
    assert_eq!(vgg.blocks[17].output_shape(), &vec![512, 31, 31]);
    for name in [
        "resnet50",
        "resnet101",
        "inception_v3",
        "densenet121",
        "vgg16",
    ] {
        for image in [224, 299, 1000] {
            assert_eq!(
                network(name, image).unwrap().output_shape(),
                &vec![1000],
                "{name} {image}"
            );
        }
    }
}

#[test]
fn chains_are_consistent() {
    for name in network_names() {
        let net = network(name, 224).unwrap();
        assert_eq!(net.blocks[0].input_shape(), &net.input, "{name}");
        for w in net.blocks.windows(2) {
            assert_eq!(
                w[0].output_shape(),
                w[1].input_shape(),
                "{name}: {} -> {}",
                w[0].name,
                w[1].name
            );
        }
        for b in &net.blocks {
            for op in &b.ops[1..] {
                assert!(
                    !op.inputs.is_empty() && op.inputs.iter().all(|&i| i < op.id),
                    "{name} {} {}",
                    b.name,
                    op.name
                );
            }
        }
    }
    let resnet = network("resnet50", 224).unwrap();
    assert_eq!(resnet.blocks.len(), 1 + 16 + 1);
    assert_eq!(network("resnet101", 224).unwrap().blocks.len(), 1 + 33 + 1);
    assert_eq!(
        network("densenet121", 224).unwrap().blocks.len(),
        1 + 58 + 3 + 1
    );
    assert_eq!(
        network("inception_v3", 299).unwrap().blocks.len(),
        5 + 11 + 1
    );
    assert_eq!(network("bert48", 1).unwrap().blocks.len(), 50);
    // Inside a dense block the concatenated map grows by 32 channels per layer.
    let d = network("densenet121", 224).unwrap();
    assert_eq!(d.blocks[1].output_shape(), &vec![96, 56, 56]);
    assert_eq!(d.blocks[6].output_shape(), &vec![256, 56, 56]);
    assert_eq!(d.blocks[7].output_shape(), &vec![128, 28, 28]);
}

#[test]
fn bad_inputs_are_errors() {
    assert!(matches!(
        network("resnet18", 224),
        Err(NetError::Unknown(_))
    ));
    assert!(matches!(network("resnet50", 0), Err(NetError::Zero { .. })));
    assert!(matches!(
        network("inception_v3", 64),
        Err(NetError::TooSmall { .. })
    ));
    assert!(matches!(
        network("vgg16", 16),
        Err(NetError::TooSmall { .. })
    ));
    let net = network("resnet50", 224).unwrap();
    assert!(analytic_instance(&net, 0, DType::F32, &DeviceModel::h100()).is_err());
    assert!(DType::parse("f64").is_none());
    assert!(DeviceModel::preset("tpu").is_none());
    assert_eq!(
        DeviceModel::preset("V100").map(|d| d.name),
        Some("v100".to_string())
    );
}

#[test]
fn instance_sizes_follow_the_shapes() {
    for name in network_names() {
        let image = if name == "inception_v3" { 299 } else { 224 };
        let net = network(name, image).unwrap();
        for (dtype, e) in [(DType::F32, 4.0), (DType::F16, 2.0)] {
            let inst = analytic_instance(&net, 8, dtype, &DeviceModel::h100()).unwrap();
            inst.check().unwrap();
            let w: f64 = inst.layers.iter().map(|l| l.weights).sum();
            assert_eq!(w, e * net.parameter_count() as f64, "{name}");
            assert_eq!(inst.layers.len(), net.blocks.len());
            for (l, b) in inst.layers.iter().zip(&net.blocks) {
                assert!(
                    l.out > 0.0 && l.fwd > 0.0 && l.bwd > l.fwd,
                    "{name} {}",
                    l.name
                );
                assert_eq!(
                    l.out,
                    8.0 * e * b.output_shape().iter().product::<usize>() as f64
                );
                assert!(l.stash.unwrap() > 0.0);
            }
        }
    }
    let inst = instance(
        "resnet50",
        224,
        8,
        DType::F32,
        &DeviceModel::preset("v100").unwrap(),
    )
    .unwrap();
    assert_eq!(inst.input, 8.0 * 4.0 * 3.0 * 224.0 * 224.0);
    assert_eq!(inst.meta["times"], "analytic");
    let bert = instance(
        "bert48",
        1,
        2,
        DType::F32,
        &DeviceModel::preset("v100").unwrap(),
    )
    .unwrap();
    assert_eq!(bert.input, 2.0 * 8.0 * 512.0);
}

/// A ResNet bottleneck without downsample at 4x4 with 16 channels (planes 4), checked by
/// hand: saved tensors are the input x (conv1, and nothing else: the add saves nothing),
/// conv1/conv2/conv3 outputs (saved by bn1/bn2/bn3), relu1/relu2 outputs (saved by the
/// ReLUs and by conv2/conv3: counted once), the add's output after relu3 (relu3 saves it).
#[test]
fn stash_of_a_small_bottleneck() {
    let mut b = B::new("t", vec![16, 4, 4]);
    let x = b.conv("conv1", 0, 4, 1, 1, 0).unwrap();
    let x = b.bn("bn1", x, 1e-5).unwrap();
    let x = b.relu("relu1", x).unwrap();
    let x = b.conv("conv2", x, 4, 3, 1, 1).unwrap();
    let x = b.bn("bn2", x, 1e-5).unwrap();
    let x = b.relu("relu2", x).unwrap();
    let x = b.conv("conv3", x, 16, 1, 1, 0).unwrap();
    let x = b.bn("bn3", x, 1e-5).unwrap();
    let x = b.add("add", &[x, 0]).unwrap();
    b.relu("relu3", x).unwrap();
    let blk = b.finish();
    // Elements per sample: x 256, conv1 64, relu1 64, conv2 64, relu2 64, conv3 256,
    // relu3 256 => 1024; BN stats 2*(4+4+16) = 48 values per batch.
    let batch = 2;
    assert_eq!(
        block_stash(&blk, batch, DType::F32, 4),
        4.0 * (2.0 * 1024.0 + 48.0)
    );
    // conv2 FLOPs: 2 * 4 * 9 * 4 * 16 per sample.
    assert_eq!(
        op_cost(&blk, 4, batch, DType::F32).flops,
        2.0 * 2.0 * 4.0 * 9.0 * 4.0 * 16.0
    );
    // A max-pool saves its input and int64 indices.
    let mut b = B::new("p", vec![2, 4, 4]);
    b.maxpool("pool", 0, 2, 2, 0, false).unwrap();
    assert_eq!(
        block_stash(&b.finish(), 1, DType::F32, 4),
        4.0 * 32.0 + 8.0 * 8.0
    );
}

#[test]
fn ceil_mode_pool_sizes() {
    // PyTorch: MaxPool2d(3, 2, ceil_mode=True) on 112 gives 56; on 5 gives 2.
    let mut b = B::new("p", vec![1, 112, 5]);
    let y = b.maxpool("pool", 0, 3, 2, 0, true).unwrap();
    assert_eq!(b.shape(y), &vec![1, 56, 2]);
    let y = b.maxpool("pool2", 0, 3, 2, 0, false).unwrap();
    assert_eq!(b.shape(y), &vec![1, 55, 2]);
}

/// The committed instances are what `pipeopt instance` writes today (instances/README.md).
#[test]
fn committed_instances_are_up_to_date() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("instances");
    for (model, image, batch, file) in [
        ("resnet50", 1000, 8, "resnet50-1000-b8.json"),
        ("resnet101", 1000, 8, "resnet101-1000-b8.json"),
        ("inception_v3", 1000, 8, "inception_v3-1000-b8.json"),
        ("densenet121", 1000, 8, "densenet121-1000-b8.json"),
        ("vgg16", 1000, 8, "vgg16-1000-b8.json"),
        ("vgg16", 224, 128, "vgg16-224-b128.json"),
        ("bert48", 1, 8, "bert48-b8.json"),
        ("gpt24", 1, 8, "gpt24-b8.json"),
    ] {
        // Compared as text: the example writes `to_string_pretty` plus a newline.
        let stored = std::fs::read_to_string(dir.join(file)).unwrap();
        let fresh = instance(model, image, batch, DType::F32, &DeviceModel::h100()).unwrap();
        let fresh = serde_json::to_string_pretty(&fresh).unwrap() + "\n";
        assert!(
            stored == fresh,
            "{file}: regenerate it with `pipeopt instance` (instances/README.md)"
        );
    }
}

/// An analytic instance of a built-in network is built again at another batch; an ONNX
/// import, whose times are analytic too but whose graph is not a built-in network, is not
/// (the synchronous sweep then scales its costs linearly), even where its model name is one.
#[test]
fn only_the_built_in_networks_are_rebuilt_at_another_batch() {
    use super::analytic::analytic_rebuild;
    use crate::model::Instance;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("instances");
    let bert48 = dir.join("bert48-b8.json");
    let base = Instance::load(&bert48).unwrap();
    let at_4 = analytic_rebuild(&base, &bert48, 4).unwrap().unwrap();
    assert_eq!(at_4.layers.len(), base.layers.len());
    assert!(at_4.layers[1].fwd < base.layers[1].fwd);
    for file in [
        "gpt2-b8-onnx.json",
        "bert12-b8-onnx.json",
        "llama4-b8-onnx.json",
    ] {
        let path = dir.join(file);
        let imported = Instance::load(&path).unwrap();
        assert_eq!(imported.meta["times"], "analytic", "{file}");
        assert!(
            analytic_rebuild(&imported, &path, 4).unwrap().is_none(),
            "{file}"
        );
    }
    let mut renamed = Instance::load(&dir.join("gpt2-b8-onnx.json")).unwrap();
    renamed
        .meta
        .insert("model".into(), serde_json::json!("gpt24"));
    assert!(analytic_rebuild(&renamed, &bert48, 4).unwrap().is_none());
}

/// What consecutive blocks share (checked against the CUDA allocator by `pipeopt profile`,
/// results/profiles.md): a ResNet bottleneck's last ReLU keeps the output that the next block's
/// convolutions keep; an Inception module ends in a concatenation, which keeps nothing, so
/// only the next module's convolutions keep it, except before the head, whose global
/// average pool (a mean) keeps nothing either.
#[test]
fn stash_overlaps_follow_who_keeps_the_boundary_tensor() {
    let r = instance("resnet50", 224, 2, DType::F32, &DeviceModel::h100()).unwrap();
    let last = r.len();
    // The stem ends in a max pool, which keeps its input, not its output.
    assert_eq!(r.stash_overlap(1), 0.0);
    for l in 2..last {
        assert_eq!(r.stash_overlap(l), r.a(l), "resnet50 layer {l}");
    }
    assert_eq!(r.stash_overlap(last), 0.0);
    // A stage of two blocks keeps the shared tensor once.
    let s = r.sums();
    assert_eq!(s.stash(2, 3), r.stash(2) + r.stash(3) - r.a(2));
    let i = instance("inception_v3", 299, 2, DType::F32, &DeviceModel::h100()).unwrap();
    let at = |name: &str| i.layers.iter().position(|l| l.name == name).unwrap() + 1;
    assert_eq!(i.stash_overlap(at("Mixed_7b")), 0.0);
    assert_eq!(i.stash_overlap(at("Mixed_7c")), i.a(at("Mixed_7c")));
    i.check().unwrap();
}
