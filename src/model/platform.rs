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
