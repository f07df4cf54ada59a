//! What the bench binaries over the repository's op-level cases share: their lists from
//! environment variables and where the instances are.

use std::path::Path;

/// The comma-separated list in `var`, `default` when it is unset.
pub fn list(var: &str, default: &str) -> Vec<String> {
    std::env::var(var)
        .unwrap_or_else(|_| default.to_string())
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The repository's instances: from the current directory when it has them (a binary
/// carried to another machine), from the source tree otherwise.
pub fn repository_root() -> &'static Path {
    if Path::new("instances").is_dir() {
        Path::new(".")
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }
}
