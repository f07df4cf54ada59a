//! `pipeopt import onnx` on the ops of today's vision networks as PyTorch's exporter writes
//! them: an EfficientNet-style inverted residual block (SiLU as `Sigmoid` and `Mul`, a
//! depthwise convolution, squeeze-and-excitation, stochastic depth drawn per sample by
//! `RandomUniformLike`) and a ViT-style stem and head (patches by a strided convolution, a
//! class token `Expand`ed to the batch and concatenated, a learned position tensor, the
//! class token selected for the head), their weights and one-batch stash checked against
//! numbers worked out here by hand; random operands that are not one value per sample are
//! refused.

use crate::support::onnx::{import_onnx, int, ints, tensor_info, write, GraphWriter};
use onnx_rs::ast::{Attribute, AttributeType, Model, OpType, TensorProto};

use crate::support::onnx::float;

const C: i64 = 4; // block input and output channels
const E: i64 = 8; // expanded channels
const R: i64 = 2; // squeeze-and-excitation channels
const HW: i64 = 8; // height and width

fn conv(
    g: &mut GraphWriter,
    x: &'static str,
    name: &str,
    (cin, cout, k, groups): (i64, i64, i64, i64),
    bias: bool,
) -> &'static str {
    let w = g.weight(&format!("{name}.weight"), &[cout, cin / groups, k, k]);
    let mut inputs = vec![x, w];
    if bias {
        inputs.push(g.weight(&format!("{name}.bias"), &[cout]));
    }
    let p = k / 2;
    g.op(
        OpType::Conv,
        &inputs,
        vec![
            ints("kernel_shape", &[k, k]),
            ints("pads", &[p, p, p, p]),
            int("group", groups),
        ],
    )
}

