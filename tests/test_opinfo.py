"""PyTorch's own OpInfo conformance suite (op_db) on the neuron device, with
the CPU as the oracle, instantiated the way PyTorch's reference out-of-tree
backend (torch_openreg) does it: @ops and instantiate_device_type_tests with
only_for="neuron".

For every op in op_db and every dtype it supports on the CPU (less those the
device refuses by design), each variant the OpInfo has (function, method,
in-place, out=, noncontiguous inputs, and gradients in float32) runs on the
op's neuron sample inputs and on CPU copies of the same samples (same values,
strides and storage). Results, and the sample's tensors afterwards (in-place
and out= ops write there), must have the same structure, dtypes, shapes and
devices, and values within the dtype's default tolerances (or the OpInfo's own
overrides), unless neuron's values are no further than the CPU's from a
float64 run of the sample (then the two only round differently). Where
either side raises, both must raise the same exception type.

TORCH_NEURONX_OPINFO=sample (the default) runs a fixed subset, full runs all:
see _selected. Known failures are listed, with their real error, in
opinfo_known_failures.txt (written by scripts/opinfo_known_failures.py) and
xfail strictly: a listed entry that passes, or that now fails with another
exception type, fails. See docs/opinfo.md.
"""

import functools
import itertools
import json
import os
import sys
import time
import types
import unittest
import zlib

import pytest
import torch
from torch.utils._pytree import tree_flatten, tree_leaves, tree_map

import torch_neuronx

try:
    import expecttest  # noqa: F401  (common_utils' TestCase derives from it)
except ImportError:  # not a dependency of ours: it only adds assertExpectedInline
    sys.modules["expecttest"] = types.SimpleNamespace(TestCase=unittest.TestCase, ACCEPT=False)

from torch.testing._comparison import default_tolerances  # noqa: E402
from torch.testing._internal.common_device_type import (  # noqa: E402
    OpDTypes,
    instantiate_device_type_tests,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402
from torch.testing._internal.common_utils import TestCase  # noqa: E402
from torch.testing._internal.opinfo.core import SampleInput  # noqa: E402

MODE = os.environ.get("TORCH_NEURONX_OPINFO", "sample")
assert MODE in ("sample", "full"), f"TORCH_NEURONX_OPINFO={MODE!r}: use 'sample' or 'full'"
# Set by scripts/opinfo_known_failures.py: every outcome is appended to this
# file (JSON lines) and the known-failure list is not applied.
RECORD = os.environ.get("TORCH_NEURONX_OPINFO_RECORD")
KNOWN_FAILURES_FILE = os.path.join(os.path.dirname(__file__), "opinfo_known_failures.txt")

# Dtypes the device does not hold (none of the OpInfo dtypes since complex32
# landed; quantized and bits types are not OpInfo dtypes).
UNSUPPORTED_DTYPES: set = set()

# Ops whose outputs are random (or uninitialised memory): the neuron and CPU
# generators are different streams, so only the outputs' structure, shapes,
# dtypes and devices are compared for them, never their values.
RANDOM_OPS = {
    "bernoulli",
    "cauchy",
    "exponential",
    "geometric",
    "log_normal",
    "multinomial",
    "normal",
    "uniform",
    "rand_like",
    "randn",
    "randn_like",
    "randint",
    "randint_like",
    "nn.functional.dropout",
    "nn.functional.dropout2d",
    "nn.functional.dropout3d",
    "nn.functional.alpha_dropout",
    "nn.functional.feature_alpha_dropout.with_train",
    "nn.functional.rrelu",
    "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d",
    "svd_lowrank",
    "pca_lowrank",
    "empty",
    "empty_like",
    "empty_permuted",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
}


def _is_random(op, sample):
    """RANDOM_OPS, and attention samples with dropout (dropout_p, training)."""
    if op.name in RANDOM_OPS or op.full_name in RANDOM_OPS:
        return True
    return "attention" in op.name and bool(
        sample.kwargs.get("dropout_p", 0) or sample.kwargs.get("training", False)
    )


# Ops whose index outputs are unspecified among equal values (unless asked
# to be stable): (where dim is in the positional arguments after the input,
# whether indices must be a whole permutation along dim).
TIE_ORDER_OPS = {
    "sort": (0, True),
    "argsort": (0, True),
    "topk": (1, False),
    "kthvalue": (1, False),
}


def _arg(sample, name, position, default):
    if name in sample.kwargs:
        return sample.kwargs[name]
    return sample.args[position] if len(sample.args) > position else default


def _ties_valid(op, sample, actual, expected):
    """For TIE_ORDER_OPS, whether neuron's indices are a correct answer where
    they differ from the CPU's: they pick, along dim, elements equal to the
    values the CPU's indices pick (values compared exactly, NaN equal to NaN),
    each index at most once (sort and argsort: each exactly once). The CPU's
    unstable sort (introsort) orders ties in no documented way, so neither
    backend's order is the specified one; stable=True is compared exactly."""
    if op.name not in TIE_ORDER_OPS or _arg(sample, "stable", 99, False):
        return False
    position, permutation = TIE_ORDER_OPS[op.name]
    x = sample.input.cpu()
    if x.dim() == 0:
        return False
    dim = _arg(sample, "dim", position, -1) % x.dim()
    keepdim = op.name != "kthvalue" or _arg(sample, "keepdim", 2, False)

    def same(a, b):
        return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0), b.nan_to_num(0))

    if op.name == "argsort":
        actual, expected = (actual,), (expected,)
    elif not same(actual[0].cpu(), expected[0]):  # the values themselves must agree
        return False
    idx_n, idx_c = actual[-1].cpu(), expected[-1]
    if not keepdim:
        idx_n, idx_c = idx_n.unsqueeze(dim), idx_c.unsqueeze(dim)
    if not same(x.gather(dim, idx_n), x.gather(dim, idx_c)):
        return False
    ordered = idx_n.sort(dim).values
    if permutation:
        shape = [1] * x.dim()
        shape[dim] = x.shape[dim]
        return torch.equal(ordered, torch.arange(x.shape[dim]).view(shape).expand_as(ordered))
    return idx_n.shape[dim] < 2 or bool((ordered.diff(dim=dim) != 0).all())


