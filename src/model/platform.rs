//! docs/model.md section 2: P identical processors of memory M, every pair joined by its
//! own link of bandwidth beta.

use serde::{Deserialize, Serialize};

use crate::error::InputError;
use crate::units::{Bytes, BytesPerSecond};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Platform {
    /// P: number of processors, numbered from 0.
    pub processors: usize,
    /// M: bytes of memory on each processor.
    pub memory: Bytes,
    /// beta: bytes per second on every link.
    pub bandwidth: BytesPerSecond,
    /// Opt-in extension: a link carries forward and backward transfers at the same time
    /// (two resources per pair, one per direction). Default: half duplex, one resource.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub full_duplex: bool,
}

/// The most processors a platform may have (P): plans, the judge and every algorithm keep
/// something per processor (and some per pair of them), so a larger P is refused where it
/// is read, before anything is allocated.
pub const MAX_PROCESSORS: usize = 1024;

impl Platform {
    pub fn new(processors: usize, memory: Bytes, bandwidth: BytesPerSecond) -> Self {
        Platform {
            processors,
            memory,
            bandwidth,
            full_duplex: false,
        }
    }

    pub fn check(&self) -> Result<(), InputError> {
        if self.processors == 0 {
            return Err(InputError::new(
                "platform",
                "processors",
                "must be at least 1",
            ));
        }
        if self.processors > MAX_PROCESSORS {
            return Err(InputError::new(
                "platform",
                "processors",
                format!(
                    "{} is more than the {MAX_PROCESSORS} processors pipeopt plans for",
                    self.processors
                ),
            ));
        }
        if !(self.memory.is_finite() && self.memory > 0.0) {
            return Err(InputError::new(
                "platform",
                "memory",
                format!("{} is not a positive size", self.memory),
            ));
        }
        if !(self.bandwidth.is_finite() && self.bandwidth > 0.0) {
            return Err(InputError::new(
                "platform",
                "bandwidth",
                format!("{} is not a positive bandwidth", self.bandwidth),
            ));
        }
        Ok(())
    }
}
