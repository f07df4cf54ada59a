//! `pipeopt import onnx` on transformers written as PyTorch's exporter writes them: a
//! 2-block GPT-style decoder (token ids, embeddings, causal attention from `MatMul` and
//! `Softmax` with a `Where` mask, a GELU MLP, a head) and a BERT-style encoder block (a
//! sequence of vectors, a `Gemm` on the batch merged with the sequence, an additive mask, a
//! layer norm written out, GELU as `Erf`). Weights, layers and the stash of an attention
//! block are checked against numbers worked out here by hand; the instances plan and the
//! plans validate.

use crate::support::onnx::{
    float, import_onnx, int, ints, tensor_info, typed_info, write, GraphWriter,
};
use crate::support::pipeopt;
use onnx_rs::ast::{DataType, Model, OpType};

const V: i64 = 50; // vocabulary
const S: i64 = 8; // sequence
const D: i64 = 16; // width
const H: i64 = 2; // heads
const FF: i64 = 64; // MLP width
const MAX_POS: i64 = 16; // rows of the position table

/// `x @ W + b` (torch's `Linear` on a sequence exports as `MatMul` and `Add`).
fn linear(g: &mut GraphWriter, x: &'static str, name: &str, fin: i64, fout: i64) -> &'static str {
    let w = g.weight(&format!("{name}.weight"), &[fin, fout]);
    let b = g.weight(&format!("{name}.bias"), &[fout]);
    let y = g.op(OpType::MatMul, &[x, w], vec![]);
    g.op(OpType::Add, &[y, b], vec![])
}

fn layer_norm(g: &mut GraphWriter, x: &'static str, name: &str) -> &'static str {
    let w = g.weight(&format!("{name}.weight"), &[D]);
    let b = g.weight(&format!("{name}.bias"), &[D]);
    g.op(
        OpType::LayerNormalization,
        &[x, w, b],
        vec![int("axis", -1), float("epsilon", 1e-5)],
    )
}

/// `[batch, seq]` of `x` as the exporter computes it: `Shape`, `Gather`, `Unsqueeze`.
fn batch_and_seq(g: &mut GraphWriter, x: &'static str) -> (&'static str, &'static str) {
    let shape = g.op(OpType::Shape, &[x], vec![]);
    let mut dims = [""; 2];
    for (i, d) in dims.iter_mut().enumerate() {
        let idx = g.i64s(&[], &[i as i64]);
        let v = g.op(OpType::Gather, &[shape, idx], vec![int("axis", 0)]);
        let axes = g.i64s(&[1], &[0]);
        *d = g.op(OpType::Unsqueeze, &[v, axes], vec![]);
    }
    (dims[0], dims[1])
}

/// `[batch, seq, heads, dh]` of a `[batch, seq, d]` tensor.
fn heads_shape(g: &mut GraphWriter, x: &'static str) -> &'static str {
    let (b, s) = batch_and_seq(g, x);
    let h = g.i64s(&[1], &[H]);
    let dh = g.i64s(&[1], &[D / H]);
    g.op(OpType::Concat, &[b, s, h, dh], vec![int("axis", 0)])
}

/// Multi-head attention on projections q, k, v of `[batch, seq, d]`: scores, their scale,
/// the mask (`mask(g, scores)`), softmax, dropout, the weighted sum, heads merged back.
fn attention(
    g: &mut GraphWriter,
    x: &'static str,
    qkv: [&'static str; 3],
    mask: impl Fn(&mut GraphWriter, &'static str) -> &'static str,
) -> &'static str {
    let target = heads_shape(g, x);
    let mut t = [""; 3];
    for (i, p) in qkv.iter().enumerate() {
        let r = g.op(OpType::Reshape, &[p, target], vec![]);
        let perm: &[i64] = if i == 1 { &[0, 2, 3, 1] } else { &[0, 2, 1, 3] };
        t[i] = g.op(OpType::Transpose, &[r], vec![ints("perm", perm)]);
    }
    let scores = g.op(OpType::MatMul, &[t[0], t[1]], vec![]);
    let scale = g.scalar(((D / H) as f32).sqrt());
    let scores = g.op(OpType::Div, &[scores, scale], vec![]);
    let scores = mask(g, scores);
    let p = g.op(OpType::Softmax, &[scores], vec![int("axis", -1)]);
    let ratio = g.scalar(0.1);
    let p = g.op_n(OpType::Dropout, &[p, ratio], vec![], 2)[0];
    let y = g.op(OpType::MatMul, &[p, t[2]], vec![]);
    let y = g.op(OpType::Transpose, &[y], vec![ints("perm", &[0, 2, 1, 3])]);
    let (b, s) = batch_and_seq(g, x);
    let d = g.i64s(&[1], &[D]);
    let merged = g.op(OpType::Concat, &[b, s, d], vec![int("axis", 0)]);
    g.op(OpType::Reshape, &[y, merged], vec![])
}

fn dropout(g: &mut GraphWriter, x: &'static str) -> &'static str {
    let ratio = g.scalar(0.1);
    g.op_n(OpType::Dropout, &[x, ratio], vec![], 2)[0]
}

/// A GPT-2-style decoder of two pre-LN blocks on token ids `[N, 8]`: token and position
/// embeddings (`Gather`, positions from `Range`), a fused q/k/v projection split three
/// ways, causal attention masked by `Where` from a `tril` buffer sliced to the sequence,
/// `Gelu` (opset 20), a final norm and an untied head without bias.
/// Parameters: embeddings 800 + 256, per block 32 + 816 + 272 + 32 + 1088 + 1040 = 3280,
/// final norm 32, head 800: 8448.
fn gpt() -> Model<'static> {
    let mut g = GraphWriter {
        scope: "/wte".into(),
        ..Default::default()
    };
    let wte = g.weight("wte.weight", &[V, D]);
    let tok = g.op(OpType::Gather, &[wte, "input_ids"], vec![]);
    g.scope = "/wpe".into();
    let (_, s) = batch_and_seq(&mut g, "input_ids");
    let zero = g.i64s(&[], &[0]);
    let one = g.i64s(&[], &[1]);
    let axes = g.i64s(&[1], &[0]);
    let seq = g.op(OpType::Squeeze, &[s, axes], vec![]);
    let range = g.op(OpType::Range, &[zero, seq, one], vec![]);
    let axes = g.i64s(&[1], &[0]);
    let pos = g.op(OpType::Unsqueeze, &[range, axes], vec![]);
    let wpe = g.weight("wpe.weight", &[MAX_POS, D]);
    let pe = g.op(OpType::Gather, &[wpe, pos], vec![]);
    let mut x = g.op(OpType::Add, &[tok, pe], vec![]);
    x = dropout(&mut g, x);
    let tril: Vec<f32> = (0..MAX_POS * MAX_POS)
        .map(|k| if k % MAX_POS <= k / MAX_POS { 1.0 } else { 0.0 })
        .collect();
    for i in 0..2 {
        g.scope = format!("/h.{i}/attn");
        let bias = g.floats(
            &format!("h.{i}.attn.bias"),
            &[1, 1, MAX_POS, MAX_POS],
            tril.clone(),
        );
        let h = layer_norm(&mut g, x, &format!("h.{i}.ln_1"));
        let qkv = linear(&mut g, h, &format!("h.{i}.attn.c_attn"), D, 3 * D);
        let sizes = g.i64s(&[3], &[D, D, D]);
        let parts = g.op_n(OpType::Split, &[qkv, sizes], vec![int("axis", 2)], 3);
        let mask = |g: &mut GraphWriter, scores: &'static str| {
            let (_, s) = batch_and_seq(g, x);
            let ends = g.op(OpType::Concat, &[s, s], vec![int("axis", 0)]);
            let starts = g.i64s(&[2], &[0, 0]);
            let axes = g.i64s(&[2], &[2, 3]);
            let m = g.op(OpType::Slice, &[bias, starts, ends, axes], vec![]);
            let zero = g.scalar(0.0);
            let masked = g.op(OpType::Equal, &[m, zero], vec![]);
            let fill = g.scalar(f32::NEG_INFINITY);
            g.op(OpType::Where, &[masked, fill, scores], vec![])
        };
        let a = attention(&mut g, x, [parts[0], parts[1], parts[2]], mask);
        let a = linear(&mut g, a, &format!("h.{i}.attn.c_proj"), D, D);
        let a = dropout(&mut g, a);
        x = g.op(OpType::Add, &[x, a], vec![]);
        g.scope = format!("/h.{i}/mlp");
        let h = layer_norm(&mut g, x, &format!("h.{i}.ln_2"));
        let h = linear(&mut g, h, &format!("h.{i}.mlp.c_fc"), D, FF);
        let h = g.op(OpType::Gelu, &[h], vec![]);
        let h = linear(&mut g, h, &format!("h.{i}.mlp.c_proj"), FF, D);
        let h = dropout(&mut g, h);
        x = g.op(OpType::Add, &[x, h], vec![]);
    }
    g.scope = "/ln_f".into();
    let x = layer_norm(&mut g, x, "ln_f");
    g.scope = "/lm_head".into();
    let w = g.weight("lm_head.weight", &[D, V]);
    let y = g.op(OpType::MatMul, &[x, w], vec![]);
    g.model(
        typed_info("input_ids", DataType::Int64, &[-1, S]),
        tensor_info(y, &[-1, S, V]),
        20,
    )
}

/// A layer norm written out (ReduceMean, Sub, Pow, Sqrt, Div, then the learned scale and
/// shift as `Mul` and `Add`), as a hand-written norm exports.
fn layer_norm_by_hand(g: &mut GraphWriter, x: &'static str, name: &str) -> &'static str {
    let mean = g.op(OpType::ReduceMean, &[x], vec![ints("axes", &[-1])]);
    let d = g.op(OpType::Sub, &[x, mean], vec![]);
    let two = g.scalar(2.0);
    let sq = g.op(OpType::Pow, &[d, two], vec![]);
    let var = g.op(OpType::ReduceMean, &[sq], vec![ints("axes", &[-1])]);
    let eps = g.scalar(1e-12);
    let var = g.op(OpType::Add, &[var, eps], vec![]);
    let sd = g.op(OpType::Sqrt, &[var], vec![]);
    let n = g.op(OpType::Div, &[d, sd], vec![]);
    let w = g.weight(&format!("{name}.weight"), &[D]);
    let b = g.weight(&format!("{name}.bias"), &[D]);
    let y = g.op(OpType::Mul, &[n, w], vec![]);
    g.op(OpType::Add, &[y, b], vec![])
}

/// A BERT-style post-LN encoder block on vectors `[N, 8, 16]` at opset 17: q as a `Gemm`
/// on the batch merged with the sequence (`[-1, 16]`, as a 2-d `Linear` exports), k and v
/// as `MatMul` + `Add`, an additive padding mask, its first norm written out, GELU as
/// `x * 0.5 * (1 + erf(x / sqrt 2))`, its second norm a `LayerNormalization`.
/// Parameters: 4 x 272 + 32 + 1088 + 1040 + 32 = 3280.
fn bert_block() -> Model<'static> {
    let mut g = GraphWriter {
        scope: "/layer.0/attention".into(),
        ..Default::default()
    };
    let x = "hidden";
    let flat_shape = g.i64s(&[2], &[-1, D]);
    let flat = g.op(OpType::Reshape, &[x, flat_shape], vec![]);
    let qw = g.weight("q.weight", &[D, D]);
    let qb = g.weight("q.bias", &[D]);
    let q = g.op(OpType::Gemm, &[flat, qw, qb], vec![int("transB", 1)]);
    let (b, s) = batch_and_seq(&mut g, x);
    let d = g.i64s(&[1], &[D]);
    let back = g.op(OpType::Concat, &[b, s, d], vec![int("axis", 0)]);
    let q = g.op(OpType::Reshape, &[q, back], vec![]);
    let k = linear(&mut g, x, "k", D, D);
    let v = linear(&mut g, x, "v", D, D);
    let mut padding = vec![0.0f32; S as usize];
    padding[S as usize - 1] = -10000.0;
    let pad = g.floats("extended_attention_mask", &[1, 1, 1, S], padding);
    let a = attention(&mut g, x, [q, k, v], |g, scores| {
        g.op(OpType::Add, &[scores, pad], vec![])
    });
    let a = linear(&mut g, a, "attention.output.dense", D, D);
    let a = dropout(&mut g, a);
    let a = g.op(OpType::Add, &[a, x], vec![]);
    let a = layer_norm_by_hand(&mut g, a, "attention.output.LayerNorm");
    g.scope = "/layer.0/output".into();
    let h = linear(&mut g, a, "intermediate.dense", D, FF);
    let r2 = g.scalar(std::f32::consts::SQRT_2);
    let e = g.op(OpType::Div, &[h, r2], vec![]);
    let e = g.op(OpType::Erf, &[e], vec![]);
    let one = g.scalar(1.0);
    let e = g.op(OpType::Add, &[e, one], vec![]);
    let h = g.op(OpType::Mul, &[h, e], vec![]);
    let half = g.scalar(0.5);
    let h = g.op(OpType::Mul, &[h, half], vec![]);
    let h = linear(&mut g, h, "output.dense", FF, D);
    let h = dropout(&mut g, h);
    let h = g.op(OpType::Add, &[h, a], vec![]);
    let y = layer_norm(&mut g, h, "output.LayerNorm");
    g.model(tensor_info(x, &[-1, S, D]), tensor_info(y, &[-1, S, D]), 17)
}

/// Imports `model` at `granularity`, batch 4: the report and the instance.
fn import(
    dir: &std::path::Path,
    name: &str,
    model: &Model<'static>,
    granularity: &str,
) -> (serde_json::Value, serde_json::Value, std::path::PathBuf) {
    let bytes = onnx_rs::encode(model);
    assert!(bytes.len() < 32768, "{} bytes", bytes.len());
    let file = write(dir, &format!("{name}.onnx"), &bytes);
    let out = dir.join(format!("{name}-{granularity}.json"));
    let o = import_onnx(&file, 4, granularity, &out);
    assert!(
        o.status.success(),
        "{name} {granularity}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let inst: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    (report, inst, out)
}

/// Plans `instance` on 2 processors and has the plan file validated.
fn plans_and_validates(dir: &std::path::Path, instance: &std::path::Path) {
    let plan = dir.join(format!(
        "{}-plan.json",
        instance.file_stem().unwrap().to_string_lossy()
    ));
    let o = pipeopt()
        .args(["plan", "--instance"])
        .arg(instance)
        .args([
            "--processors",
            "2",
            "--memory",
            "1GiB",
            "--bandwidth",
            "12GB/s",
        ])
        .args(["--algorithm", "contiguous-opt", "--json", "--out"])
        .arg(&plan)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = pipeopt()
        .arg("validate")
        .arg(&plan)
        .arg("--json")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&v.stdout);
    assert!(v.status.success(), "{text}");
    let verdict: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(verdict["valid"], true, "{text}");
}

fn layers(inst: &serde_json::Value) -> &Vec<serde_json::Value> {
    inst["layers"].as_array().unwrap()
}

#[test]
fn a_gpt_decoder_imports_with_its_parameters_and_attention_stash() {
    let dir = tempfile::tempdir().unwrap();
    let model = gpt();
    for granularity in ["block", "op"] {
        let (report, inst, path) = import(dir.path(), "gpt", &model, granularity);
        assert_eq!(report["meta"]["parameters"], 8448, "{report}");
        assert_eq!(report["weights_bytes"], 8448.0 * 4.0, "{report}");
        // Token ids are int64: 4 x 8 x 8 bytes.
        assert_eq!(inst["input"], 4.0 * 8.0 * 8.0);
        let last = layers(&inst).last().unwrap();
        assert_eq!(last["out"], 4.0 * (S * V) as f64 * 4.0, "{last}");
        if granularity == "block" {
            // Single-tensor cuts: the embeddings with their dropout (no cut between the
            // token and the position embedding: neither keeps the tensor between them),
            // attention and MLP of each block (the residual stream), the final norm, the
            // head.
            let names: Vec<&str> = layers(&inst)
                .iter()
                .map(|l| l["name"].as_str().unwrap())
                .collect();
            assert_eq!(names.len(), 7, "{names:?}");
            assert_eq!(names[1], "h.0.attn", "{names:?}");
            // What autograd keeps for an attention block, batch 4, f32 (S 8, D 16, H 2):
            // its input 512 (kept by ln_1 too) + ln_1's mean and rstd 64 + c_attn's input
            // 512 + q and k (views of the q/k/v projection: 1536, v among them) + the
            // mask the comparison computes (8 x 8 bools, once for the batch) + softmax's
            // output 512 + dropout's mask 128 + the dropped probabilities 512 + c_proj's
            // input (the contiguous copy of the merged heads) 512 + dropout's mask 128;
            // every size per sample, times 4.
            let per_sample = 512 + 64 + 512 + 1536 + 512 + 128 + 512 + 512 + 128;
            assert_eq!(
                layers(&inst)[1]["stash"],
                (4 * per_sample + 64) as f64,
                "{}",
                layers(&inst)[1]
            );
        } else {
            // Every op that computes is a chain layer; views join a neighbour: 3
            // embedding ops, 18 per block, 2 in the head.
            assert_eq!(layers(&inst).len(), 3 + 2 * 18 + 2, "{}", inst["meta"]);
        }
        plans_and_validates(dir.path(), &path);
    }
}

#[test]
fn a_bert_block_imports_with_its_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let model = bert_block();
    for granularity in ["block", "op"] {
        let (report, inst, path) = import(dir.path(), "bert", &model, granularity);
        assert_eq!(report["meta"]["parameters"], 3280, "{report}");
        assert_eq!(report["weights_bytes"], 3280.0 * 4.0, "{report}");
        assert_eq!(inst["input"], 4.0 * (S * D) as f64 * 4.0);
        assert_eq!(inst["meta"]["input_shape"], serde_json::json!([S, D]));
        plans_and_validates(dir.path(), &path);
    }
}

#[test]
fn unsupported_ops_of_a_transformer_are_listed_at_once() {
    let mut model = gpt();
    let g = model.graph.as_mut().unwrap();
    let mut first = Vec::new();
    for n in g.node.iter_mut() {
        match n.op_type {
            OpType::Softmax => {
                n.op_type = OpType::GridSample;
                first.push(n.name);
            }
            OpType::Gelu => {
                n.op_type = OpType::Custom("FastGelu");
                first.push(n.name);
            }
            _ => {}
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad.onnx", &onnx_rs::encode(&model));
    let o = pipeopt()
        .args(["import", "onnx"])
        .arg(&file)
        .args(["--batch", "4", "--out"])
        .arg(dir.path().join("out.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for w in [
        "2 op types",
        "GridSample (2 nodes",
        "FastGelu (2 nodes",
        first[0],
        first[1],
    ] {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
}

/// Damaged transformer files (bytes flipped, cut anywhere) are errors or networks, never a
/// panic: the evaluation of constants meets every number a damaged file may hold.
#[test]
fn damaged_transformer_files_never_panic() {
    use pipeopt::nets::onnx::{network_from_onnx, ReadOptions};
    for model in [gpt(), bert_block()] {
        let bytes = onnx_rs::encode(&model);
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..1500 {
            let mut b = bytes.clone();
            if next() % 4 == 0 {
                b.truncate((next() as usize) % b.len());
            } else {
                for _ in 0..1 + next() % 4 {
                    let i = (next() as usize) % b.len();
                    b[i] ^= 1 << (next() % 8);
                }
            }
            if let Ok(net) = network_from_onnx(&b, "t", &ReadOptions::default()) {
                let device = pipeopt::nets::DeviceModel::resolve("h100", "test").unwrap();
                let _ = pipeopt::nets::op_instance(&net, 2, pipeopt::nets::DType::F32, &device);
            }
        }
    }
}

/// A file shape `[a, b, ..]` computed as exporters compute it: each entry the batch of `x`
/// times a constant (`Some(k)`) or a constant (`None`, the value), concatenated.
fn dims_of(g: &mut GraphWriter, x: &'static str, spec: &[(Option<i64>, i64)]) -> &'static str {
    let (n, _) = batch_and_seq(g, x);
    let parts: Vec<&'static str> = spec
        .iter()
        .map(|&(times_batch, v)| match times_batch {
            Some(k) => {
                let k = g.i64s(&[1], &[k]);
                g.op(OpType::Mul, &[n, k], vec![])
            }
            None => g.i64s(&[1], &[v]),
        })
        .collect();
    g.op(OpType::Concat, &parts, vec![int("axis", 0)])
}

/// `torch.nn.MultiheadAttention(16, 2, batch_first=True)` on `[N, 8, 16]` in training mode,
/// as torch 2.11's exporter writes it: sequence first (`Transpose` to `[S, N, E]`), the
/// packed projection as `MatMul` by the transposed weight and a bias `Add`, unflattened to
/// `[S, N, 3, E]`, moved to `[3, S, N, 1, E]` and squeezed, q, k, v selected by `Gather`,
/// each viewed as `[S, N * h, dh]` and transposed to `[N * h, S, dh]`, then `[N, h, S, dh]`;
/// both factors scaled, scores, softmax, dropout, the weighted sum moved to `[S, N, h, dh]`
/// and merged as `[S * N, E]` (the batch the inner factor) for the output `Gemm`, viewed back
/// as `[S, N, E]` and transposed batch first; a dropout and the residual add.
/// Parameters: 3 x 16 x 16 + 48 + 16 x 16 + 16 = 1,088.
fn torch_mha() -> Model<'static> {
    let mut g = GraphWriter {
        scope: "/layers.0/self_attn".into(),
        ..Default::default()
    };
    let x = "hidden";
    let dh = D / H;
    let t = g.op(OpType::Transpose, &[x], vec![ints("perm", &[1, 0, 2])]);
    let w = g.weight("in_proj_weight", &[3 * D, D]);
    let wt = g.op(OpType::Transpose, &[w], vec![ints("perm", &[1, 0])]);
    let proj = g.op(OpType::MatMul, &[t, wt], vec![]);
    let b = g.weight("in_proj_bias", &[3 * D]);
    let proj = g.op(OpType::Add, &[b, proj], vec![]);
    let target = dims_of(&mut g, x, &[(None, S), (Some(1), 0), (None, 3), (None, D)]);
    let proj = g.op(OpType::Reshape, &[proj, target], vec![]);
    let axes = g.i64s(&[1], &[0]);
    let proj = g.op(OpType::Unsqueeze, &[proj, axes], vec![]);
    let proj = g.op(
        OpType::Transpose,
        &[proj],
        vec![ints("perm", &[3, 1, 2, 0, 4])],
    );
    let axes = g.i64s(&[1], &[-2]);
    let proj = g.op(OpType::Squeeze, &[proj, axes], vec![]);
    let mut qkv = [""; 3];
    for (i, t) in qkv.iter_mut().enumerate() {
        let idx = g.i64s(&[], &[i as i64]);
        let p = g.op(OpType::Gather, &[proj, idx], vec![int("axis", 0)]);
        let heads = dims_of(&mut g, x, &[(None, S), (Some(H), 0), (None, dh)]);
        let p = g.op(OpType::Reshape, &[p, heads], vec![]);
        let p = g.op(OpType::Transpose, &[p], vec![ints("perm", &[1, 0, 2])]);
        let split = dims_of(&mut g, x, &[(Some(1), 0), (None, H), (None, S), (None, dh)]);
        *t = g.op(OpType::Reshape, &[p, split], vec![]);
    }
    let kt = g.op(
        OpType::Transpose,
        &[qkv[1]],
        vec![ints("perm", &[0, 1, 3, 2])],
    );
    let scale = (1.0 / (dh as f32).sqrt()).sqrt();
    let c = g.scalar(scale);
    let q = g.op(OpType::Mul, &[qkv[0], c], vec![]);
    let c = g.scalar(scale);
    let kt = g.op(OpType::Mul, &[kt, c], vec![]);
    let scores = g.op(OpType::MatMul, &[q, kt], vec![]);
    let p = g.op(OpType::Softmax, &[scores], vec![int("axis", -1)]);
    let p = dropout(&mut g, p);
    let y = g.op(OpType::MatMul, &[p, qkv[2]], vec![]);
    let y = g.op(OpType::Transpose, &[y], vec![ints("perm", &[2, 0, 1, 3])]);
    let merged = dims_of(&mut g, x, &[(Some(S), 0), (None, D)]);
    let y = g.op(OpType::Reshape, &[y, merged], vec![]);
    let wo = g.weight("out_proj.weight", &[D, D]);
    let bo = g.weight("out_proj.bias", &[D]);
    let y = g.op(OpType::Gemm, &[y, wo, bo], vec![int("transB", 1)]);
    let back = dims_of(&mut g, x, &[(None, S), (Some(1), 0), (None, D)]);
    let y = g.op(OpType::Reshape, &[y, back], vec![]);
    let y = g.op(OpType::Transpose, &[y], vec![ints("perm", &[1, 0, 2])]);
    let y = dropout(&mut g, y);
    let y = g.op(OpType::Add, &[x, y], vec![]);
    g.model(tensor_info(x, &[-1, S, D]), tensor_info(y, &[-1, S, D]), 17)
}

/// Per sample (floats, S = 8, E = 16, h = 2): the input (128, which the projection reads
/// through its transpose), q and k scaled (128 each, the scores' factors), the softmax's
/// output (128), the dropout's mask (128 bytes: 32), the dropped probabilities (128) and v
/// (128: the copy that its view to heads makes, `[S, N, E]` sliced from the projection
/// does not view as `[S, N * h, dh]`), the heads' copy merged to `[S * N, E]` (128, the
/// output projection's input), the output dropout's mask (32): 960 floats, 3,840 bytes;
/// 15,360 for the batch of 4. The unscaled q and k copies are kept by nothing.
#[test]
fn torch_multihead_attention_imports_sequence_first() {
    let dir = tempfile::tempdir().unwrap();
    for granularity in ["op", "block"] {
        let (r, inst, out) = import(dir.path(), "mha", &torch_mha(), granularity);
        assert_eq!(r["meta"]["parameters"], 1088, "{r}");
        assert_eq!(r["stash_bytes"], 15_360.0, "{granularity}: {r}");
        let names: Vec<&str> = layers(&inst)
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        if granularity == "op" {
            // Three copies for q, k and v, one for the heads merged back.
            let copies = names
                .iter()
                .map(|n| n.matches("contiguous").count())
                .sum::<usize>();
            assert_eq!(copies, 4, "{names:?}");
        }
        plans_and_validates(dir.path(), &out);
    }
}

/// A softmax of the sequence-first tensor (its axes are not the batch-first tensor's) is
/// refused, naming the node and the batch's axis.
#[test]
fn an_op_on_a_moved_batch_that_does_not_follow_it_is_refused() {
    let mut g = GraphWriter::default();
    let x = "hidden";
    let t = g.op(OpType::Transpose, &[x], vec![ints("perm", &[1, 0, 2])]);
    let y = g.op(OpType::Softmax, &[t], vec![int("axis", -1)]);
    let y = g.op(OpType::Transpose, &[y], vec![ints("perm", &[1, 0, 2])]);
    let model = g.model(tensor_info(x, &[-1, S, D]), tensor_info(y, &[-1, S, D]), 17);
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "moved.onnx", &onnx_rs::encode(&model));
    let o = pipeopt()
        .args(["import", "onnx"])
        .arg(&file)
        .args(["--batch", "4", "--out"])
        .arg(dir.path().join("moved.json"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for w in ["moved.onnx", "/Softmax_1", "holds the batch in axis 1"] {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
}