def _dtype_name(dtype):
    return str(dtype).removeprefix("torch.")


def _stable_hash(*parts):
    return zlib.crc32(" ".join(parts).encode())


# The ops each variant runs for.
VARIANTS = {
    "function": op_db,
    "method": [op for op in op_db if op.method_variant is not None],
    "inplace": [op for op in op_db if op.inplace_variant is not None],
    "noncontiguous": [op for op in op_db if not op.is_factory_function],
    "out": [op for op in op_db if op.supports_out],
    "grad": [op for op in op_db if op.supports_autograd],
    "compiled": op_db,
}
# The compiled variant (torch.compile of the op on neuron, against CPU eager):
# its first samples only, each compiled afresh (Inductor's C++ compile takes
# seconds); in the sample mode, one op in COMPILED_SAMPLE_EVERY by stable hash.
COMPILED_SAMPLES = 3
COMPILED_SAMPLE_EVERY = 8


def _selected(op, variant, mode=MODE):
    """The dtypes a run covers for (op, variant). Gradients and the compiled
    variant: float32 only (compiled, sample mode: a stable-hash eighth of the ops).
    Full: every supported dtype. Sample: the function variant on float32
    plus one other dtype picked by a stable hash of the op name; every other
    variant on one dtype, float32 or that other one, also by stable hash."""
    supported = {d for d in op.supported_dtypes("cpu") if d not in UNSUPPORTED_DTYPES}
    if variant == "compiled":
        chosen = mode == "full" or _stable_hash(op.full_name, variant) % COMPILED_SAMPLE_EVERY == 0
        return supported & {torch.float32} if chosen else set()
    if variant == "grad":
        return supported & set(op.supported_backward_dtypes("cpu")) & {torch.float32}
    if mode == "full":
        return supported
    others = sorted(supported - {torch.float32}, key=str)
    fp32 = supported & {torch.float32}
    other = {others[_stable_hash(op.full_name) % len(others)]} if others else set()
    if variant == "function" or not (fp32 and other):
        return fp32 | other
    return fp32 if _stable_hash(op.full_name, variant) % 2 else other


