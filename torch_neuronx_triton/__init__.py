"""Triton's backend for neuron (entry point group "triton.backends").

A top-level package, not a subpackage of torch_neuronx: Triton imports every
registered backend when it is imported, and importing torch_neuronx
registers the neuron device, which a process that turned the backend's
autoload off (TORCH_DEVICE_BACKEND_AUTOLOAD=0) must not get. The driver is
active only where torch_neuronx is loaded (``torch.neuron`` exists).

Triton finds backends through that entry point group and uses the one whose
driver is active. With this package, a ``@triton.jit`` kernel that a library
launches on neuron tensors (TorchTitan's MoE token permutation, for one) goes
through Triton's own front end (the kernel is parsed, specialised and
lowered to Triton IR with Triton's passes, so compile errors are Triton's),
and then runs with Triton's semantics by Triton's interpreter: every program
of the grid in turn, on the host, over the tensors' device memory copied in
and back (device memory is host memory here). Ordering follows PyTorch's:
the copies wait for the current stream's earlier work and later work waits
for the copies.

What it is not: a code generator. Nothing is compiled to machine code, so a
kernel runs at the interpreter's speed (docs/benchmarks/triton.md). The
interpreter's limits are this backend's: no inline assembly
(``tl.inline_asm_elementwise``), no Gluon kernels, no warp specialisation or
TMA semantics beyond the interpreter's emulation, and of the device library
(``triton.language.extra.libdevice``, which the interpreter lacks entirely)
only the functions with a triton.language equivalent and ``tanh`` (the
launcher maps them while a kernel runs).
"""
