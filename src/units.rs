//! Units: every quantity inside pipeopt is an `f64` in SI base units, seconds or bytes.
//!
//! The aliases below say which one a field holds; files store nothing else (docs/model.md
//! section 1). Configurations and the command line may write units explicitly, and this
//! module parses them:
//!
//! | kind      | accepted suffixes                                      | example    |
//! |-----------|--------------------------------------------------------|------------|
//! | size      | `B`, `kB`/`KB`, `MB`, `GB`, `TB` (powers of 1000), `KiB`, `MiB`, `GiB`, `TiB` (powers of 1024) | `16GiB` |
//! | bandwidth | a size followed by `/s`, or `bps`, `Kbps`/`kbps`, `Mbps`, `Gbps` (bits per second) | `12GB/s`, `100Mbps` |
//! | duration  | `s`, `ms`, `us`/`µs`, `ns`, `min`, `h`                 | `1.5ms`    |
//!
//! A bare number is taken in the base unit (bytes, bytes/s, seconds).

use std::fmt;

/// Seconds.
pub type Seconds = f64;
/// Bytes.
pub type Bytes = f64;
/// Bytes per second.
pub type BytesPerSecond = f64;

/// What went wrong while reading a quantity with a unit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("cannot read {text:?} as a {kind}: {reason}")]
pub struct UnitError {
    pub text: String,
    pub kind: &'static str,
    pub reason: String,
}

fn split_number(text: &str) -> Option<(f64, &str)> {
    let t = text.trim();
    let end = t
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_digit()
                || c == '.'
                || c == '_'
                || ((c == 'e' || c == 'E')
                    && t[i + 1..]
                        .starts_with(|d: char| d.is_ascii_digit() || d == '-' || d == '+'))
                || ((c == '-' || c == '+') && (i == 0 || t[..i].ends_with(['e', 'E']))))
        })
        .map(|(i, _)| i)
        .unwrap_or(t.len());
    let number: f64 = t[..end].replace('_', "").parse().ok()?;
    Some((number, t[end..].trim()))
}

fn parse_with(text: &str, kind: &'static str, table: &[(&str, f64)]) -> Result<f64, UnitError> {
    let err = |reason: String| UnitError {
        text: text.to_string(),
        kind,
        reason,
    };
    let (number, suffix) =
        split_number(text).ok_or_else(|| err("it does not start with a number".into()))?;
    let factor = table
        .iter()
        .find(|(s, _)| *s == suffix)
        .map(|&(_, f)| f)
        .ok_or_else(|| {
            let known: Vec<&str> = table
                .iter()
                .map(|(s, _)| *s)
                .filter(|s| !s.is_empty())
                .collect();
            err(format!(
                "unknown unit {suffix:?} (known: {})",
                known.join(", ")
            ))
        })?;
    let value = number * factor;
    if !value.is_finite() {
        return Err(err("the value is not finite".into()));
    }
    if value < 0.0 {
        return Err(err("must not be negative".into()));
    }
    Ok(value)
}

const SIZE_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("B", 1.0),
    ("kB", 1e3),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("TB", 1e12),
    ("KiB", 1024.0),
    ("MiB", 1048576.0),
    ("GiB", 1073741824.0),
    ("TiB", 1099511627776.0),
];

const DURATION_UNITS: &[(&str, f64)] = &[
    ("", 1.0),
    ("s", 1.0),
    ("ms", 1e-3),
    ("us", 1e-6),
    ("µs", 1e-6),
    ("ns", 1e-9),
    ("min", 60.0),
    ("h", 3600.0),
];

/// Parses a size such as `16GiB`, `3.5GB` or `1024` (bytes).
pub fn parse_bytes(text: &str) -> Result<Bytes, UnitError> {
    parse_with(text, "size", SIZE_UNITS)
}

/// Parses a bandwidth such as `12GB/s`, `1.5GiB/s`, `100Mbps` or `1e9` (bytes per second).
pub fn parse_bandwidth(text: &str) -> Result<BytesPerSecond, UnitError> {
    let t = text.trim();
    if let Some(size) = t.strip_suffix("/s") {
        return parse_with(size, "bandwidth", SIZE_UNITS).map_err(|mut e| {
            e.text = text.to_string();
            e
        });
    }
    const BITS: &[(&str, f64)] = &[
        ("", 1.0),
        ("bps", 1.0 / 8.0),
        ("kbps", 1e3 / 8.0),
        ("Kbps", 1e3 / 8.0),
        ("Mbps", 1e6 / 8.0),
        ("Gbps", 1e9 / 8.0),
    ];
    parse_with(t, "bandwidth", BITS)
}

/// Parses a duration such as `1.5ms`, `60s`, `2min` or `0.25` (seconds).
///
/// Durations above [`MAX_SECONDS`] (about 31 years) are errors: no limit or period needs
/// them, and they cannot be a `std::time::Duration` everywhere.
pub fn parse_seconds(text: &str) -> Result<Seconds, UnitError> {
    let v = parse_with(text, "duration", DURATION_UNITS)?;
    if v > MAX_SECONDS {
        return Err(UnitError {
            text: text.to_string(),
            kind: "duration",
            reason: format!("is longer than {MAX_SECONDS:e} s (about 31 years)"),
        });
    }
    Ok(v)
}

