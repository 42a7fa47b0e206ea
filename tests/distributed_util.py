"""run_ranks: runs a function in N real processes, one per rank, as torchrun
would start them (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE set before
the child imports torch), with a FileStore rendezvous in a temporary
directory (no port). Every wait is bounded; on a timeout the children this
started are killed by PID. Returns each rank's return value (picklable, CPU
tensors).

run_commands: runs launcher commands (torchrun, accelerate launch, ...) at
once, each in a session of its own, with a bounded wait; on a timeout, or
when one fails while others still run, it kills the process groups it
started (each launcher and the ranks it started)."""

import io
import os
import queue
import signal
import subprocess
import tempfile
import time
import traceback

import torch.multiprocessing as mp


def _child(fn, rank, world, store_path, args, results, backend):
    try:
        import torch
        import torch.distributed as dist

        import torch_neuronx  # noqa: F401  (autoload may be off in the tests' environment)

        if backend is not None:
            dist.init_process_group(
                backend, init_method=f"file://{store_path}", rank=rank, world_size=world
            )
        out = fn(rank, world, *args)
        if backend is not None and dist.is_initialized():
            dist.destroy_process_group()
        torch.neuron.synchronize()
        buf = io.BytesIO()  # by value: shared tensors would need this process alive
        torch.save(out, buf)
        results.put((rank, "ok", buf.getvalue()))
    except BaseException as e:  # reported to the parent, which raises
        results.put((rank, "error", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))


def run_ranks(fn, world, *args, backend="neuron", timeout=180, env=None, expect_results=None):
    """env: extra environment, a dict or a function of the rank.
    expect_results: the ranks that must report (default: all); the others
    may exit without a result, with exit code 0."""
    expected = set(range(world)) if expect_results is None else set(expect_results)
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = []
    with tempfile.TemporaryDirectory(prefix="tn-dist-") as tmp:
        store = os.path.join(tmp, "store")
        saved = dict(os.environ)
        try:
            for rank in range(world):
                os.environ.update(
                    {
                        "RANK": str(rank),
                        "WORLD_SIZE": str(world),
                        "LOCAL_RANK": str(rank),
                        "LOCAL_WORLD_SIZE": str(world),
                        **((env(rank) if callable(env) else env) or {}),
                    }
                )
                p = ctx.Process(
                    target=_child, args=(fn, rank, world, store, args, results, backend)
                )
                p.start()
                procs.append(p)
        finally:
            os.environ.clear()
            os.environ.update(saved)
        out, errors = {}, {}
        try:
            deadline = time.monotonic() + timeout
            while not expected <= set(out) | set(errors):
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"ranks {sorted(expected - set(out) - set(errors))} did not "
                        f"finish within {timeout} s"
                    )
                try:
                    rank, status, value = results.get(timeout=min(left, 5.0))
                except queue.Empty:
                    dead = [
                        r
                        for r, p in enumerate(procs)
                        if p.exitcode is not None and (p.exitcode != 0 or r in expected)
                    ]
                    missing = [r for r in dead if r not in out and r not in errors]
                    if missing:
                        raise RuntimeError(
                            f"rank(s) {missing} exited with code "
                            f"{[procs[r].exitcode for r in missing]} without a result"
                        ) from None
                    continue
                (out if status == "ok" else errors)[rank] = value
        finally:
            for p in procs:
                p.join(timeout=10)
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(timeout=10)
        if errors:
            raise AssertionError(
                "\n".join(f"rank {r} failed: {e}" for r, e in sorted(errors.items()))
            )
        import torch

        results = [
            torch.load(io.BytesIO(out[r]), weights_only=False) if r in out else None
            for r in range(world)
        ]
        for r, p in enumerate(procs):
            if r not in expected:
                assert p.exitcode == 0, f"rank {r} exited with code {p.exitcode}"
        return results


def launcher_env(**extra):
    """The environment of a launcher started from a user's shell: torch's
    backend autoload on (the tests' environment may turn it off), one
    OpenMP thread a rank (the ranks share this machine's cores)."""
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a crash prints the Python stacks
    env.update(extra)
    return env


def run_commands(cmds, timeout, envs=None):
    """Runs the commands (argv lists) at once, each in a new session (its
    process group: the launcher and the ranks it starts), stdout and stderr
    to a file (no pipe to fill while another command is waited on). Waits
    at most `timeout` s for all. On a timeout, or when one exits non-zero,
    kills the process groups still running (os.killpg of the PIDs it
    started) and fails with the output. Returns each command's output."""
    import pytest

    envs = envs or [launcher_env()] * len(cmds)
    assert len(envs) == len(cmds)
    procs, files = [], []

    def outputs():
        res = []
        for f in files:
            f.seek(0)
            res.append(f.read().decode(errors="replace"))
        return res

    def kill_running():
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)  # p.pid leads its own session
                p.wait(timeout=30)

    def report(i, out):
        return f"$ {' '.join(map(str, cmds[i]))}\n{out[-20000:]}"

    try:
        for cmd, env in zip(cmds, envs, strict=True):
            files.append(tempfile.TemporaryFile())
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=files[-1],
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )  # fmt: skip
            )
        deadline = time.monotonic() + timeout
        while any(p.poll() is None for p in procs):
            failed = [i for i, p in enumerate(procs) if p.returncode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                kill_running()
                outs = outputs()
                if failed:
                    i = failed[0]
                    pytest.fail(
                        f"exited with code {procs[i].returncode} (the others killed):\n"
                        + report(i, outs[i])
                    )
                pytest.fail(
                    f"did not finish in {timeout} s:\n"
                    + "\n".join(report(i, o) for i, o in enumerate(outs))
                )
            time.sleep(0.2)
        outs = outputs()
        for i, p in enumerate(procs):
            assert p.returncode == 0, f"exited with code {p.returncode}:\n" + report(i, outs[i])
        return outs
    finally:
        kill_running()
        for f in files:
            f.close()


def run_command(cmd, timeout, env=None):
    """run_commands for one command; returns its output."""
    return run_commands([cmd], timeout, None if env is None else [env])[0]
