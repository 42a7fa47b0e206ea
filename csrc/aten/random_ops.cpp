// The device RNG's ops (Philox, csrc/kernels/random.c): uniform_, normal_,
// random_, bernoulli_, exponential_, log_normal_, cauchy_, geometric_,
// multinomial, randperm, dropout; and the device asserts (_assert_async) that
// multinomial's checks use.
#include "neuron.h"

#include <ATen/Dispatch.h>
#include <ATen/EmptyTensor.h>
#include <ATen/Operators.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/unfold_native.h>
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <ATen/ops/view_native.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/MathConstants.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

namespace torch_neuronx {
// Messages outlive the ops that raise them (the fault keeps a pointer):
// interned for the process's lifetime (compiled.cpp).
const char *intern_message(const std::string &msg);
}  // namespace torch_neuronx

namespace torch_neuronx {

namespace {

// ------------------------------------------------------------------ random

// A neuron generator dispatches random ops here even for CPU tensors; CPU
// and CUDA refuse a generator of another device with this message.
void check_generator_target(const at::Tensor &t) {
  TORCH_CHECK(t.is_privateuseone(),
              "Expected a 'cpu' device type for generator but found 'neuron'");
}

at::Tensor &launch_random(at::Tensor &self, tnk_random_args_t &a, std::optional<at::Generator> gen,
                          const char *name) {
  check_generator_target(self);
  if (self.numel() == 0) return self;
  at::assert_no_internal_overlap(self);
  TORCH_CHECK_TYPE(to_view(self, &a.dst), name, ": neuron random kernels do not support dtype ",
                   self.scalar_type());
  set_shape(&a.shape, self.sizes());
  auto so = philox_next(gen, self.device().index());
  a.seed = so.first;
  a.offset = so.second;
  launch_kernel<TNK_K_RANDOM>(self.device().index(), a, name);
  return self;
}

at::Tensor &uniform_(at::Tensor &self, double from, double to, std::optional<at::Generator> gen) {
  TORCH_CHECK(from <= to,
              "uniform_ expects to return a [from, to) range, but "
              "found from=",
              from, " > to=", to);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()) || at::isComplexType(self.scalar_type()),
              "uniform_ only supports floating-point dtypes, got ", self.scalar_type());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_UNIFORM;
  a.lo = from;
  a.hi = to;
  return launch_random(self, a, gen, "aten::uniform_");
}

at::Tensor &normal_(at::Tensor &self, double mean, double std, std::optional<at::Generator> gen) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  if (self.is_complex()) {  // as ATen: both parts, each with std / sqrt(2)
    check_generator_target(self);
    at::Tensor parts = at::view_as_real(self);
    normal_(parts, mean, std / std::sqrt(2.0), gen);
    return self;
  }
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "normal_ only supports floating-point dtypes, got ", self.scalar_type());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_NORMAL;
  a.lo = mean;
  a.hi = std;
  return launch_random(self, a, gen, "aten::normal_");
}

at::Tensor &random_range(at::Tensor &self, int64_t from, uint64_t range,
                         std::optional<at::Generator> gen) {
  if (is_wide_unsigned(self.scalar_type())) {
    // No kernel dtype for these: draw in int64 (the range checks kept every
    // value inside [0, INT64_MAX]) and convert on the way in.
    check_generator_target(self);
    if (self.numel() == 0) return self;
    at::assert_no_internal_overlap(self);
    at::Tensor wide = at::empty(self.sizes(), self.options().dtype(at::kLong));
    random_range(wide, from, range, gen);
    self.copy_(wide);
    return self;
  }
  tnk_random_args_t a{};
  a.kind = TNK_RAND_INT;
  a.ilo = from;
  a.irange = range;
  return launch_random(self, a, gen, "aten::random_");
}

// Largest value random_() may produce for a dtype: floats stop where
// consecutive integers are still representable, as on CPU and CUDA.
uint64_t random_default_range(c10::ScalarType t) {
  switch (t) {
    case at::kBool: return 2;
    case at::kHalf: return (1ull << 11) + 1;
    case at::kBFloat16: return (1ull << 8) + 1;
    case at::kFloat: return (1ull << 24) + 1;
    case at::kDouble: return (1ull << 53) + 1;
    case at::kByte: return 256;
    case at::kChar: return 128;
    case at::kShort: return 1ull << 15;
    case at::kInt: return 1ull << 31;
    case at::kLong: return 1ull << 63;
    default:
      // CPU and CUDA have no bound-less random_ for the wide unsigned types
      TORCH_CHECK_NOT_IMPLEMENTED(false, "\"random_\" not implemented for '", t, "'");
  }
}

