//! Errors as values: [`Error`], what every fallible step of the library returns (bad
//! input, a failed write, a solver failure, a bug), and [`InputError`], the bad input kind,
//! which names the file (or flag) and the field at fault.
//!
//! The command line exits 2 on [`Error::Input`] and 1 on every other kind
//! ([`Error::exit_code`]; README, "Exit status").

use std::fmt;
use std::path::{Path, PathBuf};

/// The library's result: an [`Error`] unless said otherwise.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a step of the library failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Error {
    /// Bad input: a file, a field in it, a flag (exit status 2).
    #[error(transparent)]
    Input(#[from] InputError),
    /// Writing (or reading back) a file failed for a reason other than its content: a full
    /// disk, a directory that cannot be created, permissions; also a table or a drawing that
    /// could not be encoded for that file.
    #[error("{}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    /// A solver failed: it rejected a model or ended in a status it should not have.
    #[error("{0}")]
    Solver(String),
    /// What should not happen (a bug): an algorithm that breaks its own invariants.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// An [`Error::Io`] at `path`.
    pub fn io(path: &Path, reason: impl fmt::Display) -> Self {
        Error::Io {
            path: path.to_path_buf(),
            reason: reason.to_string(),
        }
    }

    /// An [`Error::Internal`].
    pub fn internal(reason: impl fmt::Display) -> Self {
        Error::Internal(reason.to_string())
    }

    /// The exit status of the command line for it: 2 for bad input, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Input(_) => 2,
            Error::Io { .. } | Error::Solver(_) | Error::Internal(_) => 1,
        }
    }
}

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
        let inner = e.into_inner();
        // A file cut short has no field at fault (the path ends in `?`, an element not yet
        // read): the line and column say where it ends.
        if inner.is_eof() {
            return InputError::file(path, format!("the file is cut short: {inner}"));
        }
        // An element not yet read is `?` in the path: the field is its parent.
        let field = field
            .trim_end_matches('?')
            .trim_end_matches('.')
            .to_string();
        InputError::new(path.display().to_string(), field, inner.to_string())
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

/// Deserializes TOML text (an experiment, a device model); errors name the file (`src`)
/// and the key.
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, src: &str) -> Result<T, InputError> {
    let de =
        toml::Deserializer::parse(text).map_err(|e| InputError::new(src, "", e.to_string()))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        InputError::new(
            src,
            if field == "." { String::new() } else { field },
            inner.message().trim().to_string(),
        )
    })
}

/// Writes `text` to `path` atomically: a temporary file beside it, then a rename, so a
/// reader never sees half a file and a failure leaves any older file as it was. A failure
/// is an [`Error::Io`] naming the file.
pub fn write_atomic(path: &Path, text: &[u8]) -> Result<(), Error> {
    let dir: PathBuf = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(&dir).map_err(|e| Error::io(path, e))?;
    std::io::Write::write_all(&mut tmp, text).map_err(|e| Error::io(path, e))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // NamedTempFile is created 0600; results are meant to be shared.
        let _ = tmp
            .as_file()
            .set_permissions(std::fs::Permissions::from_mode(0o644));
    }
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}
