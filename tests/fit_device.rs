//! `pipeopt fit-device`: the fit recovers a device it did not see, reproduces the quality
//! of the committed H100 model on the committed reports, writes a model that loads, and
//! refuses bad reports naming the file and field.

use crate::support::pipeopt;
use pipeopt::nets::device::Rates;
use pipeopt::nets::fit::{fit, measured_layers, FitOptions};
use pipeopt::nets::{analytic_instance, network, DType, DeviceModel};
use std::path::{Path, PathBuf};

/// Devices unlike the H100 model (every value moved, each within the fit's default box
/// of a factor 10, one slower and one faster), chosen so that every value shows in the
/// times: some 1x1 convolutions and the classifiers' matrix products are compute-bound
/// under them, not bandwidth-bound (a rate no op is bound by cannot be recovered).
fn synthetic() -> Vec<DeviceModel> {
    let rates = |conv: f64, conv1x1: f64, matmul: f64| Rates {
        conv,
        conv1x1,
        matmul,
        mem_bw: 2.0e12,
        per_op: 5e-6,
        per_layer: 40e-6,
    };
    let slower = DeviceModel {
        name: "slower".into(),
        source: "tests/fit_device.rs".into(),
        peak_f16: 500e12,
        fwd: rates(120e12, 20e12, 5e12),
        bwd: Rates {
            per_op: 12e-6,
            per_layer: 150e-6,
            ..rates(300e12, 30e12, 4e12)
        },
    };
    let faster = DeviceModel {
        name: "faster".into(),
        fwd: Rates {
            mem_bw: 3e12,
            per_op: 1e-6,
            per_layer: 8e-6,
            ..rates(500e12, 100e12, 8e12)
        },
        bwd: Rates {
            mem_bw: 2.5e12,
            per_op: 4e-6,
            per_layer: 60e-6,
            ..rates(800e12, 80e12, 7e12)
        },
        ..slower.clone()
    };
    vec![slower, faster]
}

/// Times from the analytic model (`pipeopt instance`'s code, not the fit's) under the
/// synthetic device: the fit, started from the H100 model, must find every value within 1%.
#[test]
fn the_fit_recovers_synthetic_devices_within_one_percent() {
    for truth in synthetic() {
        recovers(&truth);
    }
}

fn recovers(truth: &DeviceModel) {
    let mut layers = Vec::new();
    for model in ["resnet50", "inception_v3", "densenet121", "vgg16"] {
        let net = network(model, 224).unwrap();
        let inst = analytic_instance(&net, 8, DType::F32, truth).unwrap();
        let times: Vec<(String, f64, f64)> = inst
            .layers
            .iter()
            .map(|l| (l.name.clone(), l.fwd, l.bwd))
            .collect();
        layers.extend(measured_layers(model, model, 224, 8, &times).unwrap());
    }
    let options = FitOptions {
        base: DeviceModel::h100(),
        name: "recovered".into(),
        source: "test".into(),
        leave_one_out: false,
        within: 10.0,
    };
    let fitted = fit(&layers, &options).unwrap();
    let value = |r: &Rates| {
        [
            ("conv", r.conv),
            ("conv1x1", r.conv1x1),
            ("matmul", r.matmul),
            ("mem_bw", r.mem_bw),
            ("per_op", r.per_op),
            ("per_layer", r.per_layer),
        ]
    };
    for (dir, got, want) in [
        ("fwd", &fitted.model.fwd, &truth.fwd),
        ("bwd", &fitted.model.bwd, &truth.bwd),
    ] {
        for ((key, g), (_, w)) in value(got).into_iter().zip(value(want)) {
            assert!(
                (g / w - 1.0).abs() <= 0.01,
                "{} {dir}.{key}: fitted {g:e}, true {w:e}",
                truth.name
            );
        }
    }
    assert!(fitted.in_sample.fwd < 1.001 && fitted.in_sample.bwd < 1.001);
    // The base model is far from the truth, so the fit did move.
    assert!(fitted.base_in_sample.fwd > 1.2 || fitted.base_in_sample.bwd > 1.2);
}

fn reports() -> Vec<PathBuf> {
    let mut r: Vec<PathBuf> = std::fs::read_dir("results/profiles")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.to_str()
                .is_some_and(|s| s.ends_with("-b8-h100.report.json"))
        })
        .collect();
    r.sort();
    r
}

