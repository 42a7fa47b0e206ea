"""Runs tests/test_opinfo.py with every outcome recorded and writes the
known-failure list, tests/opinfo_known_failures.txt: one line per failing
(op, variant, dtype) with the real error ('Type: first line of message').

    .venv/bin/python scripts/opinfo_known_failures.py              # full suite
    .venv/bin/python scripts/opinfo_known_failures.py --mode sample
    .venv/bin/python scripts/opinfo_known_failures.py -- -k test_out

A full run rewrites the list; one that covers only part of the suite
(sample mode, -k) replaces the entries it ran and keeps the others. A test
that kills the pytest process or makes no progress for --stall seconds is
listed as 'Crash: ...' or 'Timeout: ...' (the suite then does not run it),
and the run resumes after it. Prints the totals: tests run, passed, pass
percentage, the most common failure reasons, the slowest tests.
"""

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
KNOWN = os.path.join(ROOT, "tests", "opinfo_known_failures.txt")
HEADER = """\
# Known failures of tests/test_opinfo.py on the neuron device, one per line:
#   op variant dtype reason
# written by scripts/opinfo_known_failures.py from the recorded run; the reason
# is the real error ('Type: first line of message'). The test xfails exactly
# these entries, strictly: an entry that passes (or fails with another
# exception type) fails the suite. Review changes to this file like code.
"""


def read_record(path):
    """(outcomes {key: (event, reason, seconds)}, key started but unfinished)."""
    outcomes, open_key = {}, None
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                entry = json.loads(line)
                key = tuple(entry["key"])
                if entry["event"] == "start":
                    open_key = key
                else:
                    outcomes[key] = (entry["event"], entry.get("reason"), entry.get("s", 0))
                    open_key = None if open_key == key else open_key
    return outcomes, open_key


def append_record(path, key, reason):
    with open(path, "a") as f:
        f.write(json.dumps({"key": key, "event": "fail", "reason": reason}) + "\n")


def run_pytest(args, env, stall):
    """One pytest run: its exit status, or None when it stalled (killed)."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--tb=no",
        os.path.join(ROOT, "tests", "test_opinfo.py"),
        *args,
    ]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, start_new_session=True)
    record = env["TORCH_NEURONX_OPINFO_RECORD"]
    last = time.monotonic()
    seen = os.path.getsize(record) if os.path.exists(record) else 0
    while proc.poll() is None:
        time.sleep(2)
        size = os.path.getsize(record) if os.path.exists(record) else 0
        if size != seen:
            seen, last = size, time.monotonic()
        elif time.monotonic() - last > stall:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return None
    return proc.returncode


def run_all(args, env, stall):
    """Runs pytest until it finishes, listing a test that crashed or hung and
    resuming after it."""
    record = env["TORCH_NEURONX_OPINFO_RECORD"]
    while True:
        rc = run_pytest(args, env, stall)
        _, open_key = read_record(record)
        if open_key is None:
            return rc
        if rc is None:
            reason = f"Timeout: no progress for {stall} s"
        elif rc < 0:
            reason = f"Crash: killed by {signal.Signals(-rc).name}"
        else:
            reason = f"Crash: pytest exited with status {rc} inside the test"
        print(f"\n*** {open_key}: {reason}; resuming", flush=True)
        append_record(record, open_key, reason)


def write_known(outcomes, path, whole):
    """Writes the failures among outcomes; unless the run was whole, keeps
    the entries for the tests that did not run."""
    from test_opinfo import load_known_failures

    known = {} if whole else load_known_failures(path)
    known = {k: v for k, v in known.items() if k not in outcomes}
    known.update({k: reason for k, (event, reason, _) in outcomes.items() if event == "fail"})
    with open(path, "w") as f:
        f.write(HEADER)
        for key in sorted(known):
            f.write(" ".join(key) + " " + known[key].replace("\n", " ") + "\n")
    return known


def summarise(outcomes):
    outcomes = {k: v for k, v in outcomes.items() if v[0] != "skip"}
    total = len(outcomes)
    passed = sum(event == "pass" for event, _, _ in outcomes.values())
    print(
        f"\n{total} op-variant-dtype tests, {passed} passed "
        f"({100.0 * passed / max(total, 1):.1f}%), {total - passed} failed"
    )
    by_variant = collections.Counter((k[1], e) for k, (e, _, _) in outcomes.items())
    for variant in sorted({k[1] for k in outcomes}):
        p, f = by_variant[(variant, "pass")], by_variant[(variant, "fail")]
        print(f"  {variant:14s} {p:6d} passed {f:6d} failed ({100.0 * p / max(p + f, 1):.1f}%)")
    causes = collections.Counter(r for e, r, _ in outcomes.values() if e == "fail")
    print("most common failure reasons:")
    for reason, n in causes.most_common(25):
        print(f"  {n:5d}  {reason[:160]}")
    slow = sorted(outcomes.items(), key=lambda kv: -(kv[1][2] or 0))[:15]
    print("slowest tests:", ", ".join(f"{' '.join(k)} {s:.1f}s" for k, (_, _, s) in slow))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["full", "sample"], default="full")
    parser.add_argument(
        "--record",
        default="/tmp/opinfo_record.jsonl",
        help="JSON-lines outcome log (kept: rerun with --resume)",
    )
    parser.add_argument(
        "--resume", action="store_true", help="keep the record and run only tests not yet in it"
    )
    parser.add_argument(
        "--stall",
        type=int,
        default=600,
        help="seconds without a finished test before it counts as hung",
    )
    parser.add_argument("--out", default=KNOWN)
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args()
    if not args.resume and os.path.exists(args.record):
        os.remove(args.record)
    env = dict(
        os.environ,
        TORCH_NEURONX_OPINFO=args.mode,
        TORCH_NEURONX_OPINFO_RECORD=os.path.abspath(args.record),
    )
    start = time.monotonic()
    run_all(args.pytest_args, env, args.stall)
    outcomes, _ = read_record(args.record)
    write_known(outcomes, args.out, whole=args.mode == "full" and not args.pytest_args)
    summarise(outcomes)
    print(f"wrote {args.out}; {time.monotonic() - start:.0f} s")


if __name__ == "__main__":
    main()
