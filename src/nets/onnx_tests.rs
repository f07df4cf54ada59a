//! Tests of the ONNX importer: nodes to ops, shapes, cuts, refusals.

use super::*;
use crate::nets::Block;
use onnx_rs::ast::{
    AttributeType, Model, OperatorSetId, TensorShape, TensorShapeDimension, TensorTypeProto,
    TypeProto, TypeValue, ValueInfo,
};

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

fn ints(name: &'static str, v: &[usize]) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Ints,
        ints: v.iter().map(|&x| x as i64).collect(),
        ..Default::default()
    }
}

fn int(name: &'static str, v: i64) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Int,
        i: v,
        ..Default::default()
    }
}

fn float(name: &'static str, v: f64) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::Float,
        f: v as f32,
        ..Default::default()
    }
}

fn value_info(name: &'static str, dims: &[i64]) -> ValueInfo<'static> {
    ValueInfo {
        name,
        r#type: Some(TypeProto {
            value: Some(TypeValue::Tensor(TensorTypeProto {
                elem_type: DataType::Float,
                shape: Some(TensorShape {
                    dim: dims
                        .iter()
                        .map(|&d| TensorShapeDimension {
                            value: if d > 0 {
                                Dimension::Value(d)
                            } else {
                                Dimension::Param("batch")
                            },
                            denotation: "",
                        })
                        .collect(),
                }),
            })),
            denotation: "",
        }),
        ..Default::default()
    }
}

/// `net` written as an ONNX model the way PyTorch's exporter writes it (weights as
/// initializers with their dims and no data: the importer reads only shapes).
pub(crate) fn to_onnx(net: &Network) -> Vec<u8> {
    let mut nodes = Vec::new();
    let mut inits = Vec::new();
    let mut prev = "input";
    for block in &net.blocks {
        let tensor = |i: usize| -> &'static str {
            if i == 0 {
                prev
            } else {
                leak(format!("/{}/{}_out", block.name, block.ops[i].name))
            }
        };
        for op in &block.ops[1..] {
            let base = leak(format!("/{}/{}", block.name, op.name));
            let mut input: Vec<&'static str> = op.inputs.iter().map(|&x| tensor(x)).collect();
            let mut weight = |suffix: &str, dims: Vec<usize>| {
                let name = leak(format!("{base}.{suffix}"));
                let dims = dims.into_iter().map(|d| d as i64).collect();
                inits.push(TensorProto::from_raw(name, dims, DataType::Float, &[]));
                name
            };
            let (op_type, attribute) = match &op.kind {
                OpKind::Conv2d {
                    cin,
                    cout,
                    kernel,
                    stride,
                    padding,
                    groups,
                    bias,
                } => {
                    input.push(weight(
                        "weight",
                        vec![*cout, cin / groups, kernel.0, kernel.1],
                    ));
                    if *bias {
                        input.push(weight("bias", vec![*cout]));
                    }
                    let attrs = vec![
                        ints("kernel_shape", &[kernel.0, kernel.1]),
                        ints("strides", &[stride.0, stride.1]),
                        ints("pads", &[padding.0, padding.1, padding.0, padding.1]),
                        ints("dilations", &[1, 1]),
                        int("group", *groups as i64),
                    ];
                    (OpType::Conv, attrs)
                }
                OpKind::BatchNorm2d { channels, eps } => {
                    for w in ["weight", "bias", "running_mean", "running_var"] {
                        input.push(weight(w, vec![*channels]));
                    }
                    (
                        OpType::BatchNormalization,
                        vec![float("epsilon", *eps), int("training_mode", 1)],
                    )
                }
                OpKind::Relu { .. } => (OpType::Relu, vec![]),
                OpKind::MaxPool2d {
                    kernel,
                    stride,
                    padding,
                    ceil_mode,
                }
                | OpKind::AvgPool2d {
                    kernel,
                    stride,
                    padding,
                    ceil_mode,
                } => {
                    let t = if matches!(op.kind, OpKind::MaxPool2d { .. }) {
                        OpType::MaxPool
                    } else {
                        OpType::AveragePool
                    };
                    let attrs = vec![
                        ints("kernel_shape", &[*kernel, *kernel]),
                        ints("strides", &[*stride, *stride]),
                        ints("pads", &[*padding; 4]),
                        int("ceil_mode", i64::from(*ceil_mode)),
                    ];
                    (t, attrs)
                }
                OpKind::AdaptiveAvgPool2d { out: (1, 1) } => (OpType::GlobalAveragePool, vec![]),
                OpKind::Flatten => (OpType::Flatten, vec![int("axis", 1)]),
                OpKind::Linear { fin, fout, bias } => {
                    input.push(weight("weight", vec![*fout, *fin]));
                    if *bias {
                        input.push(weight("bias", vec![*fout]));
                    }
                    (OpType::Gemm, vec![int("transB", 1)])
                }
                OpKind::Dropout { p } => (OpType::Dropout, vec![float("ratio", *p)]),
                OpKind::Add => (OpType::Add, vec![]),
                OpKind::Mul => (OpType::Mul, vec![]),
                OpKind::Sigmoid => (OpType::Sigmoid, vec![]),
                OpKind::HardSwish => (OpType::HardSwish, vec![]),
                OpKind::HardSigmoid => (
                    OpType::HardSigmoid,
                    vec![float("alpha", 1.0 / 6.0), float("beta", 0.5)],
                ),
                OpKind::Cat => (OpType::Concat, vec![int("axis", 1)]),
                other => panic!("no ONNX writer for {other:?}"),
            };
            // Exported for training, a batch norm also outputs its running statistics.
            let mut output = vec![tensor(op.id)];
            if op_type == OpType::BatchNormalization {
                output.extend([
                    leak(format!("{base}.mean_out")),
                    leak(format!("{base}.var_out")),
                ]);
            }
            nodes.push(Node {
                name: base,
                op_type,
                input,
                output,
                attribute,
                ..Default::default()
            });
        }
        prev = tensor(block.ops.len() - 1);
    }
    let mut dims = vec![-1];
    dims.extend(net.input.iter().map(|&d| d as i64));
    let mut graph_inputs = vec![value_info("input", &dims)];
    graph_inputs.extend(inits.iter().map(|t| value_info(t.name(), t.dims())));
    let model = Model {
        ir_version: 8,
        opset_import: vec![OperatorSetId {
            domain: "",
            version: 11,
        }],
        producer_name: "pipeopt tests",
        graph: Some(Graph {
            name: "main",
            node: nodes,
            initializer: inits,
            input: graph_inputs,
            output: vec![value_info(prev, &[-1, 1000])],
            ..Default::default()
        }),
        ..Default::default()
    };
    onnx_rs::encode(&model)
}