class neuron_ops(ops):
    """@ops over op_list, restricted to the dtypes _selected picks. @ops
    wraps each test in a function whose cleanup, clear_tracked_input(), calls
    inspect.stack(): ~0.1 s a test with op_db loaded, more than most tests
    take. A plain wrapper per test replaces it (it keeps the op decorators,
    e.g. precisionOverride, off the shared test function); the tests name
    their failing sample themselves."""

    def __init__(self, op_list, variant):
        super().__init__(op_list, dtypes=OpDTypes.supported)
        self.variant = variant

    def _parametrize_test(self, test, generic_cls, device_cls):
        for _, name, kwargs, decorator_fn in super()._parametrize_test(
            test, generic_cls, device_cls
        ):
            if kwargs["dtype"] in _selected(kwargs["op"], self.variant):
                yield (
                    functools.wraps(test)(lambda *a, **k: test(*a, **k)),
                    name,
                    kwargs,
                    decorator_fn,
                )


def load_known_failures(path=KNOWN_FAILURES_FILE):
    """{(op, variant, dtype): reason} from the lines 'op variant dtype reason'."""
    known = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    op, variant, dtype, reason = line.rstrip("\n").split(" ", 3)
                    known[(op, variant, dtype)] = reason
    return known


KNOWN_FAILURES = {} if RECORD else load_known_failures()
# Reasons the generator writes for a test that killed or hung its process:
# such a test is not run (it would take the whole run down).
NOT_RUN = ("Crash:", "Timeout:")


