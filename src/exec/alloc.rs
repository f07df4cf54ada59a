//! The device caching allocator's statistics (CUDA) and autograd from a non-scalar output,
//! through the small C++ shim `alloc_stats.cpp` that build.rs compiles against libtorch's
//! headers: tch 0.24 exposes neither.
//!
//! `requested` counts the bytes client code asked for (tensor storages, exact); `allocated`
//! what the allocator handed out (rounded up to 512-byte blocks). Both are for the whole
//! device. On the CPU there are no statistics: [`stats`] and [`requested`] return `None`.

use std::ffi::c_void;

use tch::{Device, Tensor};

use crate::units::Bytes;

extern "C" {
    fn pipeopt_device_stats(device: i32, out: *mut i64) -> i32;
    fn pipeopt_reset_peak(device: i32) -> i32;
    fn pipeopt_torch_version() -> *const std::os::raw::c_char;
    fn pipeopt_grad(
        y: *const c_void,
        g: *const c_void,
        inputs: *const *const c_void,
        n: i32,
        outs: *mut *mut c_void,
    ) -> i32;
}

/// libtorch's `autograd::grad` threw (the shim caught the C++ exception).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("libtorch autograd::grad failed (does the output require grad?)")]
pub struct GradFailed;

fn grad_impl(
    y: &Tensor,
    g: &Tensor,
    inputs: &[&Tensor],
    keep: bool,
) -> Result<Vec<Tensor>, GradFailed> {
    let ptrs: Vec<*const c_void> = inputs.iter().map(|t| t.as_ptr() as *const c_void).collect();
    let mut outs: Vec<*mut c_void> = vec![std::ptr::null_mut(); inputs.len()];
    let out_ptr = if keep {
        outs.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    // SAFETY: every pointer is a live tch tensor handle (an at::Tensor*) borrowed for the
    // call; the shim copies the handles, catches every C++ exception, and when `keep` fills
    // `outs` with `inputs.len()` new at::Tensor* that we take ownership of below.
    let rc = unsafe {
        pipeopt_grad(
            y.as_ptr() as *const c_void,
            g.as_ptr() as *const c_void,
            ptrs.as_ptr(),
            ptrs.len() as i32,
            out_ptr,
        )
    };
    if rc != 0 {
        return Err(GradFailed);
    }
    if !keep {
        return Ok(Vec::new());
    }
    // SAFETY: each pointer is a fresh heap at::Tensor* from the shim, owned by nobody else.
    Ok(outs
        .into_iter()
        .map(|p| unsafe { Tensor::from_ptr(p as *mut _) })
        .collect())
}

/// Backward of `y` with upstream gradient `g` to `inputs`, like `torch.autograd.grad(y,
/// inputs, g)`: frees the graph, accumulates nothing, drops the gradients. tch has backward
/// only from a scalar; the profiler needs it from a layer's output without an extra op.
pub fn backward_with(y: &Tensor, g: &Tensor, inputs: &[&Tensor]) -> Result<(), GradFailed> {
    grad_impl(y, g, inputs, false).map(|_| ())
}

/// Like [`backward_with`], returning the gradients of `inputs` (in order; an undefined
/// tensor for an input the output does not depend on).
pub fn grad(y: &Tensor, g: &Tensor, inputs: &[&Tensor]) -> Result<Vec<Tensor>, GradFailed> {
    grad_impl(y, g, inputs, true)
}

/// The libtorch version this binary was built against (its headers), e.g. "2.11.0".
pub fn torch_version() -> String {
    // SAFETY: the shim returns a pointer to a static NUL-terminated string literal.
    unsafe { std::ffi::CStr::from_ptr(pipeopt_torch_version()) }
        .to_string_lossy()
        .into_owned()
}

/// One reading of the allocator's counters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AllocStats {
    pub requested: Bytes,
    pub requested_peak: Bytes,
    pub allocated: Bytes,
    pub allocated_peak: Bytes,
}

/// The allocator's counters of `device`, `None` on the CPU or when libtorch has none.
pub fn stats(device: Device) -> Option<AllocStats> {
    let Device::Cuda(i) = device else {
        return None;
    };
    let mut out = [0i64; 4];
    // SAFETY: the shim writes exactly four i64 into `out` and catches every C++ exception.
    let rc = unsafe { pipeopt_device_stats(i as i32, out.as_mut_ptr()) };
    (rc == 0).then(|| AllocStats {
        requested: out[0] as Bytes,
        requested_peak: out[1] as Bytes,
        allocated: out[2] as Bytes,
        allocated_peak: out[3] as Bytes,
    })
}

/// Bytes client code holds on `device` now (`requested`), `None` on the CPU.
pub fn requested(device: Device) -> Option<Bytes> {
    stats(device).map(|s| s.requested)
}

/// Resets the peak counters of `device` to their current values. No-op on the CPU.
pub fn reset_peak(device: Device) {
    if let Device::Cuda(i) = device {
        // SAFETY: no pointers; the shim catches every C++ exception.
        unsafe {
            pipeopt_reset_peak(i as i32);
        }
    }
}