fn without_per_layer() -> DeviceModel {
    let mut d = DeviceModel::resolve("h100", "test").unwrap();
    d.fwd.per_layer = 0.0;
    d.bwd.per_layer = 0.0;
    d
}

/// A built-in network written as ONNX imports to the same op-level instance: every
/// layer's sizes to the byte and, without per-layer overheads (charged per block, and
/// the blocks differ), its times.
#[test]
fn built_in_networks_round_trip_through_onnx() {
    let device = without_per_layer();
    for (name, image) in [("resnet50", 64), ("densenet121", 64), ("inception_v3", 96)] {
        let net = super::super::network(name, image).unwrap();
        let bytes = to_onnx(&net);
        let imported = network_from_onnx(&bytes, name, &ReadOptions::default()).unwrap();
        assert_eq!(imported.parameter_count(), net.parameter_count(), "{name}");
        let ours = super::super::op_instance(&net, 8, DType::F32, &device).unwrap();
        let theirs = super::super::op_instance(&imported, 8, DType::F32, &device).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{name}: chain layers");
        for (a, b) in ours.layers.iter().zip(&theirs.layers) {
            assert_eq!(
                (a.weights, a.out, a.stash, a.stash_overlap),
                (b.weights, b.out, b.stash, b.stash_overlap),
                "{name}: layer {}",
                a.name
            );
            assert!(
                (a.fwd - b.fwd).abs() <= 1e-12 * a.fwd.max(1e-9),
                "{name}: {}",
                a.name
            );
            assert!(
                (a.bwd - b.bwd).abs() <= 1e-12 * a.bwd.max(1e-9),
                "{name}: {}",
                a.name
            );
        }
        assert_eq!(ours.stash_shared, theirs.stash_shared, "{name}");
        assert_eq!(ours.input, theirs.input, "{name}");
        // At block level (the imported network's blocks are its single-tensor cuts) the
        // chain is a valid instance with the same weights.
        let blocks = super::super::analytic_instance(&imported, 8, DType::F32, &device).unwrap();
        blocks.check().unwrap_or_else(|e| panic!("{name}: {e}"));
        let w = |i: &Instance| i.layers.iter().map(|l| l.weights).sum::<f64>();
        assert_eq!(w(&blocks), w(&ours), "{name}");
    }
}

