//! torchvision Inception-v3 without the auxiliary head (`aux_logits=False`;
//! `transform_input` only rescales the input and has no parameters). BasicConv2d is conv
//! (no bias) + BN (eps 0.001) + ReLU. The stem's max-pools are `max_pool2d(3, stride 2)`
//! without padding or ceil mode; the branch pools are `avg_pool2d(3, 1, 1)`.
//!
//! Chain: the stem is five layers (Conv2d_1a; Conv2d_2a; Conv2d_2b + maxpool1; Conv2d_3b;
//! Conv2d_4a + maxpool2), each Mixed module one layer, the head (adaptive avgpool, dropout,
//! flatten, fc) one layer.

use super::{Network, B, R};

const EPS: f64 = 0.001;

fn basic(
    b: &mut B,
    name: &str,
    x: usize,
    cout: usize,
    k: (usize, usize),
    s: usize,
    p: (usize, usize),
) -> R<usize> {
    let y = b.conv_full(&format!("{name}.conv"), x, cout, k, (s, s), p, false)?;
    let y = b.bn(&format!("{name}.bn"), y, EPS)?;
    b.relu(&format!("{name}.relu"), y)
}

fn sq(b: &mut B, name: &str, x: usize, cout: usize, k: usize, s: usize, p: usize) -> R<usize> {
    basic(b, name, x, cout, (k, k), s, (p, p))
}

fn module_a(b: &mut B, pool_features: usize) -> R<usize> {
    let b1 = sq(b, "branch1x1", 0, 64, 1, 1, 0)?;
    let b5 = sq(b, "branch5x5_1", 0, 48, 1, 1, 0)?;
    let b5 = sq(b, "branch5x5_2", b5, 64, 5, 1, 2)?;
    let b3 = sq(b, "branch3x3dbl_1", 0, 64, 1, 1, 0)?;
    let b3 = sq(b, "branch3x3dbl_2", b3, 96, 3, 1, 1)?;
    let b3 = sq(b, "branch3x3dbl_3", b3, 96, 3, 1, 1)?;
    let bp = b.avgpool("avg_pool", 0, 3, 1, 1)?;
    let bp = sq(b, "branch_pool", bp, pool_features, 1, 1, 0)?;
    b.cat("cat", &[b1, b5, b3, bp])
}

fn module_b(b: &mut B) -> R<usize> {
    let b3 = sq(b, "branch3x3", 0, 384, 3, 2, 0)?;
    let bd = sq(b, "branch3x3dbl_1", 0, 64, 1, 1, 0)?;
    let bd = sq(b, "branch3x3dbl_2", bd, 96, 3, 1, 1)?;
    let bd = sq(b, "branch3x3dbl_3", bd, 96, 3, 2, 0)?;
    let bp = b.maxpool("max_pool", 0, 3, 2, 0, false)?;
    b.cat("cat", &[b3, bd, bp])
}

fn module_c(b: &mut B, c7: usize) -> R<usize> {
    let b1 = sq(b, "branch1x1", 0, 192, 1, 1, 0)?;
    let b7 = sq(b, "branch7x7_1", 0, c7, 1, 1, 0)?;
    let b7 = basic(b, "branch7x7_2", b7, c7, (1, 7), 1, (0, 3))?;
    let b7 = basic(b, "branch7x7_3", b7, 192, (7, 1), 1, (3, 0))?;
    let bd = sq(b, "branch7x7dbl_1", 0, c7, 1, 1, 0)?;
    let bd = basic(b, "branch7x7dbl_2", bd, c7, (7, 1), 1, (3, 0))?;
    let bd = basic(b, "branch7x7dbl_3", bd, c7, (1, 7), 1, (0, 3))?;
    let bd = basic(b, "branch7x7dbl_4", bd, c7, (7, 1), 1, (3, 0))?;
    let bd = basic(b, "branch7x7dbl_5", bd, 192, (1, 7), 1, (0, 3))?;
    let bp = b.avgpool("avg_pool", 0, 3, 1, 1)?;
    let bp = sq(b, "branch_pool", bp, 192, 1, 1, 0)?;
    b.cat("cat", &[b1, b7, bd, bp])
}

fn module_d(b: &mut B) -> R<usize> {
    let b3 = sq(b, "branch3x3_1", 0, 192, 1, 1, 0)?;
    let b3 = sq(b, "branch3x3_2", b3, 320, 3, 2, 0)?;
    let b7 = sq(b, "branch7x7x3_1", 0, 192, 1, 1, 0)?;
    let b7 = basic(b, "branch7x7x3_2", b7, 192, (1, 7), 1, (0, 3))?;
    let b7 = basic(b, "branch7x7x3_3", b7, 192, (7, 1), 1, (3, 0))?;
    let b7 = sq(b, "branch7x7x3_4", b7, 192, 3, 2, 0)?;
    let bp = b.maxpool("max_pool", 0, 3, 2, 0, false)?;
    b.cat("cat", &[b3, b7, bp])
}

