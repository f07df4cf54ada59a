//! Device models as data: per direction (forward, backward), a roofline per op class plus
//! launch overheads, read from TOML (`devices/*.toml`, format in `devices/README.md`). The
//! analytic times of `analytic.rs` read nothing else about the device.
//!
//! The four files of `devices/` are built into the binary and found by name
//! ([`DeviceModel::preset`]); any other file is read by path ([`DeviceModel::load`]).
//! [`DeviceModel::resolve`] does either, as `--device-model` does.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{parse_toml, InputError};

/// Element type of activations and weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DType {
    F32,
    F16,
}

impl DType {
    pub fn bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F16 => "float16",
        }
    }
    /// Accepts `f32`, `float32`, `f16`, `float16`, `half`.
    pub fn parse(s: &str) -> Option<DType> {
        match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" | "float" => Some(DType::F32),
            "f16" | "float16" | "half" => Some(DType::F16),
            _ => None,
        }
    }
}

/// Achieved rates and fixed costs of one direction (forward or backward) on a device: a
/// roofline per op class plus launch overheads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rates {
    /// FLOP/s of convolutions with a kernel larger than 1x1.
    pub conv: f64,
    /// FLOP/s of 1x1 convolutions.
    pub conv1x1: f64,
    /// FLOP/s of linear layers and attention products.
    pub matmul: f64,
    /// Bytes/s of memory traffic (every op is at least this slow; other ops only this).
    pub mem_bw: f64,
    /// Seconds added per op (kernel launches; views excluded).
    pub per_op: f64,
    /// Seconds added per chain layer.
    pub per_layer: f64,
}

/// The range of a rate (FLOP/s or bytes/s): from a thousand per second to 1e18 per second,
/// far beyond any device, so that a layer's time is always a finite number of seconds.
pub const RATE_RANGE: (f64, f64) = (1e3, 1e18);

/// The largest overhead (seconds per op or per layer).
pub const MAX_OVERHEAD_SECONDS: f64 = 3600.0;

/// A rate's check: the error says the range ([`RATE_RANGE`]).
fn check_rate(key: String, v: f64) -> Result<(), (String, String)> {
    let (lo, hi) = RATE_RANGE;
    if v.is_finite() && (lo..=hi).contains(&v) {
        Ok(())
    } else {
        Err((
            key,
            format!("is {v}; a rate is from {lo:e} to {hi:e} per second"),
        ))
    }
}

impl Rates {
    /// Rates within [`RATE_RANGE`], overheads from 0 to [`MAX_OVERHEAD_SECONDS`]; the error
    /// names the key (`direction.key`).
    fn check(&self, direction: &str) -> Result<(), (String, String)> {
        let rates = [
            ("conv", self.conv),
            ("conv1x1", self.conv1x1),
            ("matmul", self.matmul),
            ("mem_bw", self.mem_bw),
        ];
        for (key, v) in rates {
            check_rate(format!("{direction}.{key}"), v)?;
        }
        for (key, v) in [("per_op", self.per_op), ("per_layer", self.per_layer)] {
            if !(v.is_finite() && (0.0..=MAX_OVERHEAD_SECONDS).contains(&v)) {
                return Err((
                    format!("{direction}.{key}"),
                    format!("is {v}; an overhead is from 0 to {MAX_OVERHEAD_SECONDS} seconds"),
                ));
            }
        }
        Ok(())
    }
}

/// A device model: rates for the forward and for the backward pass, for float32 (float16
/// uses the datasheet's tensor-core peak with the same bandwidth and overheads).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceModel {
    /// Its name in reports and instance metadata.
    pub name: String,
    /// Where the numbers come from.
    pub source: String,
    /// FLOP/s of dense float16 tensor cores (datasheet), for `DType::F16`.
    pub peak_f16: f64,
    pub fwd: Rates,
    pub bwd: Rates,
}

/// The models built into the binary: `devices/*.toml` by name.
const PRESETS: &[(&str, &str)] = &[
    ("h100", include_str!("../../devices/h100.toml")),
    ("h100-peak", include_str!("../../devices/h100-peak.toml")),
    ("a100", include_str!("../../devices/a100.toml")),
    ("v100", include_str!("../../devices/v100.toml")),
];