at::Tensor &random_(at::Tensor &self, std::optional<at::Generator> gen) {
  check_generator_target(self);
  return random_range(self, 0, random_default_range(self.scalar_type()), gen);
}

// The draws are integers converted to the float dtype; near the ends of a
// wide range that conversion rounds. As ATen, 'from' moves up and 'to' down
// to the nearest integers that round inside [from, to).
template <typename T>
int64_t float_from(int64_t from) {
  const auto up = static_cast<int64_t>(static_cast<T>(from + 1));
  if (up >= from) return from;
  int bits = 0;
  for (int64_t m = std::abs(from + 1); m >>= 1;) ++bits;
  return up + (int64_t{1} << (bits - std::numeric_limits<T>::digits + 1));
}

template <typename T>
int64_t float_to(int64_t to) {
  const auto down = static_cast<int64_t>(static_cast<T>(to - 1));
  if (down < to) return to;
  int bits = 0;
  for (int64_t m = std::abs(to - 1); m >>= 1;) ++bits;
  return down - (int64_t{1} << (bits - std::numeric_limits<T>::digits + 1));
}

// The values of an integer (or bool) dtype as int64: uint64's top is
// INT64_MAX, as far as int64 bounds reach.
void integer_bounds(c10::ScalarType t, int64_t *lo, int64_t *hi) {
  *lo = 0;
  *hi = std::numeric_limits<int64_t>::max();
  switch (t) {
    case at::kBool: *hi = 1; break;
    case at::kByte: *hi = 255; break;
    case at::kUInt16: *hi = 65535; break;
    case at::kUInt32: *hi = 4294967295LL; break;
    case at::kUInt64: break;
    case at::kChar:
      *lo = -128;
      *hi = 127;
      break;
    case at::kShort:
      *lo = -32768;
      *hi = 32767;
      break;
    case at::kInt:
      *lo = std::numeric_limits<int32_t>::min();
      *hi = std::numeric_limits<int32_t>::max();
      break;
    case at::kLong: *lo = std::numeric_limits<int64_t>::min(); break;
    default:
      TORCH_CHECK(false,
                  "random_ handles only integral, floating-point and "
                  "boolean types, got ",
                  t);
  }
}

// [from, to_inc] must fit the dtype: the CPU's checks and messages.
void check_random_bounds(int64_t from, int64_t to_inc, const at::Tensor &self) {
  const c10::ScalarType t = self.scalar_type();
  if (at::isFloatingType(t)) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_bounds", [&] {
      const double lo = static_cast<double>(std::numeric_limits<scalar_t>::lowest());
      const double hi = static_cast<double>(std::numeric_limits<scalar_t>::max());
      TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", self.dtype());
      TORCH_CHECK(to_inc >= lo && to_inc <= hi, "to - 1 is out of bounds for ", self.dtype());
      const int64_t exact = int64_t{1} << std::numeric_limits<scalar_t>::digits;
      for (auto [v, name] : {std::pair<int64_t, const char *>{from, "from"}, {to_inc, "to - 1"}})
        if (v < -exact || v > exact)
          TORCH_WARN(name, " is out of bounds [-(2^", std::numeric_limits<scalar_t>::digits,
                     "), 2^", std::numeric_limits<scalar_t>::digits,
                     "]. Due to precision "
                     "limitations ",
                     self.dtype(),
                     " can support discrete uniform "
                     "distribution only within this range.");
    });
    return;
  }
  int64_t lo, hi;
  integer_bounds(t, &lo, &hi);
  TORCH_CHECK(from >= lo && from <= hi, "from is out of bounds for ", self.dtype());
  TORCH_CHECK(to_inc >= lo && to_inc <= hi, "to - 1 is out of bounds for ", self.dtype());
}

