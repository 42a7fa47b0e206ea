#!/usr/bin/env python3
"""Mutation check of the kernel tests: plants small realistic bugs in the C
kernels (csrc/kernels) and the runtime (csrc/runtime), one at a time, rebuilds only what the change needs,
runs only that kernel family's tests, restores the file and reports which
mutations survive (the tests still pass: a hole in the tests).

It works in a separate git worktree, never in the checkout people use:

    git worktree add /work/wt-mut HEAD
    .venv/bin/python tools/mutate.py /work/wt-mut --level c        # C tests only (light)
    .venv/bin/python tools/mutate.py /work/wt-mut --level python   # the pytest families
    .venv/bin/python tools/mutate.py /work/wt-mut --list           # the mutations
    git worktree remove /work/wt-mut

--level c builds the worktree's C library and the kernel suites of
csrc/tests/ (C_SUITES; make -C csrc, into <worktree>/build/c) and runs them
per mutation (the runtime mutations are python level only).
--level python builds the extension in the worktree once (make -C csrc and
setup.py build_ext --inplace: minutes the first time), then per mutation
recompiles the one kernel object, relinks the extension and runs the
family's pytest selection (under each ISA the mutation names, through
TORCH_NEURONX_ISA) with the worktree first on PYTHONPATH; the interpreter
is this one (or --python), e.g. /work/main/.venv/bin/python.

The worktree must be clean (tracked files unmodified): the script refuses
otherwise, and it refuses the main checkout unless --allow-main-checkout.
Each mutation is restored in a finally block (also on Ctrl-C), and the
unmutated tree is rebuilt at the end. Exit status: 0 if every mutation was
killed, 1 if some survived, 2 on a usage or setup error.
"""

import argparse
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

# The pytest selections of each kernel family: the tests that reach its
# kernels in the per-op files (tests/test_<csrc/aten file>.py and the other
# family files), the edge cases among them. pytest -k applies to every path
# given and also matches the module name: "attention" selects all of
# tests/test_attention.py, so a file whose name names the family needs no -k.
# the kernel suites of csrc/tests/ that the C level runs
C_SUITES = (
    "test_kernels",
    "test_eltwise",
    "test_gemm",
    "test_nn",
    "test_index",
    "test_entry_points",
)

FAMILIES = {
    "softmax": [
        "tests/test_norm_ops.py",
        "tests/test_loss_ops.py",
        "-k",
        "softmax or cross_entropy",
        "tests/test_training_ops.py::test_cross_entropy_over_sequences_and_images",
    ],
    "gemm": [
        "tests/test_linalg_ops.py",
        "tests/test_training_ops.py",
        "tests/test_fuzz.py",
        "-k",
        "mm or bmm or linear or matmul or addmv or product or gemm",
    ],
    "index": ["tests/test_index_ops.py"],
    "eltwise": [
        "tests/test_unary_ops.py",
        "tests/test_binary_ops.py",
        "tests/test_fuzz.py",
        "-k",
        "unary or elementwise or activation or exp or sigmoid or silu or gelu",
    ],
    "reduce": [
        "tests/test_reduction_ops.py",
        "tests/test_fuzz.py",
        "-k",
        "sum or mean or reductions",
    ],
    "norm": [
        "tests/test_norm_ops.py",
        "-k",
        "layer_norm or rms_norm or group_norm or batch_norm",
    ],
    "attention": ["tests/test_attention.py"],
    "conv": ["tests/test_conv.py"],
    "pool": ["tests/test_pooling.py"],
    "optim": ["tests/test_optim.py"],
    "allocator": ["tests/test_memory.py"],
}


@dataclass
class Mutation:
    name: str
    file: str  # relative to the repository root
    old: str  # exact snippet, must occur once
    new: str
    family: str  # FAMILIES key
    isas: list = field(default_factory=lambda: ["native"])  # TORCH_NEURONX_ISA values
    why: str = ""


