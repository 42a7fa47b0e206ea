"""A clean interpreter exit after a backward pass on neuron.

Since torch 2.13, ``torch.autograd.backward`` stashes the caller's
``contextvars`` context in thread-local state, and every graph task keeps a
copy of that state. When the graph's last node runs on an autograd device
thread (``pt_autograd_<i>``, which run the backward of device tensors), that
thread wakes the caller and only then drops its reference to the graph task;
dropping it releases the context, which takes the GIL. If the caller has
meanwhile reached the end of the script, the interpreter is finalizing,
taking the GIL ends the thread with ``pthread_exit``, and its forced unwind
through a C++ destructor aborts the process ("terminate called without an
active exception", exit status -6). It is rare and timing-bound: one exit in
30-55 on a loaded 2-core host (it failed two tests in one CI run).

At exit, before the interpreter starts finalizing, ``settle()`` passes a
backward through every autograd device thread that exists, calling the
engine directly so that this graph task carries no Python object. A device
thread takes it only after it has finished, GIL and all, with the previous
one; so when it returns, no device thread holds a graph task that needs the
GIL. The upstream change that would make this unnecessary is in
docs/upstream/autograd-device-thread-exit.md."""

import atexit
import os

import torch


def autograd_device_threads() -> list[int]:
    """The device indices of torch's autograd device threads in this process
    (they are started, one per index, at the first backward that reaches a
    device tensor; a forked child has none)."""
    found = set()
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return []
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended meanwhile
            continue
        if name.startswith("pt_autograd_") and name[12:].isdigit():
            found.add(int(name[12:]))
    return sorted(found)


def settle() -> list[int]:
    """Runs one engine-level backward on each device thread whose index is a
    neuron device; returns the indices it ran on."""
    from . import neuron

    if not neuron.is_initialized():
        return []
    done = []
    engine = torch.autograd.Variable._execution_engine
    for i in autograd_device_threads():
        if i >= neuron.device_count():
            continue
        dev = torch.device("neuron", i)
        leaf = torch.zeros((), device=dev, requires_grad=True)
        out = leaf * 1.0  # MulBackward0 on neuron:i runs on pt_autograd_<i>
        # (tensors, grad_tensors, keep_graph, create_graph, inputs,
        #  allow_unreachable, accumulate_grad): not torch.autograd.backward,
        # which would stash the context again.
        engine.run_backward((out,), (torch.ones((), device=dev),), False, False, (), True, True)
        done.append(i)
    return done


def _at_exit() -> None:
    try:
        with torch.enable_grad():
            settle()
    except Exception:  # noqa: BLE001 - exit goes on whatever the device's state
        pass


def install() -> None:
    atexit.register(_at_exit)