def failure_reason(exc):
    """'ExceptionType: first line of the message' (a known failure's reason)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0].strip() if lines else ''}"[:240]


def _tensor_to_cpu(t):
    """t on the CPU with the same strides, storage offset and whole storage
    (as_strided-style ops read outside the view), else (sparse, conj or neg
    views) with the same values."""
    if t.layout != torch.strided or t.is_conj() or t.is_neg():
        copy = t.detach().to("cpu")
    else:
        copy = torch.empty(0, dtype=t.dtype).set_(
            t.untyped_storage().cpu(), t.storage_offset(), t.size(), t.stride()
        )
    return copy.requires_grad_(t.requires_grad)


def _samples(op, device, dtype, requires_grad):
    """op.sample_inputs(...) without its TrackedInputIter wrapper, which
    reseeds all RNGs before each sample and calls inspect.stack() (tens of
    milliseconds with op_db loaded) twice per call: together more than the
    tests themselves. The samples are the same; setUp has seeded the RNGs,
    so they are deterministic, and failures name their sample themselves."""
    return op.sample_inputs_func(op, device, dtype, requires_grad)


def _to_cpu(obj):
    """A CPU copy of a sample's input/args/kwargs: tensors copied with their
    layout (_tensor_to_cpu), devices mapped to the CPU."""
    if isinstance(obj, torch.Tensor):
        return _tensor_to_cpu(obj) if obj.device.type == "neuron" else obj.clone()
    if isinstance(obj, torch.device) and obj.type == "neuron":
        return torch.device("cpu")
    if isinstance(obj, str) and obj.split(":")[0] == "neuron":
        return "cpu"
    if isinstance(obj, (list, tuple)):
        items = [_to_cpu(x) for x in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    if isinstance(obj, dict):
        return {k: _to_cpu(v) for k, v in obj.items()}
    return obj


def _cpu_copy(sample):
    return SampleInput(
        _to_cpu(sample.input),
        args=_to_cpu(sample.args),
        kwargs=_to_cpu(sample.kwargs),
        output_process_fn_grad=sample.output_process_fn_grad,
        broadcasts_input=sample.broadcasts_input,
    )


# A CPU result that differs from neuron's can be the less accurate one (CPU
# kernels accumulate bf16/fp16 in their own way, and float32 sums differ in
# order): the arbiter is the same sample run on the CPU in float64.
WIDER = {
    torch.float32: torch.float64,
    torch.bfloat16: torch.float64,
    torch.float16: torch.float64,
    torch.complex64: torch.complex128,
}


def _widened(sample):
    """A copy of a CPU sample with its float32/bf16/fp16/complex64 tensors and
    dtype arguments in float64/complex128, or None when it has none."""

    def narrow(x):
        return (x if isinstance(x, torch.dtype) else getattr(x, "dtype", None)) in WIDER

    def widen(x):
        if isinstance(x, torch.dtype):
            return WIDER.get(x, x)
        if not isinstance(x, torch.Tensor):
            return x
        wide = x.detach().to(WIDER[x.dtype]) if x.dtype in WIDER else x.detach().clone()
        return wide.requires_grad_(x.requires_grad)

    parts = (sample.input, sample.args, sample.kwargs)
    if not any(narrow(x) for x in tree_leaves(parts) if isinstance(x, (torch.Tensor, torch.dtype))):
        return None
    inp, args, kwargs = tree_map(widen, parts)
    return SampleInput(
        inp, args=args, kwargs=kwargs, output_process_fn_grad=sample.output_process_fn_grad
    )


def _as_wide(x):
    t = torch.as_tensor(x).detach().cpu()
    return t.to(torch.complex128 if t.is_complex() else torch.float64)


def _tensors(sample):
    """The sample's tensors (compared after the call: in-place and out= ops
    write there, and no other op may)."""
    leaves = tree_leaves((sample.input, sample.args, sample.kwargs))
    return [t for t in leaves if isinstance(t, torch.Tensor)]


def _device_type(x):
    if isinstance(x, torch.Tensor):
        return x.device.type
    if isinstance(x, (str, torch.device)):
        return str(x).split(":")[0]
    return None


def _outputs_on_neuron(sample):
    """Whether the outputs belong on neuron: the sample has a neuron tensor or
    names the device, and does not name the CPU (torch.arange(2) has none)."""
    devices = {_device_type(x) for x in tree_leaves((sample.input, sample.args, sample.kwargs))}
    return "neuron" in devices and not any(
        isinstance(x, (str, torch.device)) and _device_type(x) == "cpu"
        for x in tree_leaves((sample.args, sample.kwargs))
    )


def _only_indices(failed, expected_leaves):
    """Whether only int64 tensor outputs (indices) failed, next to values that agree."""
    tensors = [e for e in expected_leaves if isinstance(e, torch.Tensor)]
    return len(failed) < len(tensors) and all(
        isinstance(e, torch.Tensor) and e.dtype == torch.int64 for e, _ in failed
    )


def _call(fn, sample):
    """fn on the sample: (result, None), or (None, the exception). A device
    fault surfaces at the synchronize, so it is charged to this call."""
    try:
        result = fn(sample.input, *sample.args, **sample.kwargs)
        torch.neuron.synchronize()
        return result, None
    except Exception as e:  # noqa: BLE001  (compared with the CPU's)
        return None, e


def _assert_same_error(neuron_exc, cpu_exc):
    """An error on either side must be raised, with the same type, by both."""
    if cpu_exc is None:
        raise neuron_exc
    if neuron_exc is None:
        raise AssertionError(
            f"neuron returned a result where the CPU raised {failure_reason(cpu_exc)}"
        )
    if type(neuron_exc) is not type(cpu_exc):
        raise AssertionError(
            f"neuron raised {failure_reason(neuron_exc)}; the CPU raised {failure_reason(cpu_exc)}"
        ) from neuron_exc


def _real_sum(t):
    return torch.view_as_real(t).sum() if t.is_complex() else t.sum()


def _grads(op):
    """A function of a sample: torch.autograd.grad of the sum of op's outputs
    w.r.t. the sample's tensors that require grad (() if none are linked)."""

    def grads(inp, *args, **kwargs):
        sample = SampleInput(inp, args=args, kwargs=kwargs)
        outs = [
            t
            for t in tree_leaves(op(inp, *args, **kwargs))
            if isinstance(t, torch.Tensor) and t.requires_grad
        ]
        inputs = [t for t in _tensors(sample) if t.requires_grad]
        if not outs or not inputs:
            return ()
        return torch.autograd.grad(sum(_real_sum(t) for t in outs), inputs, allow_unused=True)

    return grads


def _with_out(sample, out):
    return SampleInput(
        sample.input,
        args=sample.args,
        kwargs={**sample.kwargs, "out": out},
        output_process_fn_grad=sample.output_process_fn_grad,
    )


def _all_tensors(result):
    return isinstance(result, (torch.Tensor, tuple)) and all(
        isinstance(t, torch.Tensor) for t in tree_leaves(result)
    )


def _out_like(tree, device):
    """out= buffers like the tensors in tree, on device, filled alike on both
    sides with a value an op must overwrite (NaN for floats, as
    noncontiguous_like): an op that reads them, or skips an element, shows."""
    if isinstance(tree, torch.Tensor):
        fill = True if tree.dtype == torch.bool else 12
        fill = float("nan") if tree.is_floating_point() or tree.is_complex() else fill
        return torch.full_like(tree, fill, device=device)
    return tuple(_out_like(t, device) for t in tree)


