//! Errors about input: each names the file and the field at fault.

use std::fmt;
use std::path::{Path, PathBuf};

/// A problem with something the user gave us: a file, a field in it, a flag.
///
/// The command line prints it and exits with status 2; nothing panics on bad input.
#[derive(Debug, Clone, PartialEq)]
pub struct InputError {
    /// The file (or `--flag`) the problem is in.
    pub source: String,
    /// The field inside it, as a path (`layers[3].fwd`), or empty.
    pub field: String,
    /// What is wrong, in words.
    pub reason: String,
}

impl InputError {
    pub fn new(
        source: impl Into<String>,
        field: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        InputError {
            source: source.into(),
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// An error reading or parsing a whole file.
    pub fn file(path: &Path, reason: impl fmt::Display) -> Self {
        InputError::new(path.display().to_string(), "", reason.to_string())
    }

    /// Attaches a file name to an error found without one.
    pub fn in_file(mut self, path: &Path) -> Self {
        self.source = path.display().to_string();
        self
    }
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}: {}", self.source, self.reason)
        } else {
            write!(
                f,
                "{}: field `{}`: {}",
                self.source, self.field, self.reason
            )
        }
    }
}

impl std::error::Error for InputError {}

/// Reads a JSON file into `T`, naming the file and the JSON path of any field at fault.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, InputError> {
    let text = std::fs::read_to_string(path).map_err(|e| InputError::file(path, e))?;
    if text.trim().is_empty() {
        return Err(InputError::file(path, "the file is empty"));
    }
    let mut de = serde_json::Deserializer::from_str(&text);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = e.path().to_string();
        let field = if field == "." { String::new() } else { field };
        InputError::new(
            path.display().to_string(),
            field,
            e.into_inner().to_string(),
        )
    })?;
    // One document per file: anything but whitespace after it (a second plan pasted
    // below the first) is an error, not ignored.
    de.end().map_err(|e| {
        InputError::file(
            path,
            format!("unexpected text after the JSON document: {e}"),
        )
    })?;
    Ok(value)
}

/// Writes `text` to `path` atomically: a temporary file beside it, then a rename, so a
/// reader never sees half a file and a failure leaves any older file as it was.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), InputError> {
    let dir: PathBuf = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| InputError::file(&dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| InputError::file(path, e))?;
    std::io::Write::write_all(&mut tmp, text).map_err(|e| InputError::file(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // NamedTempFile is created 0600; results are meant to be shared.
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path)
        .map_err(|e| InputError::file(path, e.error))?;
    Ok(())
}
