"""Runs test files of this directory in a fresh interpreter under another
environment (a forced ISA, another HAL): the tests that re-run suites."""

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_suites(files, env, timeout=900):
    """pytest -q -x over `files` (names in tests/) with `env`; the
    CompletedProcess, output captured as text."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider"]
        + [os.path.join(HERE, f) for f in files],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=HERE,
    )
