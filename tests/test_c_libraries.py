"""The C runtime, kernel and collective suites (csrc/tests/), plain, under
ASan + UBSan and under TSan: the test command runs them here, once, built
into build/c (make rebuilds only what changed)."""

import os
import subprocess

import pytest
from conftest import ROOT


@pytest.mark.parametrize("target", ["test", "asan", "tsan"])
def test_c_suite(target):
    r = subprocess.run(
        [
            "make",
            "-C",
            os.path.join(ROOT, "csrc"),
            f"BUILD={os.path.join(ROOT, 'build', 'c')}",
            target,
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    summaries = [line for line in out.splitlines() if " passed, " in line]
    assert summaries and all(line.endswith(" 0 failed") for line in summaries), out
    for sanitizer_report in (
        "ERROR: AddressSanitizer",
        "runtime error",
        "WARNING: ThreadSanitizer",
    ):
        assert sanitizer_report not in out, out