at::Tensor &random_from(at::Tensor &self, int64_t from, std::optional<int64_t> to_opt,
                        std::optional<at::Generator> gen) {
  check_generator_target(self);
  const c10::ScalarType t = self.scalar_type();
  const bool fp = at::isFloatingType(t);
  int64_t to_inc = 0;
  if (to_opt.has_value()) {  // [from, to)
    int64_t to = *to_opt;
    TORCH_CHECK(from < to,
                "random_ expects 'from' to be less than 'to', but "
                "got from=",
                from, " >= to=", to);
    if (fp) {
      AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_from_to", [&] {
        from = float_from<scalar_t>(from);
        to = float_to<scalar_t>(to);
      });
      TORCH_CHECK(from < to,
                  "random_ expects 'from' casted to dtype to be less "
                  "than 'to' casted to dtype, but got from=",
                  from, " >= to=", to);
    }
    to_inc = to - 1;
  } else if (from == std::numeric_limits<int64_t>::min()) {
    // [INT64_MIN, INT64_MAX]: all 2^64 values (a range of 0 means that), for
    // the dtypes the CPU draws them for
    TORCH_CHECK_NOT_IMPLEMENTED(
        t == at::kLong || t == at::kDouble || t == at::kFloat || t == at::kBFloat16 ||
            t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt,
        "\"random_\" over the full 64-bit range not implemented for '", t, "'");
    TORCH_CHECK(t == at::kLong || t == at::kDouble || t == at::kFloat || t == at::kBFloat16,
                "random_ over the full 64-bit range handles only int64, double, "
                "float and bfloat16");
    return self.numel() == 0 ? self : random_range(self, from, 0, gen);
  } else if (fp) {  // [from, 2^digits]
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, t, "random_from", [&] {
      to_inc = int64_t{1} << std::min(std::numeric_limits<scalar_t>::digits, 62);
      from = float_from<scalar_t>(from);
    });
    TORCH_CHECK(from < to_inc,
                "random_ expects 'from' casted to dtype to be less "
                "than or equal to 'to_inc' casted to dtype, but got from=",
                from, " > to_inc=", to_inc);
  } else {  // [from, the dtype's max]
    int64_t lo;
    integer_bounds(t, &lo, &to_inc);
    if (t == at::kUInt64) to_inc = -1;  // 2^64 - 1 as int64: the CPU refuses it
  }
  check_random_bounds(from, to_inc, self);
  if (self.numel() == 0) return self;
  const uint64_t range = static_cast<uint64_t>(to_inc) - static_cast<uint64_t>(from) + 1;
  return random_range(self, from, range, gen);
}

at::Tensor &random_to(at::Tensor &self, int64_t to, std::optional<at::Generator> gen) {
  return random_from(self, 0, to, gen);
}

at::Tensor &bernoulli_float(at::Tensor &self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 <= p && p <= 1,
              "bernoulli_ expects p to be in [0, 1], but "
              "got p=",
              p);
  tnk_random_args_t a{};
  a.kind = TNK_RAND_BERNOULLI;
  a.lo = p;
  return launch_random(self, a, gen, "aten::bernoulli_");
}

at::Tensor &bernoulli_tensor(at::Tensor &self, const at::Tensor &p_,
                             std::optional<at::Generator> gen) {
  at::Tensor p = p_.to(self.device()).expand(self.sizes());
  tnk_random_args_t a{};
  a.kind = TNK_RAND_BERNOULLI;
  a.has_prob = 1;
  TORCH_CHECK_TYPE(to_view(p, &a.prob), "bernoulli_: unsupported probability dtype ",
                   p.scalar_type());
  check_generator_target(self);
  // a probability outside [0, 1] is found by the kernel (CPU's message)
  a.fault = {tnrt_stream_fault, current_native_stream(self.device().index()),
             "Expected p_in >= 0 && p_in <= 1 to be true, but got false.", TNRT_FAULT_MESSAGE,
             tnrt_thread_token()};
  return launch_random(self, a, gen, "aten::bernoulli_");
}

at::Tensor &exponential_(at::Tensor &self, double lambd, std::optional<at::Generator> gen) {
  TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "exponential_ not implemented for '",
              self.scalar_type(), "'");
  tnk_random_args_t a{};
  a.kind = TNK_RAND_EXPONENTIAL;
  a.lo = lambd;
  return launch_random(self, a, gen, "aten::exponential_");
}

// log_normal_, cauchy_ and geometric_: transforms of the device's own normal
// and uniform samples, from the same generator (so torch.manual_seed and a
// neuron Generator make them reproducible, as the CPU fallback's host
// generator would not). Reduced-precision and integer outputs are sampled in
// float32 (float64 stays float64) and converted once.
namespace {
at::Tensor sample_buffer(const at::Tensor &self) {
  return self.scalar_type() == at::kDouble
             ? at::empty_like(self, at::MemoryFormat::Contiguous)
             : at::empty(self.sizes(), self.options().dtype(at::kFloat));
}
}  // namespace

at::Tensor &log_normal_(at::Tensor &self, double mean, double std,
                        std::optional<at::Generator> gen) {
  TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(self.scalar_type()),
                              "\"log_normal_\" not implemented for '", self.scalar_type(), "'");
  check_generator_target(self);
  at::Tensor v = sample_buffer(self);
  normal_(v, mean, std, gen);
  return self.copy_(v.exp_());
}