class TestNeuronOpInfo(TestCase):
    """op_db on neuron against the CPU: one test per (variant, op, dtype)."""

    @classmethod
    def setUpClass(cls):
        # Ops that fall back to the CPU are still correct behaviour here.
        cls._fallback_mode = torch_neuronx.get_fallback_mode()
        torch_neuronx.set_fallback_mode("silent")
        # The samples are tiny: on 2 busy cores an OpenMP barrier costs the
        # CPU oracle milliseconds per op, far more than the work.
        cls._num_threads = torch.get_num_threads()
        torch.set_num_threads(1)

    @classmethod
    def tearDownClass(cls):
        torch_neuronx.set_fallback_mode(cls._fallback_mode)
        torch.set_num_threads(cls._num_threads)

    # -- comparison ---------------------------------------------------------

    def _tolerances(self, dtype):
        """The dtype's default (rtol, atol), or the OpInfo's looser override
        for the test's dtype (precisionOverride/toleranceOverride set these)."""
        rtol, atol = default_tolerances(dtype)
        return max(rtol, self.rel_tol), max(atol, self.precision)

    def _assert_leaf_close(self, actual, expected, values, on_neuron):
        if not isinstance(expected, torch.Tensor):
            if isinstance(expected, (bool, int, float, complex)):
                if values:
                    torch.testing.assert_close(actual, expected, equal_nan=True)
            else:
                assert actual == expected, f"neuron returned {actual!r}, the CPU {expected!r}"
            return
        assert isinstance(actual, torch.Tensor), f"neuron returned a {type(actual).__name__}"
        assert actual.device.type == "neuron" or not on_neuron, f"output on {actual.device}"
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), (
            f"neuron returned {actual.dtype} {tuple(actual.shape)}, "
            f"the CPU {expected.dtype} {tuple(expected.shape)}"
        )
        if values:
            rtol, atol = self._tolerances(expected.dtype)
            torch.testing.assert_close(actual.cpu(), expected, rtol=rtol, atol=atol, equal_nan=True)

    def _assert_results_close(self, actual, expected, values, on_neuron):
        """Same structure; tensors of the same dtype and shape, on neuron if
        on_neuron and, if values, close."""
        actual_leaves, actual_spec = tree_flatten(actual)
        expected_leaves, expected_spec = tree_flatten(expected)
        assert actual_spec == expected_spec, (
            f"neuron returned {actual_spec}, the CPU {expected_spec}"
        )
        failed = []
        for i, (a, e) in enumerate(zip(actual_leaves, expected_leaves)):
            try:
                self._assert_leaf_close(a, e, values, on_neuron)
            except AssertionError as exc:
                exc.add_note(f"at leaf {i} of {expected_spec}")
                failed.append((e, exc))
        if failed and _only_indices(failed, expected_leaves):
            raise AssertionError(
                "index outputs differ while the values agree (ties broken in another order?)"
            ) from failed[0][1]
        if failed:
            raise failed[0][1]

    def _leaf_no_less_accurate(self, actual, expected, exact):
        """Element by element, |actual - exact| <= |expected - exact| + the
        tolerance of expected's dtype, or over the leaf, neuron's largest
        error no larger than the CPU's plus the absolute tolerance (floating
        leaves; others must match). The second form is for sums with
        cancellation (a convolution's weight gradient): their rounding error
        scales with the terms, not with the result, so an element the CPU
        happens to get right says nothing about the order of the other's sum.
        NaNs and infinities must match either way."""
        if not (
            isinstance(expected, float)
            or isinstance(expected, torch.Tensor)
            and expected.dtype in WIDER
        ):
            try:
                self._assert_leaf_close(actual, expected, values=True, on_neuron=False)
                return True
            except AssertionError:
                return False
        a, e, x = _as_wide(actual), _as_wide(expected), _as_wide(exact)
        if not a.shape == e.shape == x.shape:
            return False
        rtol, atol = self._tolerances(torch.as_tensor(expected).dtype)
        closer = (a - x).abs() <= (e - x).abs() + atol + rtol * x.abs()
        if bool((closer | (a == e) | (a.isnan() & e.isnan())).all()):
            return True
        finite = x.isfinite() & e.isfinite()
        if not torch.equal(a.isnan(), e.isnan()) or not bool((a == e)[~finite & ~e.isnan()].all()):
            return False
        if not bool(a[finite].isfinite().all()):
            return False
        if not finite.any():
            return True
        return bool((a - x)[finite].abs().max() <= (e - x)[finite].abs().max() + atol)

    def _no_less_accurate(self, fn, wide_sample, process, actual, expected):
        """Whether neuron's results are no further than the CPU's from a run
        of the sample widened to float64: then they round differently, and
        neuron's are not the worse."""
        if wide_sample is None:
            return False
        exact, exc = _call(fn, wide_sample)
        if exc is not None:
            return False
        exact = (
            wide_sample.output_process_fn_grad(exact) if process else exact,
            _tensors(wide_sample),
        )
        exact_leaves, exact_spec = tree_flatten(exact)
        expected_leaves, expected_spec = tree_flatten(expected)
        return exact_spec == expected_spec and all(
            self._leaf_no_less_accurate(a, e, x)
            for a, e, x in zip(tree_leaves(actual), expected_leaves, exact_leaves)
        )

    def _compare(self, op, fn, sample, cpu_sample, process=True, neuron_fn=None):
        """Runs fn on the neuron sample and on its CPU copy and compares the
        results (and the samples' tensors afterwards: in-place and out= ops
        write there): structure, dtypes, shapes and devices, then values,
        unless neuron's are no less accurate than the CPU's. neuron_fn (the
        compiled variant): what runs on neuron instead of fn; a sample the
        CPU rejects is left to the eager variants."""
        wide_sample = _widened(cpu_sample)  # now: in-place ops write the inputs
        expected, cpu_exc = _call(fn, cpu_sample)
        if cpu_exc is not None and neuron_fn is not None:
            return
        actual, neuron_exc = _call(neuron_fn or fn, sample)
        if cpu_exc is not None or neuron_exc is not None:
            _assert_same_error(neuron_exc, cpu_exc)
            return
        if process:  # e.g. fixes the signs of singular vectors (as test_compare_cpu)
            expected = cpu_sample.output_process_fn_grad(expected)
            actual = sample.output_process_fn_grad(actual)
        self._assert_results_close(actual, expected, False, _outputs_on_neuron(sample))
        if _is_random(op, sample):
            return
        try:
            self._assert_results_close(actual, expected, values=True, on_neuron=False)
            self._assert_results_close(_tensors(sample), _tensors(cpu_sample), True, False)
        except AssertionError:
            if _ties_valid(op, cpu_sample, actual, expected):
                return
            if not self._no_less_accurate(
                fn,
                wide_sample,
                process,
                (actual, _tensors(sample)),
                (expected, _tensors(cpu_sample)),
            ):
                raise

    def _each_sample(self, samples, check):
        """check(sample) for each sample; a failure names the sample."""
        for i, sample in enumerate(samples):
            try:
                check(sample)
            except Exception as e:
                e.add_note(f"sample {i}: {sample.summary()}")
                raise

    # -- known failures -----------------------------------------------------

    def _run(self, op, dtype, variant, body):
        """body() under the known-failure list (strict), or recorded."""
        key = (op.full_name, variant, _dtype_name(dtype))
        if RECORD:
            return _record(key, body)
        reason = KNOWN_FAILURES.get(key)
        if reason is None:
            return body()
        if reason.startswith(NOT_RUN):
            pytest.xfail(f"not run: {reason}")
        try:
            body()
        except unittest.SkipTest:
            raise
        except Exception as e:  # noqa: BLE001
            now = failure_reason(e)
            if now.split(":")[0] != reason.split(":")[0]:
                raise AssertionError(
                    f"known failure {key} changed: listed as {reason!r}, "
                    f"now {now!r}; update {KNOWN_FAILURES_FILE}"
                ) from e
            pytest.xfail(reason)
        self.fail(
            f"XPASS(strict): {key} passes but is listed in opinfo_known_failures.txt "
            f"as {reason!r}: remove the entry"
        )

    # -- the variants -------------------------------------------------------

    def _check_variant(self, device, dtype, op, variant, fn, transform=None):
        def check(sample):
            sample = transform(sample) if transform else sample
            self._compare(op, fn, sample, _cpu_copy(sample))

        samples = _samples(op, device, dtype, requires_grad=False)
        self._run(op, dtype, variant, lambda: self._each_sample(samples, check))

    @neuron_ops(VARIANTS["function"], "function")
    def test_function(self, device, dtype, op):
        self._check_variant(device, dtype, op, "function", op)

    @neuron_ops(VARIANTS["method"], "method")
    def test_method(self, device, dtype, op):
        self._check_variant(device, dtype, op, "method", op.method_variant)

    @neuron_ops(VARIANTS["inplace"], "inplace")
    def test_inplace(self, device, dtype, op):
        self._check_variant(device, dtype, op, "inplace", op.inplace_variant)

    @neuron_ops(VARIANTS["noncontiguous"], "noncontiguous")
    def test_noncontiguous(self, device, dtype, op):
        self._check_variant(
            device, dtype, op, "noncontiguous", op, transform=lambda sample: sample.noncontiguous()
        )

    @neuron_ops(VARIANTS["out"], "out")
    def test_out(self, device, dtype, op):
        def check(sample):
            cpu_sample = _cpu_copy(sample)
            expected, cpu_exc = _call(op, cpu_sample)
            if cpu_exc is not None or not _all_tensors(expected):
                return  # nothing to write into: test_function covers this sample
            # The out= buffers are in the kwargs, which _compare checks afterwards.
            self._compare(
                op,
                op,
                _with_out(sample, _out_like(expected, "neuron")),
                _with_out(_cpu_copy(sample), _out_like(expected, "cpu")),
            )

        samples = _samples(op, device, dtype, requires_grad=False)
        self._run(op, dtype, "out", lambda: self._each_sample(samples, check))

    @neuron_ops(VARIANTS["compiled"], "compiled")
    def test_compiled(self, device, dtype, op):
        """torch.compile(op) on neuron (Inductor's C++ kernels for the device,
        the neuron backend's lowering choices) against the op on the CPU."""

        def check(sample):
            torch._dynamo.reset()  # each sample compiled afresh, never recompile-limited
            compiled = torch.compile(lambda *args, **kwargs: op.op(*args, **kwargs))
            self._compare(op, op, sample, _cpu_copy(sample), neuron_fn=compiled)

        samples = list(itertools.islice(_samples(op, device, dtype, False), COMPILED_SAMPLES))
        self._run(op, dtype, "compiled", lambda: self._each_sample(samples, check))

    @neuron_ops(VARIANTS["grad"], "grad")
    def test_grad(self, device, dtype, op):
        def check(sample):
            # The outputs go through output_process_fn_grad before the sum.
            fn = _grads(lambda *a, **k: sample.output_process_fn_grad(op(*a, **k)))
            self._compare(op, fn, sample, _cpu_copy(sample), process=False)

        samples = _samples(op, device, dtype, requires_grad=True)
        self._run(op, dtype, "grad", lambda: self._each_sample(samples, check))


