//! Regenerates the committed analytic instances in `instances/` (see instances/README.md).
//! Usage: `cargo run --example make_instances [-- OUT_DIR]` (default `instances`).

use pipeopt::nets::{instance, network, op_instance, DType, DeviceModel};

fn main() -> anyhow::Result<()> {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "instances".into());
    let jobs: &[(&str, usize, usize)] = &[
        ("resnet50", 1000, 8),
        ("resnet101", 1000, 8),
        ("inception_v3", 1000, 8),
        ("densenet121", 1000, 8),
        ("vgg16", 1000, 8),
        ("vgg16", 224, 128),
        ("bert48", 0, 8),
        ("gpt24", 0, 8),
    ];
    std::fs::create_dir_all(&dir)?;
    for &(model, image, batch) in jobs {
        // The transformers have a fixed sequence length; `image` is ignored for them.
        let inst = instance(model, image.max(1), batch, DType::F32, &DeviceModel::h100())?;
        let file = if image == 0 {
            format!("{dir}/{model}-b{batch}.json")
        } else {
            format!("{dir}/{model}-{image}-b{batch}.json")
        };
        let text = serde_json::to_string_pretty(&inst)? + "\n";
        pipeopt::error::write_atomic(std::path::Path::new(&file), text.as_bytes())?;
        eprintln!("{file}: {} layers", inst.layers.len());
    }
    // Op-level chains (docs/op-chains.md).
    for model in ["resnet50", "resnet101", "inception_v3", "densenet121"] {
        let inst = op_instance(&network(model, 1000)?, 8, DType::F32, &DeviceModel::h100())?;
        let file = format!("{dir}/{model}-1000-b8-op.json");
        let text = serde_json::to_string_pretty(&inst)? + "\n";
        pipeopt::error::write_atomic(std::path::Path::new(&file), text.as_bytes())?;
        eprintln!("{file}: {} layers", inst.layers.len());
    }
    Ok(())
}