at::Tensor &cauchy_(at::Tensor &self, double median, double sigma,
                    std::optional<at::Generator> gen) {
  TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "Cauchy distribution is a continuous probability distribution. dtype must be a "
              "floating point but you specified ",
              self.scalar_type());
  check_generator_target(self);
  at::Tensor v = sample_buffer(self);
  uniform_(v, 0.0, 1.0, gen);
  return self.copy_(v.sub_(0.5).mul_(c10::pi<double>).tan_().mul_(sigma).add_(median));
}

at::Tensor &geometric_(at::Tensor &self, double p, std::optional<at::Generator> gen) {
  TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != at::kBool && !self.is_complex(),
                              "\"geometric_\" not implemented for '", self.scalar_type(), "'");
  check_generator_target(self);
  at::Tensor v = sample_buffer(self);
  uniform_(v, 0.0, 1.0, gen);
  // trials until the first success: ceil(log(u) / log(1 - p)), u in (0, 1]
  v = at::rsub(v, 1.0).log_().div_(std::log1p(-p)).ceil_().clamp_min_(1.0);
  return self.copy_(v);
}

// ------------------------------------------------------------ device asserts

}  // namespace

// Raises msg (RuntimeError) at the next synchronisation covering this point
// of the stream when the one-element tensor cond is zero: CUDA's
// _assert_async, without a host round trip.
void assert_async(const at::Tensor &cond, c10::string_view msg) {
  TORCH_CHECK(cond.numel() != 0, "Boolean value of Tensor with no values is ambiguous");
  TORCH_CHECK(cond.numel() == 1, "Boolean value of Tensor with more than one value is ambiguous");
  at::Tensor flag = cond.to(at::kBool).reshape({});
  tnk_assert_args_t a{};
  a.flag = flag.const_data_ptr();
  a.fault = {tnrt_stream_fault, current_native_stream(flag.device().index()),
             intern_message(std::string(msg)), TNRT_FAULT_MESSAGE, tnrt_thread_token()};
  launch_kernel<TNK_K_ASSERT>(flag.device().index(), a, "aten::_assert_async");
}

namespace {

void assert_async_plain(const at::Tensor &cond) {
  assert_async(cond, "Expected Tensor with single nonzero value, but got zero");
}

void assert_async_msg(const at::Tensor &cond, c10::string_view msg) { assert_async(cond, msg); }

// torch.multinomial as ATen computes it, from native kernels: without
// replacement (or one sample) the exponential race argmax/topk(p / q),
// q ~ Exp(1); with replacement inverse-CDF sampling. The data checks are
// device-side asserts, as CUDA's.
at::Tensor &multinomial_out(const at::Tensor &self, int64_t n_sample, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor &result) {
  TORCH_CHECK(result.device() == self.device(), "multinomial arguments must have the same device");
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(
      at::isFloatingType(self.scalar_type()),
      "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(result.scalar_type() == at::kLong,
              "multinomial expects Long tensor out, got: ", result.scalar_type());
  TORCH_CHECK(n_sample > 0, "cannot sample n_sample <= 0 samples");
  int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || n_sample <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without replacement");
  TORCH_CHECK(cats <= (1 << 24), "number of categories cannot exceed 2^24");
  check_generator_target(self);
  if (self.dim() == 1)
    result.resize_({n_sample});
  else
    result.resize_({self.size(0), n_sample});
  if (result.numel() == 0) return result;
  at::Tensor p = self.dim() == 1 ? self.unsqueeze(0) : self;
  if (p.scalar_type() != at::kDouble) p = p.to(at::kFloat);
  assert_async(at::logical_and(p.max() < INFINITY, p.min() >= 0),
               "probability tensor contains either `inf`, `nan` or element < 0");
  assert_async(at::all(p.sum(-1) > 0),
               "invalid multinomial distribution (sum of probabilities <= 0)");
  at::Tensor out = result.dim() == 1 ? result.unsqueeze(0) : result;
  if (!replacement || n_sample == 1) {
    at::Tensor q = at::empty_like(p);
    exponential_(q, 1.0, gen);
    at::Tensor score = p / q;
    if (n_sample == 1)
      out.copy_(score.argmax(-1, true));
    else
      out.copy_(std::get<1>(score.topk(n_sample, -1)));
    return result;
  }
  at::Tensor cdf = p.cumsum(-1);
  cdf = cdf / cdf.narrow(-1, cats - 1, 1);
  at::Tensor u = at::empty({p.size(0), n_sample}, p.options());
  uniform_(u, 0.0, 1.0, gen);
  // category = #{cdf <= u}: in chunks of samples that bound the comparison
  int64_t chunk = std::max<int64_t>(1, (int64_t{1} << 24) / std::max<int64_t>(1, p.size(0) * cats));
  for (int64_t s = 0; s < n_sample; s += chunk) {
    int64_t k = std::min(chunk, n_sample - s);
    at::Tensor le = cdf.unsqueeze(1) <= u.narrow(1, s, k).unsqueeze(-1);
    out.narrow(1, s, k).copy_(le.sum(-1).clamp_max(cats - 1));
  }
  return result;
}

at::Tensor multinomial(const at::Tensor &self, int64_t n_sample, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor result = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, n_sample, replacement, gen, result);
}