def full_suite_keys():
    """(op, variant, dtype) of every test the full suite has."""
    return {
        (op.full_name, variant, _dtype_name(dtype))
        for variant, op_list in VARIANTS.items()
        for op in op_list
        for dtype in _selected(op, variant, mode="full")
    }


def test_known_failures_name_tests():
    """Every entry of opinfo_known_failures.txt names a test of the full
    suite: one left over from a renamed op or a dropped dtype would xfail
    nothing and go unnoticed."""
    stale = sorted(set(load_known_failures()) - full_suite_keys())
    assert not stale, f"entries naming no test: {stale[:10]}"


def _recorded(path):
    """Keys whose outcome the RECORD file already has (a resumed run skips them)."""
    done = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                entry = json.loads(line)
                if entry["event"] != "start":
                    done.add(tuple(entry["key"]))
    return done


RECORDED = _recorded(RECORD)


def _record(key, body):
    """Appends the outcome of body() for key to the RECORD file (a 'start'
    line first, so a crash or a hang is attributable), then re-raises any
    failure."""
    if key in RECORDED:
        pytest.skip("outcome already recorded (resumed run)")

    def write(event, **info):
        with open(RECORD, "a") as f:
            f.write(json.dumps({"key": key, "event": event, **info}) + "\n")

    write("start")
    start = time.monotonic()
    try:
        body()
    except unittest.SkipTest as e:
        write("skip", reason=str(e))
        raise
    except Exception as e:  # noqa: BLE001
        write("fail", reason=failure_reason(e), s=round(time.monotonic() - start, 3))
        raise
    write("pass", s=round(time.monotonic() - start, 3))


instantiate_device_type_tests(TestNeuronOpInfo, globals(), only_for="neuron")
