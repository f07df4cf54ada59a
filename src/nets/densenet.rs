//! torchvision DenseNet-121 (growth 32, bn_size 4, blocks 6-12-24-16, 64 initial features,
//! memory_efficient irrelevant, drop_rate 0).
//!
//! Chain: the stem (conv0, norm0, relu0, pool0) is one layer, each dense layer one layer,
//! each transition one layer, the head (norm5, relu, adaptive avgpool, flatten, classifier)
//! one layer. Choice: the output of dense layer `i` of a dense block is the full
//! concatenation of the block's features so far (its input followed by its 32 new
//! channels); torchvision keeps a list and concatenates inside each layer, which moves the
//! same bytes across a cut. So a cut inside a dense block carries the growing feature map.

use super::{Network, B, R};

const EPS: f64 = 1e-5;

pub(crate) fn densenet121(image: usize) -> R<Network> {
    let (growth, bn_size) = (32, 4);
    let mut blocks = Vec::new();
    let mut b = B::new("features.stem", vec![3, image, image]);
    let x = b.conv("conv0", 0, 64, 7, 2, 3)?;
    let x = b.bn("norm0", x, EPS)?;
    let x = b.relu("relu0", x)?;
    b.maxpool("pool0", x, 3, 2, 1, false)?;
    let mut shape = b.shape(b.last()).clone();
    blocks.push(b.finish());
    for (i, &n) in [6usize, 12, 24, 16].iter().enumerate() {
        for j in 0..n {
            let mut b = B::new(
                format!("features.denseblock{}.denselayer{}", i + 1, j + 1),
                shape,
            );
            let x = b.bn("norm1", 0, EPS)?;
            let x = b.relu("relu1", x)?;
            let x = b.conv("conv1", x, bn_size * growth, 1, 1, 0)?;
            let x = b.bn("norm2", x, EPS)?;
            let x = b.relu("relu2", x)?;
            let x = b.conv("conv2", x, growth, 3, 1, 1)?;
            b.cat("cat", &[0, x])?;
            shape = b.shape(b.last()).clone();
            blocks.push(b.finish());
        }
        if i < 3 {
            let mut b = B::new(format!("features.transition{}", i + 1), shape.clone());
            let x = b.bn("norm", 0, EPS)?;
            let x = b.relu("relu", x)?;
            let x = b.conv("conv", x, shape[0] / 2, 1, 1, 0)?;
            b.avgpool("pool", x, 2, 2, 0)?;
            shape = b.shape(b.last()).clone();
            blocks.push(b.finish());
        }
    }
    let mut b = B::new("head", shape);
    let x = b.bn("norm5", 0, EPS)?;
    let x = b.relu("relu", x)?;
    let x = b.adaptive_avgpool("avgpool", x, (1, 1))?;
    let x = b.flatten("flatten", x)?;
    b.linear("classifier", x, 1000, true)?;
    blocks.push(b.finish());
    Ok(Network {
        name: "densenet121".into(),
        input: vec![3, image, image],
        input_elem_bytes: None,
        blocks,
    })
}