/// A small network of today's CNN ops: a squeeze-and-excitation block (global pool,
/// two 1x1 convolutions, `Sigmoid`, the gate's `Mul` broadcast over the map), SiLU
/// written as `x * sigmoid(x)`, `HardSwish` and `HardSigmoid`.
fn modern_cnn() -> Network {
    let mut b = B::new("modern", vec![3, 32, 32]);
    let x = b.conv("stem", 0, 16, 3, 2, 1).unwrap();
    let x = b.bn("stem.bn", x, 1e-5).unwrap();
    let map = b
        .op("act", OpKind::HardSwish, &[x], vec![16, 16, 16])
        .unwrap();
    let pooled = b.adaptive_avgpool("se.pool", map, (1, 1)).unwrap();
    let r = b
        .conv_full("se.fc1", pooled, 4, (1, 1), (1, 1), (0, 0), true)
        .unwrap();
    let r = b.relu("se.relu", r).unwrap();
    let e = b
        .conv_full("se.fc2", r, 16, (1, 1), (1, 1), (0, 0), true)
        .unwrap();
    let gate = b
        .op("se.gate", OpKind::HardSigmoid, &[e], vec![16, 1, 1])
        .unwrap();
    let scaled = b
        .op("se.scale", OpKind::Mul, &[map, gate], vec![16, 16, 16])
        .unwrap();
    let y = b.conv("conv", scaled, 32, 3, 1, 1).unwrap();
    let s = b
        .op("silu.sigmoid", OpKind::Sigmoid, &[y], vec![32, 16, 16])
        .unwrap();
    let y = b
        .op("silu", OpKind::Mul, &[y, s], vec![32, 16, 16])
        .unwrap();
    let y = b.adaptive_avgpool("pool", y, (1, 1)).unwrap();
    let y = b.flatten("flatten", y).unwrap();
    b.linear("fc", y, 1000, true).unwrap();
    Network {
        name: "modern".into(),
        input: vec![3, 32, 32],
        input_elem_bytes: None,
        blocks: split_blocks(b.finish().ops),
    }
}

#[test]
fn modern_cnn_ops_round_trip_and_keep_what_autograd_keeps() {
    let net = modern_cnn();
    let bytes = to_onnx(&net);
    let imported = network_from_onnx(&bytes, "modern", &ReadOptions::default()).unwrap();
    assert_eq!(imported.parameter_count(), net.parameter_count());
    let device = without_per_layer();
    let ours = super::super::op_instance(&net, 8, DType::F32, &device).unwrap();
    let inst = super::super::op_instance(&imported, 8, DType::F32, &device).unwrap();
    inst.check().unwrap();
    assert_eq!(ours.len(), inst.len());
    for (a, b) in ours.layers.iter().zip(&inst.layers) {
        assert_eq!(
            (a.weights, a.out, a.stash, a.stash_overlap, a.fwd, a.bwd),
            (b.weights, b.out, b.stash, b.stash_overlap, b.fwd, b.bwd),
            "{}",
            a.name
        );
    }
    assert_eq!(ours.stash_shared, inst.stash_shared);
    // What each new op keeps for its backward: the sigmoid its result, the product
    // both factors, the hard functions their input.
    let ops: Vec<(&Block, usize)> = net
        .blocks
        .iter()
        .flat_map(|bl| (0..bl.ops.len()).map(move |i| (bl, i)))
        .collect();
    for (block, i) in ops {
        let op = &block.ops[i];
        let saved = super::super::analytic::saved_tensors(block, i);
        match op.kind {
            OpKind::Sigmoid => assert_eq!(saved, vec![i], "{}", op.name),
            OpKind::Mul | OpKind::HardSwish | OpKind::HardSigmoid => {
                assert_eq!(saved, op.inputs, "{}", op.name)
            }
            _ => {}
        }
    }
    // Factors of two different shapes (neither a gate of the other) are refused,
    // naming the shapes as a user writes them.
    let mut model = onnx_rs::parse(&bytes).unwrap();
    let g = model.graph.as_mut().unwrap();
    let k = g
        .node
        .iter()
        .rposition(|n| n.op_type == OpType::Mul)
        .unwrap();
    let stem = g
        .node
        .iter()
        .position(|n| n.op_type == OpType::Conv)
        .unwrap();
    g.node[k].input[1] = g.node[stem].output[0];
    let err =
        network_from_onnx(&onnx_rs::encode(&model), "m", &ReadOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("[N, 32, 16, 16]") && text.contains("[N, 16, 16, 16]"),
        "{text}"
    );
    // ONNX's own HardSigmoid defaults (alpha 0.2) are another function: refused.
    let mut model = onnx_rs::parse(&bytes).unwrap();
    let g = model.graph.as_mut().unwrap();
    let k = g
        .node
        .iter()
        .position(|n| n.op_type == OpType::HardSigmoid)
        .unwrap();
    g.node[k].attribute.clear();
    let err =
        network_from_onnx(&onnx_rs::encode(&model), "m", &ReadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("alpha = 0.2"), "{err}");
}