MUTATIONS = [
    # ---- softmax ----
    Mutation(
        "softmax-f32-no-max-subtraction",
        "csrc/kernels/softmax.c",
        "float sum = tnk_vexp_bounded_sum_f32(x, mx, a->log ? NULL : y, n);",
        "float sum = tnk_vexp_bounded_sum_f32(x, 0.0f, a->log ? NULL : y, n);",
        "softmax",
        why="the fp32 row kernel exponentiates x instead of x - max",
    ),
    Mutation(
        "softmax-generic-max-starts-at-0",
        "csrc/kernels/softmax.c",
        "      double mx = -INFINITY;",
        "      double mx = 0;",
        "softmax",
        why="the strided path's running max starts at 0: rows below 0 lose it",
    ),
    Mutation(
        "softmax-f32-log-forgets-max",
        "csrc/kernels/softmax.c",
        "for (int64_t k = 0; k < n; k++) y[k] = x[k] - mx - lsum;",
        "for (int64_t k = 0; k < n; k++) y[k] = x[k] - lsum;",
        "softmax",
        why="log-softmax subtracts the max inside the sum only",
    ),
    Mutation(
        "vmax-avx2-tail-off-by-one",
        "csrc/kernels/x86/avx2/vmath.c",
        "  for (; k < n; k++) {\n    if (x[k] != x[k]) return NAN;",
        "  for (; k + 1 < n; k++) {\n    if (x[k] != x[k]) return NAN;",
        "softmax",
        why="the row max skips the last element of the remainder",
    ),
    Mutation(
        "exp-sum-unmasked-tail",
        "csrc/kernels/x86/vmath_body.h",
        "    if (w < VF_LANES) e = vf_keep(vf_first(w), e);\n",
        "",
        "softmax",
        isas=["native", "avx2"],
        why="the partial vector's padding lanes add exp(0 - sub) to the sum",
    ),
    # ---- GEMM ----
    Mutation(
        "gemm-epilogue-beta-for-alpha",
        "csrc/kernels/gemm.c",
        "for (int64_t j = 0; j < nr_used; j++) cf[j] = p->alpha * ar[j] + p->beta * cf[j];",
        "for (int64_t j = 0; j < nr_used; j++) cf[j] = p->beta * ar[j] + p->beta * cf[j];",
        "gemm",
        why="C = beta*T + beta*C on contiguous fp32 tiles",
    ),
    Mutation(
        "gemm-direct-tile-ignores-alpha",
        "csrc/kernels/gemm.c",
        "int direct = p->dtype == TNK_F32 && p->sc_c == 1 && p->alpha == 1.0f && h == rows &&",
        "int direct = p->dtype == TNK_F32 && p->sc_c == 1 && h == rows &&",
        "gemm",
        why="full tiles write the product straight into C without alpha",
    ),
    Mutation(
        "gemm-direct-tile-ignores-beta-1",
        "csrc/kernels/gemm.c",
        "fn(kc, a, a_rs, a_cs, b, b_rs, c, p->sc_r, accumulate || p->beta == 1.0f);",
        "fn(kc, a, a_rs, a_cs, b, b_rs, c, p->sc_r, accumulate);",
        "gemm",
        why="beta = 1 on full tiles overwrites C instead of adding to it",
    ),
    Mutation(
        "gemm-k-blocks-overwrite",
        "csrc/kernels/gemm.c",
        "macro_ctx_t c = {p, uk, bpack, pc, kc, jc, nc, mcb, pc > 0};",
        "macro_ctx_t c = {p, uk, bpack, pc, kc, jc, nc, mcb, 0};",
        "gemm",
        why="depth blocks after the first overwrite C instead of accumulating",
    ),
    Mutation(
        "gemm-strided-epilogue-drops-alpha",
        "csrc/kernels/gemm.c",
        "      float v = p->alpha * ar[j];\n      if (accumulate)",
        "      float v = ar[j];\n      if (accumulate)",
        "gemm",
        why="half-precision or strided C ignore alpha",
    ),
    Mutation(
        "gemm-bf16-direct-ignores-alpha",
        "csrc/kernels/gemm.c",
        "int direct = p->dtype == TNK_BF16 && p->sc_c == 1 && p->alpha == 1.0f && p->beta == 0.0f &&",
        "int direct = p->dtype == TNK_BF16 && p->sc_c == 1 && p->beta == 0.0f &&",
        "gemm",
        why="bf16 full tiles round the product into C without alpha",
    ),
    Mutation(
        "gemv-dot-tail-off-by-one",
        "csrc/kernels/x86/gemm_body.h",
        "for (; i < k; i++) acc += ONE(x[i]) * ONE(r[i]);",
        "for (; i + 1 < k; i++) acc += ONE(x[i]) * ONE(r[i]);",
        "gemm",
        isas=["native", "avx2"],
        why="the skinny product's scalar tail skips the last k",
    ),
    # ---- gather / scatter / index ----
    Mutation(
        "gather-index-uses-dense-stride",
        "csrc/kernels/index.c",
        "int64_t k = ((const int64_t *)a->index.data)[ox + t * s_idx];",
        "int64_t k = ((const int64_t *)a->index.data)[ox + t * s_den];",
        "index",
        why="the index is walked with the output's stride along dim",
    ),
    Mutation(
        "gather-outer-index-strides-as-dense",
        "csrc/kernels/index.c",
        "    c.ridx[c.nrest] = a->index.strides[k];",
        "    c.ridx[c.nrest] = a->dense.strides[k];",
        "index",
        why="the index's other dimensions take the dense tensor's strides",
    ),
    Mutation(
        "index-select-ignores-index-stride",
        "csrc/kernels/index.c",
        "int64_t v = load_index(a->index[k], a->index_dtype, j * a->index_stride[k]);",
        "int64_t v = load_index(a->index[k], a->index_dtype, j);",
        "index",
        why="index_select / index_add read the index as contiguous",
    ),
    Mutation(
        "index-add-f32-drops-alpha",
        "csrc/kernels/index.c",
        "for (int64_t i = i0; i < i1; i++) d[i] += al * s[i];",
        "for (int64_t i = i0; i < i1; i++) d[i] += s[i];",
        "index",
        why="fp32 index_add ignores alpha",
    ),
    # ---- element-wise / reductions ----
    Mutation(
        "vsum-f64-tail-off-by-one",
        "csrc/kernels/x86/avx2/vmath.c",
        "double s = (r[0] + r[1]) + (r[2] + r[3]);\n  for (; k < n; k++) s += x[k];",
        "double s = (r[0] + r[1]) + (r[2] + r[3]);\n  for (; k + 1 < n; k++) s += x[k];",
        "reduce",
        why="the row sum's scalar tail drops the last element",
    ),
    Mutation(
        "map1-skips-one-element-tail",
        "csrc/kernels/x86/vmath_body.h",
        "    if (k_ < (n))                                                                          \\\n"
        "      vf_store_part((y) + k_, F(",
        "    if (k_ + 1 < (n))                                                                      \\\n"
        "      vf_store_part((y) + k_, F(",
        "eltwise",
        isas=["native", "avx2"],
        why="a remainder of exactly one element is left unwritten",
    ),
    Mutation(
        "exp-avx2-nan-not-propagated",
        "csrc/kernels/x86/avx2/vmath.c",
        "  return _mm256_blendv_ps(y, xin, nan);",
        "  return y;",
        "eltwise",
        isas=["avx2"],
        why="exp(NaN) comes out finite (the clamps swallow the NaN)",
    ),
    # ---- layer norm ----
    Mutation(
        "layer-norm-f32-one-pass-variance",
        "csrc/kernels/layer_norm.c",
        "float var = tnk_vsumsqdev_f32(x, a->n, mean) / (float)a->n;",
        "float var = tnk_vsumsqdev_f32(x, a->n, 0.0f) / (float)a->n - mean * mean;",
        "norm",
        why="fp32 rows take E[x^2] - mean^2, which cancels for rows far from 0",
    ),
    Mutation(
        "layer-norm-weight-grad-skips-row-0",
        "csrc/kernels/layer_norm.c",
        "    for (int64_t r = 0; r < a->rows; r++) {\n      double g = tnk_ldf(a->g, dt, r * a->n + j);",
        "    for (int64_t r = 1; r < a->rows; r++) {\n      double g = tnk_ldf(a->g, dt, r * a->n + j);",
        "norm",
        why="the weight / bias gradient column pass starts at row 1",
    ),
    Mutation(
        "layer-norm-backward-drops-xhat-term",
        "csrc/kernels/layer_norm.c",
        "tnk_stf(a->gx, dt, base + j, rstd * (gw - s1 - xh * s2));",
        "tnk_stf(a->gx, dt, base + j, rstd * (gw - s1));",
        "norm",
        why="the input gradient forgets the mean of g*w*xhat",
    ),
    # ---- attention ----
    Mutation(
        "sdpa-no-accumulator-rescale",
        "csrc/kernels/attention.c",
        "        if (alpha != 1.0f)\n          for (int64_t e = 0; e < a->ev; e++) acc[r * a->ev + e] *= alpha;\n",
        "",
        "attention",
        why="the output accumulator is not rescaled when a later key tile raises the row max",
    ),
    Mutation(
        "sdpa-causal-masks-diagonal",
        "csrc/kernels/attention.c",
        "for (int64_t c = i - j0 + 1 < 0 ? 0 : i - j0 + 1; c < kn; c++) row[c] = -INFINITY;",
        "for (int64_t c = i - j0 < 0 ? 0 : i - j0; c < kn; c++) row[c] = -INFINITY;",
        "attention",
        why="the causal mask also hides the key at the query's own position",
    ),
    Mutation(
        "sdpa-backward-drops-partial-last-tile",
        "csrc/kernels/attention.c",
        "        for (int64_t j0 = 0; j0 < kend; j0 += KB) {",
        "        for (int64_t j0 = 0; j0 + KB <= kend; j0 += KB) {",
        "attention",
        why="the backward skips a last key tile shorter than 128 keys",
    ),
    # ---- convolution / pooling ----
    Mutation(
        "max-pool-ignores-nan",
        "csrc/kernels/pooling.c",
        "if (v > best || v != v) {",
        "if (v > best) {",
        "pool",
        why="a NaN in the window does not win (CPU propagates it)",
    ),
    Mutation(
        "avg-pool-window-past-padding",
        "csrc/kernels/pooling.c",
        "  if (e > in + g->p[ax]) e = in + g->p[ax];\n",
        "",
        "pool",
        why="ceil_mode windows running past the right padding count those taps in the divisor",
    ),
    Mutation(
        "im2col-ignores-width-dilation",
        "csrc/kernels/conv.c",
        "int64_t ix = ox * a->sw - a->pw + k.kx * a->dw;\n          if (ix < 0 || ix >= a->w)\n",
        "int64_t ix = ox * a->sw - a->pw + k.kx;\n          if (ix < 0 || ix >= a->w)\n",
        "conv",
        why="the forward's column gather steps the kernel width by 1 whatever the dilation",
    ),
    # ---- optimizers ----
    Mutation(
        "adam-f32-no-amsgrad-max",
        "csrc/kernels/optim.c",
        "        vd = vm[i] > vi ? vm[i] : vi;",
        "        vd = vi;",
        "optim",
        why="fp32 amsgrad divides by the current second moment, not the running maximum",
    ),
    Mutation(
        "adam-f32-ignores-maximize",
        "csrc/kernels/optim.c",
        "      if (a->maximize) gi = -gi;\n      float pi = pa[i];",
        "      float pi = pa[i];",
        "optim",
        why="the fp32 loop descends when asked to maximize",
    ),
    Mutation(
        "adam-f32-one-minus-beta2-in-float",
        "csrc/kernels/optim.c",
        "omb2 = (float)(1.0 - b2);",
        "omb2 = 1.0f - fb2;",
        "optim",
        why="1 - beta2 taken after rounding beta2 to float (1.3e-5 relative off for 0.999)",
    ),
    # ---- runtime: the caching allocator ----
    Mutation(
        "free-ignores-recorded-streams",
        "csrc/runtime/allocator.c",
        "  if (kept) {\n    b->pending_next = a->pending;",
        "  if (0) {\n    b->pending_next = a->pending;",
        "allocator",
        why="a freed block returns to the cache while a recorded stream still uses it",
    ),
    Mutation(
        "record-stream-not-recorded",
        "csrc/runtime/allocator.c",
        "        b->uses[b->n_uses++] = s;",
        "        (void)s;",
        "allocator",
        why="record_stream forgets the stream (only the overflow path is kept)",
    ),
]


