//! `pipeopt import onnx`: a small model written by the test (a few hundred bytes) imports
//! with the sizes computed here by hand, plans and validates; malformed, truncated and
//! unsupported models exit 2 naming the file and the node, and write nothing.

use crate::support::onnx::{float, import_onnx, int, ints, node, tensor_info, write};
use crate::support::pipeopt;
use onnx_rs::ast::{DataType, Graph, Model, Node, OpType, OperatorSetId, TensorProto};

/// A residual network on 3 x 16 x 16 images, weights as dims only:
/// conv 3x3 (3 -> 8, pad 1) -> BN -> ReLU -> (conv 1x1 8 -> 8) + itself -> max pool 2 ->
/// concat with itself -> global average pool -> flatten -> linear 16 -> 10.
/// Parameters: 216 + 16 + 64 + 170 = 466.
pub(crate) fn small_model() -> Model<'static> {
    let w = |name: &'static str, dims: &[i64]| {
        TensorProto::from_raw(name, dims.to_vec(), DataType::Float, &[])
    };
    let inits = vec![
        w("c1.w", &[8, 3, 3, 3]),
        w("bn.scale", &[8]),
        w("bn.bias", &[8]),
        w("bn.mean", &[8]),
        w("bn.var", &[8]),
        w("c2.w", &[8, 8, 1, 1]),
        w("fc.w", &[10, 16]),
        w("fc.b", &[10]),
    ];
    let nodes = vec![
        node(
            "/c1/Conv",
            OpType::Conv,
            &["x", "c1.w"],
            "c1",
            vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
        ),
        Node {
            // Exported for training: the running statistics are outputs too.
            output: vec!["b1", "bn.mean.out", "bn.var.out"],
            ..node(
                "/bn/BatchNormalization",
                OpType::BatchNormalization,
                &["c1", "bn.scale", "bn.bias", "bn.mean", "bn.var"],
                "b1",
                vec![int("training_mode", 1)],
            )
        },
        node("/relu/Relu", OpType::Relu, &["b1"], "r1", vec![]),
        node("/c2/Conv", OpType::Conv, &["r1", "c2.w"], "c2", vec![]),
        node("/Add", OpType::Add, &["r1", "c2"], "a", vec![]),
        node(
            "/pool/MaxPool",
            OpType::MaxPool,
            &["a"],
            "p",
            vec![ints("kernel_shape", &[2, 2]), ints("strides", &[2, 2])],
        ),
        node(
            "/Concat",
            OpType::Concat,
            &["p", "p"],
            "cat",
            vec![int("axis", 1)],
        ),
        node("/gap", OpType::GlobalAveragePool, &["cat"], "g", vec![]),
        node("/Flatten", OpType::Flatten, &["g"], "f", vec![]),
        node(
            "/fc/Gemm",
            OpType::Gemm,
            &["f", "fc.w", "fc.b"],
            "y",
            vec![int("transB", 1)],
        ),
    ];
    Model {
        ir_version: 8,
        opset_import: vec![OperatorSetId {
            domain: "",
            version: 17,
        }],
        producer_name: "pipeopt tests",
        graph: Some(Graph {
            name: "small",
            node: nodes,
            initializer: inits,
            input: vec![tensor_info("x", &[-1, 3, 16, 16])],
            output: vec![tensor_info("y", &[-1, 10])],
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[test]
fn a_small_model_imports_with_its_exact_sizes_and_plans() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = onnx_rs::encode(&small_model());
    assert!(bytes.len() < 4096, "{} bytes", bytes.len());
    let file = write(dir.path(), "small.onnx", &bytes);
    for granularity in ["op", "block"] {
        let out = dir.path().join(format!("small-{granularity}.json"));
        let o = import_onnx(&file, 4, granularity, &out);
        assert!(
            o.status.success(),
            "{granularity}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["meta"]["parameters"], 466, "{r}");
        assert_eq!(r["weights_bytes"], 466.0 * 4.0, "{r}");
        let inst: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        assert_eq!(inst["input"], 4.0 * 3.0 * 16.0 * 16.0 * 4.0);
        assert_eq!(inst["meta"]["source"], "onnx (pipeopt import onnx)");
        let last = inst["layers"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["out"], 4.0 * 10.0 * 4.0, "{last}");
        if granularity == "op" {
            // Every node but the in-place ReLU and the flatten view is a chain layer of its
            // own; the output sizes are the shapes worked out above.
            let outs: Vec<f64> = inst["layers"]
                .as_array()
                .unwrap()
                .iter()
                .map(|l| l["out"].as_f64().unwrap() / 16.0)
                .collect();
            assert!(outs.contains(&(8.0 * 8.0 * 8.0)), "{outs:?}"); // max pool
            assert!(outs.contains(&(16.0 * 8.0 * 8.0)), "{outs:?}"); // concat
        } else {
            // Single-tensor cuts: after the ReLU (conv+BN+ReLU), after the add, the pool,
            // the concat, and the head.
            assert!(
                inst["meta"]["blocks"].as_u64().unwrap() >= 3,
                "{}",
                inst["meta"]
            );
        }
        let plan = pipeopt()
            .args(["plan", "--instance"])
            .arg(&out)
            .args([
                "--processors",
                "2",
                "--memory",
                "1GiB",
                "--bandwidth",
                "12GB/s",
            ])
            .args(["--algorithm", "contiguous-opt", "--json"])
            .output()
            .unwrap();
        assert!(
            plan.status.success(),
            "{}",
            String::from_utf8_lossy(&plan.stderr)
        );
        let p: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
        assert_eq!(p["status"], "valid", "{p}");
    }
}

/// Runs the import on `bytes` and checks the exit code 2, the words of the message and
/// that no instance was written.
fn refused(bytes: &[u8], extra: &[&str], words: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad.onnx", bytes);
    let out = dir.path().join("out.json");
    let o = pipeopt()
        .args(["import", "onnx"])
        .arg(&file)
        .args(["--batch", "4", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.onnx"), "{err}");
    for w in words {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
    assert!(!out.exists());
}

#[test]
fn bad_models_exit_2_naming_the_file_and_the_node() {
    let good = onnx_rs::encode(&small_model());
    // Truncated, and not ONNX at all.
    refused(&good[..good.len() - 7], &[], &[]);
    refused(b"name,fwd,bwd\nconv,1,2\n", &[], &[]);
    // An op without a training rule.
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[2].op_type = OpType::GridSample;
    refused(&onnx_rs::encode(&m), &[], &["GridSample", "/relu/Relu"]);
    // Attributes it does not model are refused, not ignored.
    let mut m = small_model();
    m.graph.as_mut().unwrap().node[0]
        .attribute
        .push(ints("dilations", &[2, 2]));
    refused(&onnx_rs::encode(&m), &[], &["dilations", "/c1/Conv"]);
    // A weight whose dims do not match the input's channels.
    let mut m = small_model();
    m.graph.as_mut().unwrap().initializer[5] =
        TensorProto::from_raw("c2.w", vec![8, 4, 1, 1], DataType::Float, &[]);
    refused(&onnx_rs::encode(&m), &[], &["/c2/Conv", "input channels"]);
    // A dead branch, and two outputs.
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    g.node
        .insert(3, node("/dead/Relu", OpType::Relu, &["b1"], "dead", vec![]));
    refused(&onnx_rs::encode(&m), &[], &["/dead/Relu", "never reaches"]);
    let mut m = small_model();
    m.graph
        .as_mut()
        .unwrap()
        .output
        .push(tensor_info("p", &[-1, 8, 8, 8]));
    refused(&onnx_rs::encode(&m), &[], &["2 outputs"]);
    // A shape given that disagrees with the file's; an input too small for the network.
    refused(&good, &["--input-shape", "3,32,32"], &["--input-shape"]);
    let mut m = small_model();
    m.graph.as_mut().unwrap().input[0] = tensor_info("x", &[-1, 3, -1, -1]);
    refused(&onnx_rs::encode(&m), &[], &["--input-shape"]);
    refused(
        &onnx_rs::encode(&m),
        &["--input-shape", "3,1,1"],
        &["/pool/MaxPool", "empty"],
    );
}

/// Numbers a model may hold but no network has: a stride or a kernel side of 0 (a window
/// that never moves, or covers nothing), a dropout ratio outside [0, 1). Refused, naming
/// the node, never a division by zero or an output larger than the input.
#[test]
fn zero_strides_and_kernels_and_bad_dropout_ratios_are_refused() {
    // node 0 is the 3x3 Conv, node 5 the MaxPool (kernel 2, stride 2).
    let conv_stride = {
        let mut m = small_model();
        m.graph.as_mut().unwrap().node[0]
            .attribute
            .push(ints("strides", &[0, 0]));
        m
    };
    refused(&onnx_rs::encode(&conv_stride), &[], &["/c1/Conv", "stride"]);
    for op in [OpType::MaxPool, OpType::AveragePool] {
        let mut m = small_model();
        let pool = &mut m.graph.as_mut().unwrap().node[5];
        pool.op_type = op.clone();
        pool.attribute = vec![ints("kernel_shape", &[2, 2]), ints("strides", &[0, 0])];
        refused(&onnx_rs::encode(&m), &[], &["/pool/MaxPool", "stride"]);
        let mut m = small_model();
        let pool = &mut m.graph.as_mut().unwrap().node[5];
        pool.op_type = op;
        pool.attribute = vec![ints("kernel_shape", &[0, 0])];
        refused(&onnx_rs::encode(&m), &[], &["/pool/MaxPool", "kernel"]);
    }
    for ratio in [5.0, -0.5, 1.0, f32::NAN] {
        let mut m = small_model();
        let g = m.graph.as_mut().unwrap();
        // relu -> dropout -> the rest, which now reads the dropout's output.
        g.node.insert(
            3,
            node(
                "/drop/Dropout",
                OpType::Dropout,
                &["r1"],
                "d1",
                vec![float("ratio", ratio)],
            ),
        );
        for n in &mut g.node[4..] {
            for i in n.input.iter_mut() {
                if *i == "r1" {
                    *i = "d1";
                }
            }
        }
        refused(&onnx_rs::encode(&m), &[], &["/drop/Dropout", "ratio"]);
    }
}

/// A file exported in eval mode is not the network that trains: a batch norm in inference
/// mode, or a weight passed on by an `Identity` (constant folding), is refused with the
/// export line that works; `--accept-fused` plans a batch norm in inference mode as it is.
#[test]
fn files_exported_in_eval_mode_are_refused_with_the_export_line_that_works() {
    let eval = |m: &mut Model<'static>| {
        let g = m.graph.as_mut().unwrap();
        let bn = g
            .node
            .iter_mut()
            .find(|n| n.op_type == OpType::BatchNormalization)
            .unwrap();
        bn.output.truncate(1);
        bn.attribute.clear();
    };
    let mut m = small_model();
    eval(&mut m);
    let bytes = onnx_rs::encode(&m);
    refused(
        &bytes,
        &[],
        &[
            "/bn/BatchNormalization",
            "eval mode",
            "TrainingMode.TRAINING",
            "--accept-fused",
        ],
    );
    // An explicit training_mode = 0 is the same, whatever the outputs.
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    let bn = g
        .node
        .iter_mut()
        .find(|n| n.op_type == OpType::BatchNormalization)
        .unwrap();
    bn.attribute = vec![int("training_mode", 0)];
    refused(&onnx_rs::encode(&m), &[], &["inference mode"]);
    // Accepted as it is when the user says so.
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "eval.onnx", &bytes);
    let o = pipeopt()
        .args(["import", "onnx"])
        .arg(&file)
        .args(["--batch", "4", "--accept-fused", "--out"])
        .arg(dir.path().join("eval.json"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // A weight shared through an Identity (what constant folding writes).
    let mut m = small_model();
    let g = m.graph.as_mut().unwrap();
    g.node.insert(
        0,
        node(
            "/Identity_0",
            OpType::Identity,
            &["c2.w"],
            "c2.w.copy",
            vec![],
        ),
    );
    let c2 = g.node.iter_mut().find(|n| n.name == "/c2/Conv").unwrap();
    c2.input[1] = "c2.w.copy";
    refused(
        &onnx_rs::encode(&m),
        &[],
        &[
            "/Identity_0",
            "\"c2.w\"",
            "folded constants",
            "do_constant_folding=False",
        ],
    );
}
