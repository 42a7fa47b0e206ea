// Autocast for the neuron device: the standard op lists PyTorch defines for
// every autocast backend, registered for AutocastPrivateUse1.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_neuronx {

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

}  // namespace torch_neuronx

// The list macros name ATen types unqualified: expand them in at::autocast.
namespace at::autocast {
TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define NEURON_LOWER(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(NEURON_LOWER)
#undef NEURON_LOWER
#define NEURON_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(NEURON_FP32)
#undef NEURON_FP32
#define NEURON_FP32_OPT(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(NEURON_FP32_OPT)
#undef NEURON_FP32_OPT
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define NEURON_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(NEURON_PROMOTE)
#undef NEURON_PROMOTE
  // CUDA bans binary_cross_entropy under autocast (log of fp16 probabilities
  // overflows); CPU autocast, bf16 as neuron's, runs it in fp32: so does neuron
  KERNEL_PRIVATEUSEONE(binary_cross_entropy, fp32)
  // Ops with no reduced-precision kernel on neuron (nor on CPU) that CPU
  // autocast runs in fp32, where the generic lists (CUDA's) leave them to
  // fail on a bf16 input: the FFTs (FNet's token mixing, spectrograms) and
  // CTC loss (speech recognition heads).
  KERNEL_PRIVATEUSEONE(fft_fft, fp32)
  KERNEL_PRIVATEUSEONE(fft_ifft, fp32)
  KERNEL_PRIVATEUSEONE(fft_fft2, fp32)
  KERNEL_PRIVATEUSEONE(fft_ifft2, fp32)
  KERNEL_PRIVATEUSEONE(fft_fftn, fp32)
  KERNEL_PRIVATEUSEONE(fft_ifftn, fp32)
  KERNEL_PRIVATEUSEONE(fft_rfft, fp32)
  KERNEL_PRIVATEUSEONE(fft_irfft, fp32)
  KERNEL_PRIVATEUSEONE(fft_rfft2, fp32)
  KERNEL_PRIVATEUSEONE(fft_irfft2, fp32)
  KERNEL_PRIVATEUSEONE(fft_rfftn, fp32)
  KERNEL_PRIVATEUSEONE(fft_irfftn, fp32)
  KERNEL_PRIVATEUSEONE(fft_hfft, fp32)
  KERNEL_PRIVATEUSEONE(fft_ihfft, fp32)
  KERNEL_PRIVATEUSEONE(stft, fp32)
  KERNEL_PRIVATEUSEONE(stft, center, fp32)
  KERNEL_PRIVATEUSEONE(ctc_loss, IntList, fp32)
  KERNEL_PRIVATEUSEONE(ctc_loss, Tensor, fp32)
}
}  // namespace at::autocast