def die(msg):
    """A usage or setup error: the message, exit status 2 (1 means a mutation survived)."""
    print(msg, file=sys.stderr)
    sys.exit(2)


def sh(cmd, cwd, env=None, timeout=None, quiet=True):
    return subprocess.run(
        cmd,
        cwd=cwd,
        env=env,
        timeout=timeout,
        stdout=subprocess.PIPE if quiet else None,
        stderr=subprocess.STDOUT if quiet else None,
        text=True,
    )


def check_worktree(wt: Path, allow_main: bool):
    r = sh(["git", "status", "--porcelain", "--untracked-files=no"], wt)
    if r.returncode != 0:
        die(f"mutate: {wt} is not a git checkout:\n{r.stdout}")
    if r.stdout.strip():
        die(f"mutate: refusing a dirty tree ({wt}):\n{r.stdout}")
    git_dir = sh(["git", "rev-parse", "--absolute-git-dir"], wt).stdout.strip()
    common = sh(["git", "rev-parse", "--git-common-dir"], wt).stdout.strip()
    common = str((wt / common).resolve()) if not os.path.isabs(common) else common
    if os.path.realpath(git_dir) == os.path.realpath(common) and not allow_main:
        die(
            f"mutate: {wt} is a main checkout, not a linked worktree; make one with "
            f"`git worktree add /work/wt-mut HEAD` (or pass --allow-main-checkout)"
        )


