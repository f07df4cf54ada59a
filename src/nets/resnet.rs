//! torchvision ResNet-50/101 (v1.5: the stride sits on the 3x3 conv of a bottleneck).
//! Chain: the stem (conv1, bn1, relu, maxpool) is one layer, each bottleneck one layer, the
//! head (avgpool, flatten, fc) one layer.

use super::{Network, B, R};

const EPS: f64 = 1e-5;

pub(crate) fn resnet(name: &str, layers: &[usize; 4], image: usize) -> R<Network> {
    let mut blocks = Vec::new();
    let mut b = B::new("stem", vec![3, image, image]);
    let x = b.conv("conv1", 0, 64, 7, 2, 3)?;
    let x = b.bn("bn1", x, EPS)?;
    let x = b.relu("relu", x)?;
    b.maxpool("maxpool", x, 3, 2, 1, false)?;
    let mut shape = b.shape(b.last()).clone();
    blocks.push(b.finish());
    let mut inplanes = 64;
    for (i, (&n, planes)) in layers.iter().zip([64, 128, 256, 512]).enumerate() {
        for j in 0..n {
            let stride = if j == 0 && i > 0 { 2 } else { 1 };
            let mut b = B::new(format!("layer{}.{}", i + 1, j), shape);
            let x = b.conv("conv1", 0, planes, 1, 1, 0)?;
            let x = b.bn("bn1", x, EPS)?;
            let x = b.relu("relu1", x)?;
            let x = b.conv("conv2", x, planes, 3, stride, 1)?;
            let x = b.bn("bn2", x, EPS)?;
            let x = b.relu("relu2", x)?;
            let x = b.conv("conv3", x, planes * 4, 1, 1, 0)?;
            let x = b.bn("bn3", x, EPS)?;
            let id = if stride != 1 || inplanes != planes * 4 {
                let d = b.conv("downsample.0", 0, planes * 4, 1, stride, 0)?;
                b.bn("downsample.1", d, EPS)?
            } else {
                0
            };
            let x = b.add("add", &[x, id])?;
            b.relu("relu3", x)?;
            inplanes = planes * 4;
            shape = b.shape(b.last()).clone();
            blocks.push(b.finish());
        }
    }
    let mut b = B::new("head", shape);
    let x = b.adaptive_avgpool("avgpool", 0, (1, 1))?;
    let x = b.flatten("flatten", x)?;
    b.linear("fc", x, 1000, true)?;
    blocks.push(b.finish());
    Ok(Network {
        name: name.into(),
        input: vec![3, image, image],
        input_elem_bytes: None,
        blocks,
    })
}
