"""The C runtime and kernel tests, plain and under ASan + UBSan."""

import os
import subprocess

import pytest
from conftest import ROOT


@pytest.mark.parametrize("target", ["test", "asan"])
def test_c_suite(target, tmp_path):
    r = subprocess.run(
        ["make", "-C", os.path.join(ROOT, "csrc"), f"BUILD={tmp_path}", target],
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    summaries = [line for line in out.splitlines() if " passed, " in line]
    assert summaries and all(line.endswith(" 0 failed") for line in summaries), out
    assert "ERROR: AddressSanitizer" not in out and "runtime error" not in out, out