fn module_e(b: &mut B) -> R<usize> {
    let b1 = sq(b, "branch1x1", 0, 320, 1, 1, 0)?;
    let b3 = sq(b, "branch3x3_1", 0, 384, 1, 1, 0)?;
    let b3a = basic(b, "branch3x3_2a", b3, 384, (1, 3), 1, (0, 1))?;
    let b3b = basic(b, "branch3x3_2b", b3, 384, (3, 1), 1, (1, 0))?;
    let b3 = b.cat("cat_3x3", &[b3a, b3b])?;
    let bd = sq(b, "branch3x3dbl_1", 0, 448, 1, 1, 0)?;
    let bd = sq(b, "branch3x3dbl_2", bd, 384, 3, 1, 1)?;
    let bda = basic(b, "branch3x3dbl_3a", bd, 384, (1, 3), 1, (0, 1))?;
    let bdb = basic(b, "branch3x3dbl_3b", bd, 384, (3, 1), 1, (1, 0))?;
    let bd = b.cat("cat_3x3dbl", &[bda, bdb])?;
    let bp = b.avgpool("avg_pool", 0, 3, 1, 1)?;
    let bp = sq(b, "branch_pool", bp, 192, 1, 1, 0)?;
    b.cat("cat", &[b1, b3, bd, bp])
}

pub(crate) fn inception_v3(image: usize) -> R<Network> {
    let mut blocks = Vec::new();
    let mut shape = vec![3, image, image];
    let mut push = |b: B, shape: &mut Vec<usize>| {
        *shape = b.shape(b.last()).clone();
        blocks.push(b.finish());
    };
    let mut b = B::new("Conv2d_1a_3x3", shape.clone());
    sq(&mut b, "Conv2d_1a_3x3", 0, 32, 3, 2, 0)?;
    push(b, &mut shape);
    let mut b = B::new("Conv2d_2a_3x3", shape.clone());
    sq(&mut b, "Conv2d_2a_3x3", 0, 32, 3, 1, 0)?;
    push(b, &mut shape);
    let mut b = B::new("Conv2d_2b_3x3", shape.clone());
    let x = sq(&mut b, "Conv2d_2b_3x3", 0, 64, 3, 1, 1)?;
    b.maxpool("maxpool1", x, 3, 2, 0, false)?;
    push(b, &mut shape);
    let mut b = B::new("Conv2d_3b_1x1", shape.clone());
    sq(&mut b, "Conv2d_3b_1x1", 0, 80, 1, 1, 0)?;
    push(b, &mut shape);
    let mut b = B::new("Conv2d_4a_3x3", shape.clone());
    let x = sq(&mut b, "Conv2d_4a_3x3", 0, 192, 3, 1, 0)?;
    b.maxpool("maxpool2", x, 3, 2, 0, false)?;
    push(b, &mut shape);
    for (name, pf) in [("Mixed_5b", 32), ("Mixed_5c", 64), ("Mixed_5d", 64)] {
        let mut b = B::new(name, shape.clone());
        module_a(&mut b, pf)?;
        push(b, &mut shape);
    }
    let mut b = B::new("Mixed_6a", shape.clone());
    module_b(&mut b)?;
    push(b, &mut shape);
    for (name, c7) in [
        ("Mixed_6b", 128),
        ("Mixed_6c", 160),
        ("Mixed_6d", 160),
        ("Mixed_6e", 192),
    ] {
        let mut b = B::new(name, shape.clone());
        module_c(&mut b, c7)?;
        push(b, &mut shape);
    }
    let mut b = B::new("Mixed_7a", shape.clone());
    module_d(&mut b)?;
    push(b, &mut shape);
    for name in ["Mixed_7b", "Mixed_7c"] {
        let mut b = B::new(name, shape.clone());
        module_e(&mut b)?;
        push(b, &mut shape);
    }
    let mut b = B::new("head", shape.clone());
    let x = b.adaptive_avgpool("avgpool", 0, (1, 1))?;
    let x = b.dropout("dropout", x, 0.5)?;
    let x = b.flatten("flatten", x)?;
    b.linear("fc", x, 1000, true)?;
    push(b, &mut shape);
    Ok(Network {
        name: "inception_v3".into(),
        input: vec![3, image, image],
        input_elem_bytes: None,
        blocks,
    })
}