impl DeviceModel {
    /// The names of the built-in models.
    pub fn preset_names() -> impl Iterator<Item = &'static str> {
        PRESETS.iter().map(|(name, _)| *name)
    }

    /// A built-in model by name (case-insensitive).
    pub fn preset(name: &str) -> Option<DeviceModel> {
        let (file, text) = PRESETS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name))?;
        // The built-in files are checked by the tests: one that does not parse is a bug.
        let model = DeviceModel::parse(text, &format!("devices/{file}.toml"))
            .unwrap_or_else(|e| panic!("built-in device model: {e}"));
        Some(model)
    }

    /// The default model: `h100`, fitted to measured profiles.
    pub fn h100() -> DeviceModel {
        DeviceModel::preset("h100").expect("h100 is built in")
    }

    /// Parses and checks a model's TOML text; errors name `src` and the key.
    pub fn parse(text: &str, src: &str) -> Result<DeviceModel, InputError> {
        let model: DeviceModel = parse_toml(text, src)?;
        model
            .check()
            .map_err(|(key, why)| InputError::new(src, key, why))?;
        Ok(model)
    }

    /// Reads a model from a TOML file.
    pub fn load(path: &Path) -> Result<DeviceModel, InputError> {
        let text = std::fs::read_to_string(path).map_err(|e| InputError::file(path, e))?;
        DeviceModel::parse(&text, &path.display().to_string())
    }

    /// What `--device-model` names: a file when the argument ends in `.toml` or names an
    /// existing file, else a built-in model.
    pub fn resolve(arg: &str, flag: &str) -> Result<DeviceModel, InputError> {
        let path = Path::new(arg);
        if arg.ends_with(".toml") || path.is_file() {
            return DeviceModel::load(path);
        }
        DeviceModel::preset(arg).ok_or_else(|| {
            let names: Vec<&str> = DeviceModel::preset_names().collect();
            InputError::new(
                flag,
                "",
                format!(
                    "is {arg:?}; use {} or the path of a device model file (devices/README.md)",
                    names.join(", ")
                ),
            )
        })
    }

    fn check(&self) -> Result<(), (String, String)> {
        if self.name.trim().is_empty() {
            return Err(("name".into(), "is empty".into()));
        }
        check_rate("peak_f16".into(), self.peak_f16)?;
        self.fwd.check("fwd")?;
        self.bwd.check("bwd")
    }

    /// The rates of one direction for `dtype`.
    pub fn rates(&self, backward: bool, dtype: DType) -> Rates {
        let r = if backward { self.bwd } else { self.fwd };
        match dtype {
            DType::F32 => r,
            DType::F16 => Rates {
                conv: self.peak_f16,
                conv1x1: self.peak_f16,
                matmul: self.peak_f16,
                ..r
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_model_parses_under_its_own_name() {
        for name in DeviceModel::preset_names() {
            let model = DeviceModel::preset(name).unwrap();
            assert_eq!(model.name, name);
        }
        assert_eq!(DeviceModel::preset("V100").unwrap().name, "v100");
        assert!(DeviceModel::preset("tpu").is_none());
    }

    #[test]
    fn a_bad_model_names_its_key() {
        let good = include_str!("../../devices/a100.toml");
        let e = DeviceModel::parse(&good.replacen("conv = 19.5e12", "conv = -1.0", 1), "x.toml")
            .unwrap_err();
        assert_eq!(e.field, "fwd.conv", "{e}");
        let e = DeviceModel::parse(&format!("{good}\nextra = 1\n"), "x.toml").unwrap_err();
        assert!(e.to_string().contains("extra"), "{e}");
        let e = DeviceModel::parse(&good.replacen("per_layer = 0.0", "", 1), "x.toml").unwrap_err();
        assert!(e.to_string().contains("per_layer"), "{e}");
        let e = DeviceModel::parse("name = [", "x.toml").unwrap_err();
        assert_eq!(e.source, "x.toml");
    }
}