/// Parses a size that must be positive (a memory): `0` is refused, since nothing fits in it.
pub fn parse_positive_bytes(text: &str) -> Result<Bytes, UnitError> {
    positive(parse_bytes(text)?, text, "size", "nothing fits in 0 bytes")
}

/// Parses a bandwidth that must be positive: `0` is refused, since a transfer at 0 bytes/s
/// never ends.
pub fn parse_positive_bandwidth(text: &str) -> Result<BytesPerSecond, UnitError> {
    positive(
        parse_bandwidth(text)?,
        text,
        "bandwidth",
        "a transfer at 0 bytes/s never ends",
    )
}

fn positive(value: f64, text: &str, kind: &'static str, why: &str) -> Result<f64, UnitError> {
    if value > 0.0 {
        Ok(value)
    } else {
        Err(UnitError {
            text: text.to_string(),
            kind,
            reason: format!("must be positive ({why})"),
        })
    }
}

/// The longest duration [`parse_seconds`] accepts.
pub const MAX_SECONDS: Seconds = 1e9;

/// Displays a size with a binary unit, for people (`12.0 GiB`).
pub struct ShowBytes(pub Bytes);
impl fmt::Display for ShowBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0;
        let mut i = 0;
        while v.abs() >= 1024.0 && i + 1 < units.len() {
            v /= 1024.0;
            i += 1;
        }
        if i == 0 {
            write!(f, "{v:.0} {}", units[i])
        } else {
            write!(f, "{v:.2} {}", units[i])
        }
    }
}

/// Displays a duration with a readable unit, for people (`12.345 ms`).
pub struct ShowSeconds(pub Seconds);
impl fmt::Display for ShowSeconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        if s.abs() >= 1.0 {
            write!(f, "{s:.4} s")
        } else if s.abs() >= 1e-3 {
            write!(f, "{:.3} ms", s * 1e3)
        } else {
            write!(f, "{:.3} us", s * 1e6)
        }
    }
}

/// Serde helpers: a quantity written either as a number in SI units or as a string with a
/// unit (`"60s"`, `"16GiB"`, `"12GB/s"`), for configuration files.
pub mod serde_units {
    use serde::{Deserialize, Deserializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrText {
        Number(f64),
        Text(String),
    }

    fn with<'de, D: Deserializer<'de>>(
        d: D,
        parse: fn(&str) -> Result<f64, super::UnitError>,
    ) -> Result<Option<f64>, D::Error> {
        match Option::<NumberOrText>::deserialize(d)? {
            None => Ok(None),
            // A bare number is checked like the text of one (range limits included).
            Some(NumberOrText::Number(x)) if x.is_finite() && x >= 0.0 => parse(&format!("{x}"))
                .map(Some)
                .map_err(serde::de::Error::custom),
            Some(NumberOrText::Number(x)) => Err(serde::de::Error::custom(format!(
                "{x} is not a non-negative number"
            ))),
            Some(NumberOrText::Text(t)) => parse(&t).map(Some).map_err(serde::de::Error::custom),
        }
    }

    /// An optional duration (`"60s"` or `60`).
    pub fn seconds<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        with(d, super::parse_seconds)
    }
    /// An optional size (`"16GiB"` or a number of bytes).
    pub fn bytes<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        with(d, super::parse_bytes)
    }
    /// An optional bandwidth (`"12GB/s"` or bytes per second).
    pub fn bandwidth<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
        with(d, super::parse_bandwidth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("16GiB").unwrap(), 16.0 * 1073741824.0);
        assert_eq!(parse_bytes("3GB").unwrap(), 3e9);
        assert_eq!(parse_bytes(" 1.5 MiB ").unwrap(), 1.5 * 1048576.0);
        assert_eq!(parse_bytes("1024").unwrap(), 1024.0);
        assert_eq!(parse_bytes("1e3B").unwrap(), 1000.0);
        assert!(parse_bytes("12Gb").is_err());
        assert!(parse_bytes("-1GiB").is_err());
        assert!(parse_bytes("GiB").is_err());
        assert!(parse_bytes("NaN").is_err());
    }

    #[test]
    fn bandwidths() {
        assert_eq!(parse_bandwidth("12GB/s").unwrap(), 12e9);
        assert_eq!(parse_bandwidth("100Mbps").unwrap(), 12.5e6);
        assert_eq!(parse_bandwidth("1GiB/s").unwrap(), 1073741824.0);
        assert!(parse_bandwidth("12GB").is_err());
    }

    #[test]
    fn durations() {
        assert!((parse_seconds("1.5ms").unwrap() - 1.5e-3).abs() < 1e-18);
        assert_eq!(parse_seconds("60s").unwrap(), 60.0);
        assert_eq!(parse_seconds("2min").unwrap(), 120.0);
        assert_eq!(parse_seconds("0.25").unwrap(), 0.25);
        assert!(parse_seconds("5 parsecs").is_err());
    }

    #[test]
    fn display() {
        assert_eq!(ShowBytes(16.0 * 1073741824.0).to_string(), "16.00 GiB");
        assert_eq!(ShowSeconds(0.012345).to_string(), "12.345 ms");
    }
}