class Builder:
    def __init__(self, wt: Path, level: str, python: str, jobs: int):
        self.wt, self.level, self.python, self.jobs = wt, level, python, jobs
        self.cbuild = wt / "build" / "c"

    def make(self, target):
        return sh(
            ["make", "-s", "-C", "csrc", f"BUILD={self.cbuild}", f"-j{self.jobs}", target], self.wt
        )

    def build(self):
        """Brings the build up to date with the sources; (ok, log)."""
        if self.level == "c":
            for suite in C_SUITES:
                r = self.make(str(self.cbuild / suite))
                if r.returncode != 0:
                    return False, r.stdout
            return True, ""
        r = self.make("all")
        if r.returncode != 0:
            return False, r.stdout
        # build_ext does not see libtnrt.a change (not a dependency of the
        # extension): drop the in-place library so it relinks; ninja
        # recompiles no unchanged C++ source.
        for so in (self.wt / "torch_neuronx").glob("_C*.so"):
            so.unlink()
        env = dict(os.environ, MAX_JOBS=str(self.jobs))
        r = sh(
            [self.python, "setup.py", "-q", "build_ext", "--inplace"],
            self.wt,
            env=env,
            timeout=3600,
        )
        return r.returncode == 0, r.stdout


class Runner:
    def __init__(self, wt: Path, level: str, python: str, timeout: int, skip_files):
        self.wt, self.level, self.python, self.timeout = wt, level, python, timeout
        self.skip_files = set(skip_files)

    def env(self, isa):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.wt) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("TORCH_NEURONX_ISA", None)
        if isa != "native":
            env["TORCH_NEURONX_ISA"] = isa
        return env

    def check_import(self):
        r = sh(
            [self.python, "-c", "import torch_neuronx; print(torch_neuronx.__file__)"],
            self.wt,
            env=self.env("native"),
        )
        where = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stdout
        if r.returncode != 0 or not os.path.realpath(where).startswith(os.path.realpath(self.wt)):
            die(f"mutate: torch_neuronx does not import from the worktree: {r.stdout}")

    def pytest_args(self, family):
        args = FAMILIES[family]
        return [a for a in args if a.split("::")[0] not in self.skip_files]

    def run(self, mutation_or_family, isas):
        """(passed, log) of the tests of one family under each ISA."""
        if self.level == "c":
            try:
                for suite in C_SUITES:
                    r = sh([str(self.wt / "build" / "c" / suite)], self.wt, timeout=self.timeout)
                    if r.returncode != 0:
                        return False, r.stdout[-2000:]
            except subprocess.TimeoutExpired:
                return False, "timeout"
            return True, ""
        family = mutation_or_family
        for isa in isas:
            cmd = [self.python, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider"]
            cmd += self.pytest_args(family)
            try:
                r = sh(cmd, self.wt, env=self.env(isa), timeout=self.timeout)
            except subprocess.TimeoutExpired:
                return False, f"timeout ({isa})"
            if r.returncode != 0:
                return False, f"[{isa}] " + r.stdout[-2000:]
        return True, ""


def apply(wt: Path, m: Mutation):
    path = wt / m.file
    text = path.read_text()
    n = text.count(m.old)
    if n != 1:
        raise ValueError(f"{m.name}: the snippet occurs {n} times in {m.file}, not once")
    path.write_text(text.replace(m.old, m.new))
    return path, text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("worktree", nargs="?", type=Path, help="a clean linked git worktree")
    ap.add_argument("--level", choices=["c", "python"], default="c")
    ap.add_argument("--only", nargs="*", default=None, help="mutation names (or prefixes)")
    ap.add_argument("--family", nargs="*", default=None, help="families to run")
    ap.add_argument("--list", action="store_true", help="print the mutations and exit")
    ap.add_argument(
        "--python", default=sys.executable, help="interpreter with torch (python level)"
    )
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per test run")
    ap.add_argument(
        "--skip-tests-in",
        action="append",
        default=[],
        metavar="FILE",
        help="leave a test file out of every family (e.g. tests/test_fuzz.py, to "
        "measure what the other files kill without it)",
    )
    ap.add_argument("--allow-main-checkout", action="store_true")
    args = ap.parse_args()

    selected = [
        m
        for m in MUTATIONS
        if (args.only is None or any(m.name.startswith(o) for o in args.only))
        and (args.family is None or m.family in args.family)
    ]
    if args.level == "c" and not args.list:
        # the C level runs the kernel suites (C_SUITES) only: no runtime test
        runtime = [m.name for m in selected if m.file.startswith("csrc/runtime/")]
        if runtime:
            print(f"mutate: --level c leaves out the runtime mutations: {', '.join(runtime)}")
        selected = [m for m in selected if not m.file.startswith("csrc/runtime/")]
    if not selected:
        die("mutate: no mutation matches --only / --family (see --list)")
    if args.list:
        for m in selected:
            print(f"{m.name:40} {m.family:9} {m.file}  [{','.join(m.isas)}]  {m.why}")
        return 0
    if args.worktree is None:
        ap.error("the worktree is required")
    wt = args.worktree.resolve()
    check_worktree(wt, args.allow_main_checkout)
    for m in selected:  # every snippet must apply before anything is touched
        text = (wt / m.file).read_text()
        if text.count(m.old) != 1:
            die(f"mutate: {m.name}: snippet found {text.count(m.old)} times in {m.file}")

    builder = Builder(wt, args.level, args.python, args.jobs)
    runner = Runner(wt, args.level, args.python, args.timeout, args.skip_tests_in)
    print(f"mutate: baseline build in {wt} ({args.level} level) ...", flush=True)
    ok, log = builder.build()
    if not ok:
        print(log[-4000:])
        sys.exit(2)
    if args.level == "python":
        runner.check_import()
    families = sorted({m.family for m in selected})
    for fam in families if args.level == "python" else ["c"]:
        isas = sorted({i for m in selected if m.family == fam for i in m.isas})
        ok, log = runner.run(fam, isas)
        if not ok:
            print(f"mutate: the unmutated tree fails ({fam}):\n{log}")
            sys.exit(2)

    def terminate(signum, frame):  # SIGTERM / SIGHUP: unwind through the finally blocks
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    results = []
    try:
        for m in selected:
            t0 = time.time()
            path, original = apply(wt, m)
            try:
                built, log = builder.build()
                if not built:
                    status, detail = "build-error", log[-500:]
                else:
                    passed, detail = runner.run(m.family, m.isas)
                    status = "SURVIVED" if passed else "killed"
            finally:
                path.write_text(original)
            results.append((m, status, time.time() - t0))
            print(f"  {status:11} {m.name:40} {m.family:9} {time.time() - t0:6.1f}s", flush=True)
    finally:
        # the unmutated tree's build again (files are restored above)
        dirty = sh(["git", "status", "--porcelain", "--untracked-files=no"], wt).stdout
        if dirty.strip():
            print(f"mutate: WARNING: the worktree is not clean after restoring:\n{dirty}")
        builder.build()

    survived = [m for m, s, _ in results if s == "SURVIVED"]
    killed = sum(s == "killed" for _, s, _ in results)
    print(
        f"\nmutate ({args.level} level): {len(results)} mutations, {killed} killed, "
        f"{len(survived)} survived, {len(results) - killed - len(survived)} did not build"
    )
    for m in survived:
        print(f"  survived: {m.name} ({m.file}): {m.why}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
