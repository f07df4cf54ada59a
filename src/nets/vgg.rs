//! torchvision VGG-16 (configuration D, no batch norm). Chain: each conv+ReLU is one layer,
//! each max-pool one layer, the adaptive avgpool+flatten+fc1 (+ReLU+dropout) one layer, fc2
//! (+ReLU+dropout) one layer, fc3 one layer.

use super::{Network, B, R};

pub(crate) fn vgg16(image: usize) -> R<Network> {
    let cfg: [usize; 18] = [
        64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0,
    ];
    let mut blocks = Vec::new();
    let mut shape = vec![3, image, image];
    for (i, &c) in cfg.iter().enumerate() {
        let mut b;
        if c == 0 {
            b = B::new(format!("features.{i}"), shape);
            b.maxpool("pool", 0, 2, 2, 0, false)?;
        } else {
            b = B::new(format!("features.{i}"), shape);
            let x = b.conv_full("conv", 0, c, (3, 3), (1, 1), (1, 1), true)?;
            b.relu("relu", x)?;
        }
        shape = b.shape(b.last()).clone();
        blocks.push(b.finish());
    }
    let mut b = B::new("classifier.0", shape);
    let x = b.adaptive_avgpool("avgpool", 0, (7, 7))?;
    let x = b.flatten("flatten", x)?;
    let x = b.linear("fc1", x, 4096, true)?;
    let x = b.relu("relu1", x)?;
    b.dropout("dropout1", x, 0.5)?;
    shape = b.shape(b.last()).clone();
    blocks.push(b.finish());
    let mut b = B::new("classifier.3", shape);
    let x = b.linear("fc2", 0, 4096, true)?;
    let x = b.relu("relu2", x)?;
    b.dropout("dropout2", x, 0.5)?;
    shape = b.shape(b.last()).clone();
    blocks.push(b.finish());
    let mut b = B::new("classifier.6", shape);
    b.linear("fc3", 0, 1000, true)?;
    blocks.push(b.finish());
    Ok(Network {
        name: "vgg16".into(),
        input: vec![3, image, image],
        input_elem_bytes: None,
        blocks,
    })
}