fn batch_norm(g: &mut GraphWriter, x: &'static str, name: &str, c: i64) -> &'static str {
    let p: Vec<&'static str> = ["weight", "bias", "running_mean", "running_var"]
        .iter()
        .map(|s| g.weight(&format!("{name}.{s}"), &[c]))
        .collect();
    g.op_n(
        OpType::BatchNormalization,
        &[x, p[0], p[1], p[2], p[3]],
        vec![int("training_mode", 1)],
        3,
    )[0]
}

fn silu(g: &mut GraphWriter, x: &'static str) -> &'static str {
    let s = g.op(OpType::Sigmoid, &[x], vec![]);
    g.op(OpType::Mul, &[x, s], vec![])
}

/// torchvision's `stochastic_depth(x, p, "row", training=True)` as the exporter writes it:
/// a `[N, 1, 1, 1]` shape from `Shape`, `ConstantOfShape`, `RandomUniformLike`, `Less` than
/// the survival rate, `Cast`, `Div` by it, then the product; `dims` other than one value per
/// sample make the random operand of another shape.
fn stochastic_depth(g: &mut GraphWriter, x: &'static str, ones: &[i64]) -> &'static str {
    let shape = g.op(OpType::Shape, &[x], vec![]);
    let zero = g.i64s(&[], &[0]);
    let n = g.op(OpType::Gather, &[shape, zero], vec![int("axis", 0)]);
    let axes = g.i64s(&[1], &[0]);
    let n = g.op(OpType::Unsqueeze, &[n, axes], vec![]);
    let rest = g.i64s(&[ones.len() as i64], ones);
    let dims = g.op(OpType::Concat, &[n, rest], vec![int("axis", 0)]);
    let fill = Attribute {
        name: "value",
        r#type: AttributeType::Tensor,
        t: Some(TensorProto::from_f32("", vec![1], vec![0.0])),
        ..Default::default()
    };
    let zeros = g.op(OpType::ConstantOfShape, &[dims], vec![fill]);
    let u = g.op(OpType::RandomUniformLike, &[zeros], vec![]);
    let keep = g.scalar(0.8);
    let mask = g.op(OpType::Less, &[u, keep], vec![]);
    let mask = g.op(OpType::Cast, &[mask], vec![int("to", 1)]);
    let keep = g.scalar(0.8);
    let noise = g.op(OpType::Div, &[mask, keep], vec![]);
    g.op(OpType::Mul, &[x, noise], vec![])
}

/// An inverted residual block on `[N, 4, 8, 8]` (EfficientNet's MBConv, its depthwise
/// convolution without activation): 1x1 expansion to 8 channels, BN, SiLU; 3x3 depthwise
/// convolution, BN; squeeze-and-excitation (global pool, 1x1 to 2 with bias, SiLU, 1x1 to 8 with bias,
/// sigmoid, the map times the gate); 1x1 projection to 4, BN; stochastic depth; the
/// residual add. Parameters: 32 + 16 + 72 + 16 + 18 + 24 + 32 + 8 = 218.
fn mbconv(sd_dims: &[i64]) -> Model<'static> {
    let mut g = GraphWriter {
        scope: "/block".into(),
        ..Default::default()
    };
    let x = "x";
    let h = conv(&mut g, x, "expand", (C, E, 1, 1), false);
    let h = batch_norm(&mut g, h, "bn1", E);
    let h = silu(&mut g, h);
    let h = conv(&mut g, h, "dw", (E, E, 3, E), false);
    let h = batch_norm(&mut g, h, "bn2", E);
    g.scope = "/block/se".into();
    let s = g.op(OpType::GlobalAveragePool, &[h], vec![]);
    let s = conv(&mut g, s, "se.fc1", (E, R, 1, 1), true);
    let s = silu(&mut g, s);
    let s = conv(&mut g, s, "se.fc2", (R, E, 1, 1), true);
    let s = g.op(OpType::Sigmoid, &[s], vec![]);
    let h = g.op(OpType::Mul, &[h, s], vec![]);
    g.scope = "/block".into();
    let h = conv(&mut g, h, "project", (E, C, 1, 1), false);
    let h = batch_norm(&mut g, h, "bn3", C);
    g.scope = "/block/stochastic_depth".into();
    let h = stochastic_depth(&mut g, h, sd_dims);
    g.scope = "/block".into();
    let y = g.op(OpType::Add, &[h, x], vec![]);
    g.model(
        tensor_info("x", &[-1, C, HW, HW]),
        tensor_info(y, &[-1, C, HW, HW]),
        17,
    )
}

fn import(model: &Model<'static>, granularity: &str) -> (std::process::Output, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "mbconv.onnx", &onnx_rs::encode(model));
    let out = dir.path().join("mbconv.json");
    let o = import_onnx(&file, 2, granularity, &out);
    let inst = std::fs::read_to_string(&out)
        .ok()
        .map_or(serde_json::Value::Null, |s| {
            serde_json::from_str(&s).unwrap()
        });
    (o, inst)
}

/// Per sample (floats): the input x (256, the expansion's input), the expansion's output
/// (512, BN's input), BN's output and the sigmoid's (512 each, the SiLU product's factors),
/// the product (512, the depthwise convolution's input), the depthwise output (512, BN's
/// input), BN's output (512, a factor of the gate product), the pooled vector (8, fc1's
/// input), fc1's output and its sigmoid (2 each), their product (2, fc2's input), the gate
/// (8: the sigmoid's result, the product's other factor), the gated map (512, the
/// projection's input), the projection's output (256, BN's input) and the stochastic depth
/// factor (1): 4,119. Per batch: each BN's mean and inverse std (2 x (8 + 8 + 4) = 40).
/// Batch 2, 4 bytes: (2 x 4,119 + 40) x 4 = 33,112 bytes.
#[test]
fn an_efficientnet_block_with_stochastic_depth_imports_with_its_stash_by_hand() {
    for granularity in ["op", "block"] {
        let (o, inst) = import(&mbconv(&[1, 1, 1]), granularity);
        assert!(
            o.status.success(),
            "{granularity}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["meta"]["parameters"], 218, "{r}");
        assert_eq!(r["weights_bytes"], 218.0 * 4.0, "{r}");
        assert_eq!(r["stash_bytes"], 33_112.0, "{granularity}: {r}");
        if granularity == "op" {
            // The product by the noise is an op of its own, which keeps the factor (one
            // float per sample) and not its input.
            let sd = inst["layers"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["name"].as_str().unwrap().contains("stochastic_depth/Mul"))
                .unwrap_or_else(|| panic!("no stochastic depth layer in {inst}"))
                .clone();
            assert!(sd["fwd"].as_f64().unwrap() > 0.0, "{sd}");
        }
    }
}

/// Noise of one value per channel (a random operand of dims `[N, 4, 1, 1]`) is not
/// stochastic depth: refused naming the node and the dims.
#[test]
fn random_operands_other_than_one_value_per_sample_are_refused() {
    let (o, inst) = import(&mbconv(&[C, 1, 1]), "op");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    for w in [
        "mbconv.onnx",
        "/block/stochastic_depth/Mul",
        "a random operand of dims [N, 4, 1, 1]",
        "stochastic depth",
    ] {
        assert!(err.contains(w), "{w:?} not in {err}");
    }
    assert!(inst.is_null());
}

/// `[N, dims..]` as the exporter computes it: the batch from `Shape` of `x`, then constants.
fn with_batch(g: &mut GraphWriter, x: &'static str, dims: &[i64]) -> &'static str {
    let shape = g.op(OpType::Shape, &[x], vec![]);
    let zero = g.i64s(&[], &[0]);
    let n = g.op(OpType::Gather, &[shape, zero], vec![int("axis", 0)]);
    let axes = g.i64s(&[1], &[0]);
    let n = g.op(OpType::Unsqueeze, &[n, axes], vec![]);
    let rest = g.i64s(&[dims.len() as i64], dims);
    g.op(OpType::Concat, &[n, rest], vec![int("axis", 0)])
}

/// A ViT on `[N, 3, 8, 8]` images, as torchvision's `VisionTransformer` exports: 4 x 4
/// patches by a strided convolution (3 -> 16, bias) viewed as `[N, 16, 4]` and transposed to
/// 4 tokens, the class token `[1, 1, 16]` expanded to `[N, 1, 1]` and concatenated first,
/// a learned position tensor `[1, 5, 16]` added, a layer norm, the class token selected
/// (`Gather` of index 0 on axis 1) for a linear head to 10 classes.
/// Parameters: 768 + 16 + 16 + 80 + 32 + 170 = 1,082.
fn vit() -> Model<'static> {
    let mut g = GraphWriter::default();
    let x = "x";
    let w = g.weight("conv_proj.weight", &[16, 3, 4, 4]);
    let b = g.weight("conv_proj.bias", &[16]);
    let p = g.op(
        OpType::Conv,
        &[x, w, b],
        vec![ints("kernel_shape", &[4, 4]), ints("strides", &[4, 4])],
    );
    let target = with_batch(&mut g, x, &[16, 4]);
    let p = g.op(OpType::Reshape, &[p, target], vec![]);
    let p = g.op(OpType::Transpose, &[p], vec![ints("perm", &[0, 2, 1])]);
    let token = g.weight("class_token", &[1, 1, 16]);
    let dims = with_batch(&mut g, x, &[1, 1]);
    let token = g.op(OpType::Expand, &[token, dims], vec![]);
    let h = g.op(OpType::Concat, &[token, p], vec![int("axis", 1)]);
    let pos = g.weight("encoder.pos_embedding", &[1, 5, 16]);
    let h = g.op(OpType::Add, &[h, pos], vec![]);
    let lw = g.weight("ln.weight", &[16]);
    let lb = g.weight("ln.bias", &[16]);
    let h = g.op(
        OpType::LayerNormalization,
        &[h, lw, lb],
        vec![int("axis", -1), float("epsilon", 1e-6)],
    );
    let zero = g.i64s(&[], &[0]);
    let h = g.op(OpType::Gather, &[h, zero], vec![int("axis", 1)]);
    let hw = g.weight("head.weight", &[10, 16]);
    let hb = g.weight("head.bias", &[10]);
    let y = g.op(OpType::Gemm, &[h, hw, hb], vec![int("transB", 1)]);
    g.model(
        tensor_info(x, &[-1, 3, 8, 8]),
        tensor_info(y, &[-1, 10]),
        17,
    )
}

/// Per sample (floats): the image (192, the patch convolution's input), the norm's input
/// (80) and its mean and rstd per token (10), the norm's output (80: the head reads the
/// class token through a select, a view, so the whole storage is kept); the token
/// concatenation, the position add and the views keep nothing. Batch 2, 4 bytes: 2 x 362 x
/// 4 = 2,896 bytes.
#[test]
fn a_vit_stem_with_its_class_token_imports_with_its_stash_by_hand() {
    for granularity in ["op", "block"] {
        let (o, inst) = import(&vit(), granularity);
        assert!(
            o.status.success(),
            "{granularity}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["meta"]["parameters"], 1082, "{r}");
        assert_eq!(r["stash_bytes"], 2_896.0, "{granularity}: {r}");
        let last = inst["layers"].as_array().unwrap().last().unwrap().clone();
        assert_eq!(last["out"], 2.0 * 10.0 * 4.0, "{last}");
    }
}

/// ConvNeXt's layer scale, a learned `[C, 1, 1]` multiplied on a `[C, H, W]` map, is a
/// parameter (4 here) whose product keeps its input (the map: 4 x 8 x 8 floats per sample;
/// batch 2: 2,048 bytes).
#[test]
fn a_layer_scale_per_channel_is_learned() {
    let mut g = GraphWriter::default();
    let gamma = g.weight("layer_scale", &[C, 1, 1]);
    let y = g.op(OpType::Mul, &["x", gamma], vec![]);
    let model = g.model(
        tensor_info("x", &[-1, C, HW, HW]),
        tensor_info(y, &[-1, C, HW, HW]),
        17,
    );
    let (o, _) = import(&model, "op");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["meta"]["parameters"], C, "{r}");
    assert_eq!(r["stash_bytes"], 2_048.0, "{r}");
}