/// On the committed block-level H100 reports the fit is at least as good as the committed
/// constants (every layer within 1.72x forward, 2.05x backward), and what it writes loads
/// wherever `--device-model` is accepted.
#[test]
fn the_fit_on_the_committed_h100_reports_matches_the_committed_model() {
    let reports = reports();
    assert_eq!(reports.len(), 5, "{reports:?}");
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("fit.toml");
    let report = dir.path().join("fit.report.json");
    let out = pipeopt()
        .arg("fit-device")
        .args(&reports)
        .args(["--name", "h100-test", "--json", "--out"])
        .arg(&toml)
        .arg("--report")
        .arg(&report)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let worst = |k: &str, d: &str| json[k][d].as_f64().unwrap();
    assert!(worst("in_sample", "fwd") <= 1.72, "{json}");
    assert!(worst("in_sample", "bwd") <= 2.05, "{json}");
    // The committed constants, judged the same way, are what the issue's targets came from.
    assert!(worst("base_in_sample", "fwd") <= 1.72 + 1e-3);
    assert_eq!(json["layers_fitted"], 154);
    let held = json["leave_one_network_out"].as_array().unwrap();
    assert_eq!(held.len(), 5);
    for h in held {
        assert!(h["worst"]["fwd"].as_f64().unwrap() >= 1.0);
    }
    // The report has every layer, measured and predicted.
    let rep: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(rep["per_layer"].as_array().unwrap().len(), 154);
    // The model loads as --device-model and gives an instance.
    let inst = dir.path().join("inst.json");
    let out = pipeopt()
        .args([
            "instance", "--model", "resnet50", "--image", "224", "--batch", "8",
        ])
        .arg("--device-model")
        .arg(&toml)
        .arg("--out")
        .arg(&inst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&inst).unwrap();
    assert!(
        text.contains("h100-test"),
        "the instance names its device model"
    );
}

fn report_text(layers: &[(&str, f64, f64)], extra: &str) -> String {
    let layers: Vec<serde_json::Value> = layers
        .iter()
        .map(|(n, f, b)| serde_json::json!({"name": n, "fwd": f, "bwd": b}))
        .collect();
    let mut v = serde_json::json!({"model": "vgg16", "image": 224, "batch": 8,
                                   "dtype": "float32", "layers": layers});
    if !extra.is_empty() {
        let e: serde_json::Value = serde_json::from_str(extra).unwrap();
        for (k, x) in e.as_object().unwrap() {
            v[k] = x.clone();
        }
    }
    serde_json::to_string(&v).unwrap()
}

fn vgg_blocks() -> Vec<String> {
    network("vgg16", 224)
        .unwrap()
        .blocks
        .iter()
        .map(|b| b.name.clone())
        .collect()
}

fn refused(dir: &Path, text: &str, file: &str, field: &str) {
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap();
    let toml = dir.join("never.toml");
    let out = pipeopt()
        .args(["fit-device", "--out"])
        .arg(&toml)
        .arg(&path)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{file}: {err}");
    assert!(err.contains(file) && err.contains(field), "{file}: {err}");
    assert!(!toml.exists(), "{file}: nothing is written");
}

#[test]
fn bad_reports_are_refused_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let names = vgg_blocks();
    let good: Vec<(&str, f64, f64)> = names.iter().map(|n| (n.as_str(), 1e-3, 2e-3)).collect();

    let mut nan = good.clone();
    nan[3].2 = f64::NAN;
    // serde_json writes NaN as null: a missing number is refused as the wrong type.
    refused(dir.path(), &report_text(&nan, ""), "nan.json", "layers");

    let mut neg = good.clone();
    neg[2].1 = -1e-3;
    refused(
        dir.path(),
        &report_text(&neg, ""),
        "negative.json",
        "layers[2].fwd",
    );

    let mut renamed = good.clone();
    renamed[1].0 = "not-a-block";
    refused(
        dir.path(),
        &report_text(&renamed, ""),
        "renamed.json",
        "layers[1].name",
    );

    refused(
        dir.path(),
        &report_text(&good[1..], ""),
        "short.json",
        "layers",
    );
    refused(
        dir.path(),
        &report_text(&good, r#"{"granularity": "op"}"#),
        "op.json",
        "granularity",
    );
    refused(
        dir.path(),
        &report_text(&good, r#"{"dtype": "float16"}"#),
        "half.json",
        "dtype",
    );
    refused(
        dir.path(),
        &report_text(&good, r#"{"model": "lenet"}"#),
        "unknown.json",
        "model",
    );
    refused(
        dir.path(),
        "{\"model\": \"vgg16\", ",
        "truncated.json",
        "truncated.json",
    );
}
