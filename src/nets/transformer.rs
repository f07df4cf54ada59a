//! Transformer chains for the synchronous-pipeline work: stacks of identical blocks plus an
//! embedding layer and a head layer.
//!
//! - `bert48`: BERT-style encoder, 48 layers, hidden 1024, 16 heads, FFN 4096, sequence 512,
//!   vocabulary 30522, post-LN (LayerNorm after each residual add, as in BERT), GELU.
//!   Embedding layer: token + learned position (512) + token-type (2, modelled as a second
//!   position-style table of 2 rows) embeddings, LayerNorm, dropout. Head: the MLM transform
//!   (dense 1024, GELU, LayerNorm) and an untied decoder to the vocabulary (BERT ties it to the
//!   token embedding; a pipeline stage cannot share it, so we count it once more).
//! - `gpt24`: GPT-style decoder (our choice, about GPT-3 XL's width): 24 layers, hidden 2048,
//!   16 heads, FFN 8192, sequence 1024, vocabulary 50257, pre-LN, causal attention. Head:
//!   final LayerNorm and an untied LM head (no bias).
//!
//! The network input is token ids `[S]` stored as int64 (8 bytes per element). Dropout 0.1.

use super::{Network, OpKind, B, R};

struct Cfg {
    name: &'static str,
    layers: usize,
    hidden: usize,
    heads: usize,
    ffn: usize,
    seq: usize,
    vocab: usize,
    pre_ln: bool,
    causal: bool,
}

const BERT48: Cfg = Cfg {
    name: "bert48",
    layers: 48,
    hidden: 1024,
    heads: 16,
    ffn: 4096,
    seq: 512,
    vocab: 30522,
    pre_ln: false,
    causal: false,
};
const GPT24: Cfg = Cfg {
    name: "gpt24",
    layers: 24,
    hidden: 2048,
    heads: 16,
    ffn: 8192,
    seq: 1024,
    vocab: 50257,
    pre_ln: true,
    causal: true,
};
const DROP: f64 = 0.1;
const EPS: f64 = 1e-5;

fn ln(b: &mut B, name: &str, x: usize, d: usize) -> R<usize> {
    let sh = b.shape(x).clone();
    b.op(name, OpKind::LayerNorm { dim: d, eps: EPS }, &[x], sh)
}

fn layer(c: &Cfg, i: usize) -> R<super::Block> {
    let d = c.hidden;
    let mut b = B::new(format!("layer{i}"), vec![c.seq, d]);
    let x0 = if c.pre_ln {
        ln(&mut b, "ln1", 0, d)?
    } else {
        0
    };
    let q = b.linear("attn.q", x0, d, true)?;
    let k = b.linear("attn.k", x0, d, true)?;
    let v = b.linear("attn.v", x0, d, true)?;
    let att = b.op(
        "attn",
        OpKind::Attention {
            heads: c.heads,
            causal: c.causal,
            dropout: DROP,
        },
        &[q, k, v],
        vec![c.seq, d],
    )?;
    let o = b.linear("attn.out", att, d, true)?;
    let o = b.dropout("attn.dropout", o, DROP)?;
    let mut r = b.add("add1", &[0, o])?;
    if !c.pre_ln {
        r = ln(&mut b, "ln1", r, d)?;
    }
    let x1 = if c.pre_ln {
        ln(&mut b, "ln2", r, d)?
    } else {
        r
    };
    let h = b.linear("ffn.fc1", x1, c.ffn, true)?;
    let h = b.op("ffn.gelu", OpKind::Gelu, &[h], vec![c.seq, c.ffn])?;
    let h = b.linear("ffn.fc2", h, d, true)?;
    let h = b.dropout("ffn.dropout", h, DROP)?;
    let y = b.add("add2", &[r, h])?;
    if !c.pre_ln {
        ln(&mut b, "ln2", y, d)?;
    }
    Ok(b.finish())
}

fn build(c: &Cfg) -> R<Network> {
    let d = c.hidden;
    let mut blocks = Vec::new();
    let mut b = B::new("embedding", vec![c.seq]);
    let x = b.op(
        "tok",
        OpKind::Embedding {
            vocab: c.vocab,
            dim: d,
        },
        &[0],
        vec![c.seq, d],
    )?;
    let mut x = b.op(
        "pos",
        OpKind::PositionEmbedding {
            max_len: c.seq,
            dim: d,
        },
        &[x],
        vec![c.seq, d],
    )?;
    if !c.pre_ln {
        x = b.op(
            "type",
            OpKind::PositionEmbedding { max_len: 2, dim: d },
            &[x],
            vec![c.seq, d],
        )?;
        x = ln(&mut b, "ln", x, d)?;
    }
    b.dropout("dropout", x, DROP)?;
    blocks.push(b.finish());
    for i in 0..c.layers {
        blocks.push(layer(c, i)?);
    }
    let mut b = B::new("head", vec![c.seq, d]);
    if c.pre_ln {
        let x = ln(&mut b, "ln_f", 0, d)?;
        b.linear("lm_head", x, c.vocab, false)?;
    } else {
        let x = b.linear("transform.dense", 0, d, true)?;
        let x = b.op("transform.gelu", OpKind::Gelu, &[x], vec![c.seq, d])?;
        let x = ln(&mut b, "transform.ln", x, d)?;
        b.linear("decoder", x, c.vocab, true)?;
    }
    blocks.push(b.finish());
    Ok(Network {
        name: c.name.into(),
        input: vec![c.seq],
        input_elem_bytes: Some(8),
        blocks,
    })
}

pub(crate) fn bert48() -> Network {
    build(&BERT48).expect("fixed sizes are valid")
}

pub(crate) fn gpt24() -> Network {
    build(&GPT24).expect("fixed sizes are valid")
}
