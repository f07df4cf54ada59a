// The CUDA caching allocator's statistics, which tch 0.24 does not expose.
// Compiled by build.rs against the libtorch headers when the `torch` feature is on; called
// from src/exec/alloc.rs. Every function catches C++ exceptions and returns non-zero instead.
#include <ATen/DeviceAccelerator.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/headeronly/version.h>
#include <vector>
#include <cstdint>

extern "C" {

// out[0..4]: requested bytes current and peak, allocated bytes current and peak (aggregate
// pool). Returns 0 on success, 1 when there is no accelerator or it has no statistics.
int pipeopt_device_stats(int device, int64_t* out) {
  try {
    auto stats = at::accelerator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    out[0] = stats.requested_bytes[all].current;
    out[1] = stats.requested_bytes[all].peak;
    out[2] = stats.allocated_bytes[all].current;
    out[3] = stats.allocated_bytes[all].peak;
    return 0;
  } catch (...) {
    return 1;
  }
}

int pipeopt_reset_peak(int device) {
  try {
    at::accelerator::resetPeakStats(static_cast<c10::DeviceIndex>(device));
    return 0;
  } catch (...) {
    return 1;
  }
}

// Backward of `y` with upstream gradient `g` (same shape) to `inputs` (n tensors), as
// torch.autograd.grad(y, inputs, g): nothing accumulates into .grad. tch 0.24 only has
// backward from a scalar. Tensors are tch's handles (at::Tensor*). When `outs` is not null,
// it receives n new handles (the gradients; an undefined tensor where an input is unused),
// which the caller owns (tch's Tensor::from_ptr); otherwise the gradients are freed.
// Returns 0 on success, 1 on a libtorch error.
int pipeopt_grad(const void* y, const void* g, const void* const* inputs, int n, void** outs) {
  try {
    const auto& out = *static_cast<const at::Tensor*>(y);
    const auto& grad = *static_cast<const at::Tensor*>(g);
    std::vector<at::Tensor> ins;
    ins.reserve(n);
    for (int i = 0; i < n; ++i) ins.push_back(*static_cast<const at::Tensor*>(inputs[i]));
    auto grads = torch::autograd::grad({out}, ins, {grad}, /*retain_graph=*/false,
                                       /*create_graph=*/false, /*allow_unused=*/true);
    if (grads.size() != ins.size()) return 1;
    if (outs != nullptr) {
      for (int i = 0; i < n; ++i) outs[i] = new at::Tensor(std::move(grads[i]));
    }
    return 0;
  } catch (...) {
    return 1;
  }
}

// The libtorch version of the headers this was compiled against ("2.11.0").
const char* pipeopt_torch_version() { return TORCH_VERSION; }

}  // extern "C"