// randperm on the device: n values, each dtype checked as ATen does (a
// float type must represent every integer up to n exactly).
at::Tensor &randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor &out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  check_generator_target(out);
  TORCH_CHECK(!out.is_complex() && out.scalar_type() != at::kBool,
              "randperm is not implemented for ", out.scalar_type());
  auto limit = [&]() -> double {
    switch (out.scalar_type()) {
      case at::kHalf: return (1 << 11) + 1;
      case at::kBFloat16: return (1 << 8) + 1;
      case at::kFloat: return (1 << 24) + 1;
      case at::kDouble: return 9007199254740993.0;  // 2^53 + 1
      default: return static_cast<double>(std::numeric_limits<int64_t>::max());
    }
  }();
  if (at::isFloatingType(out.scalar_type()))
    TORCH_CHECK(static_cast<double>(n) <= limit, "n cannot be greater than ",
                static_cast<int64_t>(limit), " for ", out.scalar_type(), " type.");
  if (!at::isFloatingType(out.scalar_type())) {
    int64_t top = std::numeric_limits<int64_t>::max();
    const char *type = "int64_t";
    switch (out.scalar_type()) {
      case at::kByte: top = 255, type = "uint8_t"; break;
      case at::kChar: top = 127, type = "int8_t"; break;
      case at::kShort: top = 32767, type = "int16_t"; break;
      case at::kInt: top = std::numeric_limits<int32_t>::max(), type = "int32_t"; break;
      default: break;
    }
    TORCH_CHECK(n == 0 || n - 1 <= top, "value cannot be converted to type ", type,
                " without overflow");
  }
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  at::Tensor dst = out.is_contiguous() ? out : at::empty({n}, out.options());
  at::Tensor scratch =
      dst.scalar_type() == at::kLong ? dst : at::empty({n}, out.options().dtype(at::kLong));
  tnk_randperm_args_t a{};
  a.dst = dst.data_ptr();
  a.scratch = scratch.data_ptr<int64_t>();
  a.n = n;
  bool ok;
  a.dtype = to_tnk(dst.scalar_type(), &ok);
  TORCH_CHECK_TYPE(ok, "randperm: unsupported dtype ", dst.scalar_type());
  auto so = philox_next(gen, out.device().index());
  a.seed = so.first;
  a.offset = so.second;
  launch_kernel<TNK_K_RANDPERM>(out.device().index(), a, "aten::randperm");
  if (!dst.is_same(out)) out.copy_(dst);
  return out;
}

}  // namespace

// Dropout: a Bernoulli keep-mask from the device generator (Philox), scaled
// by 1 / (1 - p), as ATen's native_dropout.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor &input, double p,
                                                  std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  if (train.has_value() && !*train) {
    return {input.clone(), at::ones_like(input, input.options().dtype(at::kBool))};
  }
  if (p == 1.0)
    return {at::zeros_like(input), at::zeros_like(input, input.options().dtype(at::kBool))};
  at::Tensor mask = at::empty_like(input, input.options().dtype(at::kBool)).bernoulli_(1.0 - p);
  double scale = 1.0 / (1.0 - p);
  return {input * mask * scale, mask};
}

at::Tensor native_dropout_backward(const at::Tensor &grad, const at::Tensor &mask, double scale) {
  return grad * mask * scale;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("randperm.generator_out", randperm_out);
  m.impl("uniform_", uniform_);
  m.impl("normal_", normal_);
  m.impl("random_", random_);
  m.impl("random_.from", random_from);
  m.impl("random_.to", random_to);
  m.impl("bernoulli_.float", bernoulli_float);
  m.impl("bernoulli_.Tensor", bernoulli_tensor);
  m.impl("exponential_", exponential_);
  m.impl("log_normal_", log_normal_);
  m.impl("cauchy_", cauchy_);
  m.impl("geometric_", geometric_);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
  m.impl("_assert_async", assert_async_plain);
  m.impl("_assert_async.msg", assert_async_msg);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace torch_neuronx