fn shape(s: &[usize]) -> ReadOptions<'_> {
    ReadOptions {
        input_shape: Some(s),
        ..ReadOptions::default()
    }
}

#[test]
fn errors_name_the_op_and_the_node() {
    let net = super::super::network("resnet50", 64).unwrap();
    let bytes = to_onnx(&net);
    // Truncated: a decode error, never a partial network.
    let cut =
        network_from_onnx(&bytes[..bytes.len() / 2], "r", &ReadOptions::default()).unwrap_err();
    assert!(
        matches!(cut, OnnxError::Decode(_) | OnnxError::Graph(_)),
        "{cut}"
    );
    // Ops without a rule: every type listed at once, with its count and first node.
    let mut model = onnx_rs::parse(&bytes).unwrap();
    let g = model.graph.as_mut().unwrap();
    for k in [2, 9] {
        g.node[k].op_type = OpType::GridSample;
    }
    g.node[5].op_type = OpType::LSTM;
    let first_lstm = node_name(&g.node[5]);
    let err =
        network_from_onnx(&onnx_rs::encode(&model), "r", &ReadOptions::default()).unwrap_err();
    assert_eq!(
        err,
        OnnxError::UnsupportedOps(vec![
            UnsupportedOp {
                op: "GridSample".into(),
                count: 2,
                first_node: "/stem/relu".into()
            },
            UnsupportedOp {
                op: "LSTM".into(),
                count: 1,
                first_node: first_lstm.clone()
            },
        ])
    );
    let text = err.to_string();
    for part in [
        "2 op types",
        "GridSample (2 nodes",
        "/stem/relu",
        "LSTM (1 node",
        &first_lstm,
    ] {
        assert!(text.contains(part), "{part:?} not in {text}");
    }
    // Dilation is refused, not ignored.
    let mut model = onnx_rs::parse(&bytes).unwrap();
    model.graph.as_mut().unwrap().node[0].attribute[3] = ints("dilations", &[2, 2]);
    let err =
        network_from_onnx(&onnx_rs::encode(&model), "r", &ReadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("dilations"), "{err}");
    // A shape given that disagrees with the file's.
    let err = network_from_onnx(&bytes, "r", &shape(&[3, 32, 32])).unwrap_err();
    assert!(matches!(err, OnnxError::Input(_)), "{err}");
    // The file's own shape, given again, is accepted.
    assert!(network_from_onnx(&bytes, "r", &shape(&[3, 64, 64])).is_ok());
}

