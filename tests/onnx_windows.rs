//! `pipeopt import onnx` on window attention as torchvision's Swin and MaxViT export it: a
//! channels-last map padded by nothing (`Pad`), cut into windows with the batch merged into
//! the first axis (`[N * 4, 4, C]`), attention inside each window with a relative position
//! bias gathered from a learned table and a mask built by `ScatterND` on constants, the
//! windows merged back, a patch merging by strided slices, then attention written as
//! `Einsum` on 5-d tensors (MaxViT's `B G H I D` form). Parameters are counted here by
//! hand; the instances plan and the plans validate.

use crate::support::onnx::{float, import_onnx, int, ints, tensor_info, write, GraphWriter};
use crate::support::pipeopt;
use onnx_rs::ast::{Attribute, AttributeType, Model, OpType};

const C: i64 = 8; // channels of the map
const HEADS: i64 = 2;

fn string(name: &'static str, s: &'static str) -> Attribute<'static> {
    Attribute {
        name,
        r#type: AttributeType::String,
        s: s.as_bytes(),
        ..Default::default()
    }
}

/// Attention inside 2 x 2 windows of a `[N, 4, 4, C]` map (Swin's shifted-window block
/// without its shift), the windows merged back: `[N, 4, 4, C]`.
/// Parameters: norm 2C = 16, q/k/v projection C x 3C + 3C = 216, bias table 9 x 2 = 18.
fn window_attention(g: &mut GraphWriter, x: &'static str) -> &'static str {
    g.scope = "/window".into();
    let (w, b) = (g.weight("norm.weight", &[C]), g.weight("norm.bias", &[C]));
    let x = g.op(
        OpType::LayerNormalization,
        &[x, w, b],
        vec![int("axis", -1), float("epsilon", 1e-5)],
    );
    let pads = g.i64s(&[8], &[0; 8]);
    let x = g.op(OpType::Pad, &[x, pads], vec![string("mode", "constant")]);
    let split = g.i64s(&[6], &[-1, 2, 2, 2, 2, C]);
    let x = g.op(OpType::Reshape, &[x, split], vec![]);
    let x = g.op(
        OpType::Transpose,
        &[x],
        vec![ints("perm", &[0, 1, 3, 2, 4, 5])],
    );
    let windows = g.i64s(&[3], &[-1, 4, C]);
    let x = g.op(OpType::Reshape, &[x, windows], vec![]);
    let (wq, bq) = (
        g.weight("qkv.weight", &[C, 3 * C]),
        g.weight("qkv.bias", &[3 * C]),
    );
    let qkv = g.op(OpType::MatMul, &[x, wq], vec![]);
    let qkv = g.op(OpType::Add, &[qkv, bq], vec![]);
    let heads = g.i64s(&[5], &[-1, 4, 3, HEADS, C / HEADS]);
    let qkv = g.op(OpType::Reshape, &[qkv, heads], vec![]);
    let qkv = g.op(
        OpType::Transpose,
        &[qkv],
        vec![ints("perm", &[2, 0, 3, 1, 4])],
    );
    let mut qkv3 = [""; 3];
    for (i, t) in qkv3.iter_mut().enumerate() {
        let at = g.i64s(&[], &[i as i64]);
        *t = g.op(OpType::Gather, &[qkv, at], vec![int("axis", 0)]);
    }
    let scale = g.scalar(0.5);
    let q = g.op(OpType::Mul, &[qkv3[0], scale], vec![]);
    let kt = g.op(
        OpType::Transpose,
        &[qkv3[1]],
        vec![ints("perm", &[0, 1, 3, 2])],
    );
    let scores = g.op(OpType::MatMul, &[q, kt], vec![]);
    // The relative position bias: a (2 x 2 - 1)^2 x heads table read at every pair of the
    // window's 4 positions.
    let table = g.weight("relative_position_bias_table", &[9, HEADS]);
    let index: Vec<i64> = (0..16).map(|k| (k * 5) % 9).collect();
    let index = g.i64s(&[16], &index);
    let bias = g.op(OpType::Gather, &[table, index], vec![int("axis", 0)]);
    let square = g.i64s(&[3], &[4, 4, HEADS]);
    let bias = g.op(OpType::Reshape, &[bias, square], vec![]);
    let bias = g.op(OpType::Transpose, &[bias], vec![ints("perm", &[2, 0, 1])]);
    let axes = g.i64s(&[1], &[0]);
    let bias = g.op(OpType::Unsqueeze, &[bias, axes], vec![]);
    let scores = g.op(OpType::Add, &[scores, bias], vec![]);
    // A mask built by index assignment into zeros, as Swin builds its shifted windows'.
    let dims = g.i64s(&[2], &[4, 4]);
    let zeros = g.op(OpType::ConstantOfShape, &[dims], vec![]);
    let at = g.i64s(&[2, 2], &[0, 3, 3, 0]);
    let updates = g.i64s(&[2], &[-100, -100]);
    let updates = g.op(OpType::Cast, &[updates], vec![int("to", 1)]);
    let zeros = g.op(OpType::Cast, &[zeros], vec![int("to", 1)]);
    let mask = g.op(OpType::ScatterND, &[zeros, at, updates], vec![]);
    let scores = g.op(OpType::Add, &[scores, mask], vec![]);
    let p = g.op(OpType::Softmax, &[scores], vec![int("axis", -1)]);
    let y = g.op(OpType::MatMul, &[p, qkv3[2]], vec![]);
    let y = g.op(OpType::Transpose, &[y], vec![ints("perm", &[0, 2, 1, 3])]);
    let rows = g.i64s(&[6], &[-1, 2, 2, 2, 2, C]);
    let y = g.op(OpType::Reshape, &[y, rows], vec![]);
    let y = g.op(
        OpType::Transpose,
        &[y],
        vec![ints("perm", &[0, 1, 3, 2, 4, 5])],
    );
    let map = g.i64s(&[4], &[-1, 4, 4, C]);
    g.op(OpType::Reshape, &[y, map], vec![])
}

/// Swin's patch merging without its projection: every second row and column from two
/// offsets, concatenated on channels: `[N, 2, 2, 2C]`.
fn patch_merging(g: &mut GraphWriter, x: &'static str) -> &'static str {
    g.scope = "/merge".into();
    let mut parts = [""; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        let starts = g.i64s(&[2], &[i as i64, i as i64]);
        let ends = g.i64s(&[2], &[i64::MAX, i64::MAX]);
        let axes = g.i64s(&[2], &[1, 2]);
        let steps = g.i64s(&[2], &[2, 2]);
        *part = g.op(OpType::Slice, &[x, starts, ends, axes, steps], vec![]);
    }
    g.op(OpType::Concat, &parts, vec![int("axis", -1)])
}

/// Attention over the 4 positions of a `[N, 2, 2, 2C]` map as MaxViT writes it: q, k, v
/// of `[N, 1, heads, 4, C / heads]` (one grid cell) and `Einsum` for the scores and the
/// weighted sum, merged back to `[N, 4, 2C]`. Parameters: 3 x 2C x 2C = 768.
fn einsum_attention(g: &mut GraphWriter, x: &'static str) -> &'static str {
    g.scope = "/grid".into();
    let d = 2 * C;
    let seq = g.i64s(&[3], &[0, 4, d]);
    let x = g.op(OpType::Reshape, &[x, seq], vec![]);
    let mut t = [""; 3];
    for (i, name) in ["q", "k", "v"].iter().enumerate() {
        let w = g.weight(&format!("{name}.weight"), &[d, d]);
        let y = g.op(OpType::MatMul, &[x, w], vec![]);
        let split = g.i64s(&[5], &[0, 1, 4, HEADS, d / HEADS]);
        let y = g.op(OpType::Reshape, &[y, split], vec![]);
        t[i] = g.op(
            OpType::Transpose,
            &[y],
            vec![ints("perm", &[0, 1, 3, 2, 4])],
        );
    }
    let scores = g.op(
        OpType::Einsum,
        &[t[0], t[1]],
        vec![string("equation", "B G H I D, B G H J D -> B G H I J")],
    );
    let p = g.op(OpType::Softmax, &[scores], vec![int("axis", -1)]);
    let y = g.op(
        OpType::Einsum,
        &[p, t[2]],
        vec![string("equation", "bghij,bghjd->bghid")],
    );
    let y = g.op(
        OpType::Transpose,
        &[y],
        vec![ints("perm", &[0, 1, 3, 2, 4])],
    );
    let merged = g.i64s(&[3], &[0, 4, d]);
    g.op(OpType::Reshape, &[y, merged], vec![])
}

fn windows_model() -> Model<'static> {
    let mut g = GraphWriter::default();
    let x = window_attention(&mut g, "x");
    let x = patch_merging(&mut g, x);
    let y = einsum_attention(&mut g, x);
    g.model(
        tensor_info("x", &[-1, 4, 4, C]),
        tensor_info(y, &[-1, 4, 2 * C]),
        17,
    )
}

fn import(
    dir: &std::path::Path,
    model: &Model<'static>,
    granularity: &str,
) -> (std::process::Output, std::path::PathBuf) {
    let file = write(dir, "windows.onnx", &onnx_rs::encode(model));
    let out = dir.join(format!("windows-{granularity}.json"));
    (import_onnx(&file, 4, granularity, &out), out)
}

#[test]
fn window_attention_imports_with_its_bias_table_and_einsum() {
    let dir = tempfile::tempdir().unwrap();
    let model = windows_model();
    for granularity in ["block", "op"] {
        let (o, path) = import(dir.path(), &model, granularity);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{granularity}: {stderr}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        // Norm 16, q/k/v 216, the bias table 18 (not the 2 x 4 x 4 bias it gathers), the
        // einsum attention's projections 768.
        assert_eq!(report["weights_bytes"], 4.0 * 1018.0, "{report}");
        let inst: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let layers = inst["layers"].as_array().unwrap();
        // The output: 4 samples of 4 x 16 floats.
        assert_eq!(layers.last().unwrap()["out"], 4.0 * 64.0 * 4.0);
        if granularity == "op" {
            let names: Vec<&str> = layers.iter().map(|l| l["name"].as_str().unwrap()).collect();
            // Both einsums are products; the mask and the bias's gather are constants (no
            // layer of their own), the padding by nothing is the tensor itself.
            assert_eq!(
                names.iter().filter(|n| n.contains("Einsum")).count(),
                2,
                "{names:?}"
            );
            assert!(
                !names
                    .iter()
                    .any(|n| n.contains("ScatterND") || n.contains("Pad")),
                "{names:?}"
            );
            // The scores' product keeps q and k (4 samples x 2 heads x 4 x 8 floats each),
            // at least, as autograd does.
            let scores = layers
                .iter()
                .find(|l| l["name"].as_str().unwrap().contains("Einsum"))
                .unwrap();
            assert!(
                scores["stash"].as_f64().unwrap() >= 2.0 * 4.0 * 64.0 * 4.0,
                "{scores}"
            );
        }
        let plan = dir.path().join(format!("windows-{granularity}-plan.json"));
        let p = pipeopt()
            .args(["plan", "--instance"])
            .arg(&path)
            .args(["-p", "2", "-m", "1GiB", "-b", "12GB/s"])
            .args(["--algorithm", "contiguous-opt", "--out"])
            .arg(&plan)
            .output()
            .unwrap();
        assert!(p.status.success(), "{}", String::from_utf8_lossy(&p.stderr));
        let v = pipeopt().arg("validate").arg(&plan).output().unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stdout));
    }
}

#[test]
fn an_einsum_that_is_not_a_matrix_product_and_a_real_padding_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = windows_model();
    let graph = model.graph.as_mut().unwrap();
    let einsum = graph
        .node
        .iter_mut()
        .find(|n| n.op_type == OpType::Einsum)
        .unwrap();
    einsum.attribute = vec![string("equation", "bghid,bghjd->bghij,bghij")];
    let (o, _) = import(dir.path(), &model, "op");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/grid/Einsum") && stderr.contains("bghid,bghjd->bghij,bghij"),
        "{stderr}"
    );

    let mut g = GraphWriter::default();
    let pads = g.i64s(&[8], &[0, 0, 0, 0, 0, 1, 1, 0]);
    let y = g.op(OpType::Pad, &["x", pads], vec![]);
    let model = g.model(
        tensor_info("x", &[-1, 4, 4, C]),
        tensor_info(y, &[-1, 5, 5, C]),
        17,
    );
    let (o, _) = import(dir.path(), &model, "op");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("/Pad_1") && stderr.contains("pads [0, 0, 0, 0, 0, 1, 1, 0]"),
        "{stderr}"
    );
}