/// A spatial `ReduceMean` is a global average pool (with `keepdims = 0`, one followed by
/// a flatten); a fused batch norm is refused unless accepted.
#[test]
fn reduce_mean_and_fused_batch_norms() {
    use onnx_rs::ast::StringStringEntry;
    let net = super::super::network("resnet50", 64).unwrap();
    let bytes = to_onnx(&net);
    let device = without_per_layer();
    let chain = |bytes: &[u8]| {
        let n = network_from_onnx(bytes, "r", &ReadOptions::default()).unwrap();
        super::super::op_instance(&n, 2, DType::F32, &device).unwrap()
    };
    let reference = chain(&bytes);
    let gap = |m: &mut Model| {
        let g = m.graph.as_mut().unwrap();
        g.node
            .iter()
            .position(|n| n.op_type == OpType::GlobalAveragePool)
            .unwrap()
    };
    for keepdims in [1, 0] {
        let mut m = onnx_rs::parse(&bytes).unwrap();
        let i = gap(&mut m);
        let g = m.graph.as_mut().unwrap();
        g.node[i].op_type = OpType::ReduceMean;
        g.node[i].attribute = vec![ints("axes", &[2, 3]), int("keepdims", keepdims)];
        if keepdims == 0 {
            g.node[i + 1].op_type = OpType::Identity;
            g.node[i + 1].attribute.clear();
        }
        let r = chain(&onnx_rs::encode(&m));
        assert_eq!(
            r.layers.len(),
            reference.layers.len(),
            "keepdims {keepdims}"
        );
        for (a, b) in r.layers.iter().zip(&reference.layers) {
            assert_eq!((a.weights, a.out, a.stash), (b.weights, b.out, b.stash));
            assert!(
                (a.fwd - b.fwd).abs() <= 1e-12 * b.fwd && (a.bwd - b.bwd).abs() <= 1e-12 * b.bwd
            );
        }
    }
    // ReLU6 (a clip from 0 to 6, bounds as constant inputs) is costed as a ReLU.
    let mut m = onnx_rs::parse(&bytes).unwrap();
    let g = m.graph.as_mut().unwrap();
    g.initializer
        .push(TensorProto::from_f32("zero", vec![], vec![0.0]));
    g.initializer
        .push(TensorProto::from_f32("six", vec![], vec![6.0]));
    for n in g.node.iter_mut().filter(|n| n.op_type == OpType::Relu) {
        n.op_type = OpType::Clip;
        n.input.extend(["zero", "six"]);
    }
    let r = chain(&onnx_rs::encode(&m));
    assert_eq!(r.layers, reference.layers);
    let g = m.graph.as_mut().unwrap();
    let last = g.initializer.len() - 2;
    g.initializer[last] = TensorProto::from_f32("zero", vec![], vec![-1.0]);
    let err = network_from_onnx(&onnx_rs::encode(&m), "r", &ReadOptions::default());
    assert!(err.unwrap_err().to_string().contains("only a clip from 0"));

    let mut m = onnx_rs::parse(&bytes).unwrap();
    m.graph.as_mut().unwrap().node[0].metadata_props = vec![StringStringEntry {
        key: REWRITE_KEY,
        value: "RemoveOptionalBiasFromConv, FuseBatchNormIntoConv",
    }];
    let fused = onnx_rs::encode(&m);
    let err = network_from_onnx(&fused, "r", &ReadOptions::default()).unwrap_err();
    assert_eq!(
        err,
        OnnxError::Fused {
            node: "/stem/conv1".into()
        }
    );
    let accept = ReadOptions {
        accept_fused: true,
        ..ReadOptions::default()
    };
    assert!(network_from_onnx(&fused, "r", &accept).is_ok());
}

/// Damaged files (bytes flipped, cut anywhere) are errors or networks, never a panic.
#[test]
fn damaged_files_never_panic() {
    let net = super::super::network("resnet50", 32).unwrap();
    let bytes = to_onnx(&net);
    let device = without_per_layer();
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..2000 {
        let mut b = bytes.clone();
        let cut = (next() as usize) % b.len();
        if next() % 2 == 0 {
            b.truncate(cut);
        } else {
            for _ in 0..1 + next() % 4 {
                let i = (next() as usize) % b.len();
                b[i] ^= 1 << (next() % 8);
            }
        }
        if let Ok(net) = network_from_onnx(&b, "r", &ReadOptions::default()) {
            let _ = super::super::op_instance(&net, 2, DType::F32, &device);
            let _ = super::super::analytic_instance(&net, 2, DType::F32, &device);
        }
    }
}

#[test]
fn split_cuts_where_one_tensor_lives() {
    // input -> a -> (b, c) -> add -> d: cuts after a and after the add.
    let mut b = B::new("t", vec![4, 8, 8]);
    let a = b.conv("a", 0, 4, 3, 1, 1).unwrap();
    let x = b.bn("b", a, 1e-5).unwrap();
    let y = b.bn("c", a, 1e-5).unwrap();
    let s = b.add("s", &[x, y]).unwrap();
    b.conv("d", s, 4, 1, 1, 0).unwrap();
    let blocks = split_blocks(b.finish().ops);
    let sizes: Vec<usize> = blocks.iter().map(|b| b.ops.len() - 1).collect();
    assert_eq!(sizes, vec![1, 3, 1]);
    assert_eq!(blocks[1].ops[3].inputs, vec![1, 2]);
    // No cut before a ReLU or a flatten, nor where neither side keeps the tensor (a
    // convolution's output read only by a global average pool).
    let mut b = B::new("t", vec![4, 8, 8]);
    let a = b.conv("a", 0, 4, 3, 1, 1).unwrap();
    let r = b.relu("r", a).unwrap();
    let c = b.conv("c", r, 4, 3, 1, 1).unwrap();
    let g = b.adaptive_avgpool("g", c, (1, 1)).unwrap();
    let f = b.flatten("f", g).unwrap();
    b.linear("fc", f, 10, true).unwrap();
    let blocks = split_blocks(b.finish().ops);
    let sizes: Vec<usize> = blocks.iter().map(|b| b.ops.len() - 1).collect();
    assert_eq!(sizes, vec![2, 3, 1]);
}
