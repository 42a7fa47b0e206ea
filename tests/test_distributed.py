"""torch.distributed with the "neuron" backend, in real processes (one per
rank, spawned as torchrun would start them). Every result is checked in the
ranks against PyTorch on CPU: each rank builds every rank's input from a
seed, so the expected value of a collective is computed with CPU tensor ops
independently of the backend under test."""

import pytest
import torch
import torch.distributed as dist
from distributed_util import run_ranks

FLOAT_TYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
INT_TYPES = [torch.int32, torch.int64, torch.uint8, torch.int8, torch.int16]


def make(rank, shape, dtype, salt=0):
    """Rank `rank`'s input, the same in every process."""
    g = torch.Generator().manual_seed(1000 * rank + salt)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 4).to(dtype)
    hi = 3 if dtype == torch.uint8 else 50
    lo = 0 if dtype == torch.uint8 else -50
    return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)


def expect_reduce(inputs, op):
    """CPU oracle of a reduction over ranks; half types accumulate in float32."""
    dtype = inputs[0].dtype
    acc_t = torch.float32 if dtype in (torch.bfloat16, torch.float16) else dtype
    xs = [x.to(acc_t) for x in inputs]
    out = xs[0].clone()
    for x in xs[1:]:
        if op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG):
            out = out + x
        elif op == dist.ReduceOp.PRODUCT:
            out = out * x
        elif op == dist.ReduceOp.MIN:
            out = torch.minimum(out, x)
        elif op == dist.ReduceOp.MAX:
            out = torch.maximum(out, x)
        elif op == dist.ReduceOp.BAND:
            out = out & x
        elif op == dist.ReduceOp.BOR:
            out = out | x
        elif op == dist.ReduceOp.BXOR:
            out = out ^ x
    if op == dist.ReduceOp.AVG:
        out = (
            out / len(inputs)
            if acc_t.is_floating_point
            else torch.div(out, len(inputs), rounding_mode="trunc")
        )
    return out.to(dtype)


def close(actual, expected, what):
    actual = actual.cpu()
    if expected.dtype.is_floating_point:
        tol = {torch.bfloat16: 2e-2, torch.float16: 2e-3}.get(expected.dtype, 1e-5)
        torch.testing.assert_close(actual, expected, rtol=tol, atol=tol, msg=what)
    else:
        assert torch.equal(actual, expected), f"{what}: {actual} != {expected}"


OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
    "band": dist.ReduceOp.BAND,
    "bor": dist.ReduceOp.BOR,
    "bxor": dist.ReduceOp.BXOR,
}


def _collectives(rank, world):
    dev = torch.device("neuron", torch.neuron.current_device())
    assert dev.index == rank % torch.neuron.device_count(), "LOCAL_RANK picks the device"
    checks = 0
    # all_reduce: every op on every dtype it takes; sizes from empty to many slots
    for dtype in FLOAT_TYPES + INT_TYPES + [torch.bool]:
        for name, op in OPS.items():
            if name in ("band", "bor", "bxor") and dtype.is_floating_point:
                continue
            if dtype == torch.bool and name in ("avg", "product"):
                continue
            for n in (0, 1, 37, 70_000) if dtype in (torch.float32, torch.int64) else (37,):
                xs = [make(r, (n,), dtype, salt=n) for r in range(world)]
                t = xs[rank].to(dev)
                dist.all_reduce(t, op=op)
                close(t, expect_reduce(xs, op), f"all_reduce {name} {dtype} n={n}")
                checks += 1
    # larger than one 2 MiB slot, with a remainder, and 2-D
    xs = [make(r, (1031, 600), torch.float32, salt=9) for r in range(world)]
    t = xs[rank].to(dev)
    dist.all_reduce(t)
    close(t, expect_reduce(xs, dist.ReduceOp.SUM), "all_reduce 2-D 2.4 MiB")
    # PREMUL_SUM
    xs = [make(r, (100,), torch.float32, salt=3) for r in range(world)]
    t = xs[rank].to(dev)
    dist.all_reduce(t, op=dist._make_nccl_premul_sum(0.5))
    close(t, expect_reduce(xs, dist.ReduceOp.SUM) * 0.5, "all_reduce premul_sum")
    # async + wait; the work's future holds the result
    t = xs[rank].to(dev)
    w = dist.all_reduce(t, async_op=True)
    w.wait()
    close(t, expect_reduce(xs, dist.ReduceOp.SUM), "async all_reduce")
    fut = dist.all_reduce(xs[rank].to(dev), async_op=True).get_future()
    close(fut.wait()[0], expect_reduce(xs, dist.ReduceOp.SUM), "future value")
    checks += 4

    # broadcast from every root, over slot sizes
    for root in range(world):
        for n in (5, 600_000):
            xs = [make(r, (n,), torch.float32, salt=root) for r in range(world)]
            t = xs[rank].to(dev)
            dist.broadcast(t, src=root)
            close(t, xs[root], f"broadcast root={root} n={n}")
            checks += 1

    # all_gather (list and into_tensor), gather, scatter
    for n in (3, 300_000):
        xs = [make(r, (n,), torch.bfloat16, salt=n) for r in range(world)]
        outs = [torch.empty(n, dtype=torch.bfloat16, device=dev) for _ in range(world)]
        dist.all_gather(outs, xs[rank].to(dev))
        for r in range(world):
            close(outs[r], xs[r], f"all_gather n={n} block {r}")
        big = torch.empty(world * n, dtype=torch.bfloat16, device=dev)
        dist.all_gather_into_tensor(big, xs[rank].to(dev))
        close(big, torch.cat(xs), f"all_gather_into_tensor n={n}")
        checks += 2
    root = world - 1
    xs = [make(r, (7, 3), torch.int64, salt=11) for r in range(world)]
    gl = [torch.empty(7, 3, dtype=torch.int64, device=dev) for _ in range(world)]
    dist.gather(xs[rank].to(dev), gl if rank == root else None, dst=root)
    if rank == root:
        for r in range(world):
            close(gl[r], xs[r], f"gather block {r}")
    chunks = [make(r, (4, 5), torch.float32, salt=12) for r in range(world)]
    out = torch.empty(4, 5, device=dev)
    dist.scatter(out, [c.to(dev) for c in chunks] if rank == 0 else None, src=0)
    close(out, chunks[rank], "scatter")
    # reduce to a root: the others keep their input
    xs = [make(r, (50,), torch.float32, salt=13) for r in range(world)]
    t = xs[rank].to(dev)
    dist.reduce(t, dst=1, op=dist.ReduceOp.MAX)
    close(t, expect_reduce(xs, dist.ReduceOp.MAX) if rank == 1 else xs[rank], "reduce")
    checks += 3

    # reduce_scatter (list and tensor), including more than a slot per block
    for n in (6, 400_000):
        full = [make(r, (world * n,), torch.float32, salt=n + 1) for r in range(world)]
        expect = expect_reduce(full, dist.ReduceOp.SUM)[rank * n : (rank + 1) * n]
        out = torch.empty(n, device=dev)
        dist.reduce_scatter_tensor(out, full[rank].to(dev))
        close(out, expect, f"reduce_scatter_tensor n={n}")
        out2 = torch.empty(n, device=dev)
        dist.reduce_scatter(out2, list(full[rank].to(dev).chunk(world)))
        close(out2, expect, f"reduce_scatter n={n}")
        checks += 2

    # all_to_all_single with uneven splits (rank r sends r + p + 1 rows to p)
    send = [[r + p + 1 for p in range(world)] for r in range(world)]
    rows = [make(r, (sum(send[r]), 3), torch.float32, salt=14) for r in range(world)]
    out = torch.empty(sum(send[p][rank] for p in range(world)), 3, device=dev)
    dist.all_to_all_single(
        out,
        rows[rank].to(dev),
        output_split_sizes=[send[p][rank] for p in range(world)],
        input_split_sizes=send[rank],
    )
    expect = torch.cat(
        [rows[p][sum(send[p][:rank]) : sum(send[p][: rank + 1])] for p in range(world)]
    )
    close(out, expect, "all_to_all_single uneven")
    # all_to_all with lists
    ins = [
        [make(r, (p + 2,), torch.int32, salt=15 + p) for p in range(world)] for r in range(world)
    ]
    outs = [torch.empty(rank + 2, dtype=torch.int32, device=dev) for _ in range(world)]
    # rank r sends ins[r][p] (p + 2 elements) to p; p receives rank + 2 elements from each
    dist.all_to_all(outs, [x.to(dev) for x in ins[rank]])
    for p in range(world):
        close(outs[p], ins[p][rank], f"all_to_all from {p}")
    checks += 2

    # point to point: a ring in one batch, and plain send/recv pairs
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    payload = [make(r, (500_000,), torch.float32, salt=16) for r in range(world)]
    recv = torch.empty(500_000, device=dev)
    reqs = dist.batch_isend_irecv(
        [dist.P2POp(dist.isend, payload[rank].to(dev), nxt), dist.P2POp(dist.irecv, recv, prv)]
    )
    for q in reqs:
        q.wait()
    close(recv, payload[prv], "ring batch_isend_irecv")
    if rank == 0:
        for k in range(3):
            dist.send(make(0, (10,), torch.float64, salt=20 + k).to(dev), dst=world - 1)
    elif rank == world - 1:
        for k in range(3):  # FIFO between a pair
            t = torch.empty(10, dtype=torch.float64, device=dev)
            dist.recv(t, src=0)
            close(t, make(0, (10,), torch.float64, salt=20 + k), f"send/recv message {k}")
    checks += 2

    # coalesced all_reduce and CPU tensors through the same backend
    xs = [[make(r, (n,), torch.float32, salt=30 + n) for n in (3, 8)] for r in range(world)]
    ts = [x.to(dev) for x in xs[rank]]
    with dist._coalescing_manager(async_ops=True) as cm:
        for t in ts:
            dist.all_reduce(t)
    cm.wait()
    for i, t in enumerate(ts):
        close(t, expect_reduce([x[i] for x in xs], dist.ReduceOp.SUM), f"coalesced {i}")
    c = xs[rank][0].clone()
    dist.all_reduce(c)
    close(c, expect_reduce([x[0] for x in xs], dist.ReduceOp.SUM), "cpu tensor all_reduce")
    dist.barrier()
    checks += 3
    return checks


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_match_cpu(world):
    counts = run_ranks(_collectives, world, timeout=300)
    assert counts[0] > 100 and len(set(counts)) == 1


@pytest.mark.parametrize("hosts", ["AAB", "ABAB"])
def test_collectives_across_hosts_match_cpu(hosts):
    """Ranks told they run on different hosts (TORCH_NEURONX_HOST_ID): the
    hosts' ranks communicate through Gloo between host leaders."""
    env = lambda rank: {"TORCH_NEURONX_HOST_ID": hosts[rank]}  # noqa: E731
    counts = run_ranks(_collectives, len(hosts), timeout=240, env=env)
    assert counts[0] > 100 and len(set(counts)) == 1


def _init_styles(rank, world, style, store):
    import datetime

    kw = dict(store=store, rank=rank, world_size=world, timeout=datetime.timedelta(seconds=60))
    if style == "name":
        dist.init_process_group("neuron", **kw)
    elif style == "device_id":
        dist.init_process_group(device_id=torch.device("neuron", rank), **kw)
    elif style == "mixed":
        dist.init_process_group("cpu:gloo,neuron:neuron", **kw)
    else:
        dist.init_process_group(**kw)
    t = torch.full((4,), float(rank + 1), device="neuron")
    dist.all_reduce(t)
    c = torch.full((2,), rank + 1)
    dist.all_reduce(c)
    # DDP works in every style (it needs the group's default backend type)
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 1).to(t.device)
    ddp = torch.nn.parallel.DistributedDataParallel(lin)
    ddp(torch.full((1, 3), float(rank + 1), device=t.device)).sum().backward()
    grad = lin.weight.grad.cpu().tolist()  # the mean over ranks of [r + 1] * 3
    assert grad == [[1.5] * 3], grad
    dist.barrier()
    backend = dist.get_backend()
    dist.destroy_process_group()
    # a collective after destroy_process_group: PyTorch's own error, as with Gloo/NCCL
    try:
        dist.all_reduce(t)
        after = None
    except ValueError as e:
        after = str(e)
    assert after and "not been initialized" in after, after
    return t.cpu().tolist(), c.tolist(), backend


def _init_styles_outer(rank, world, style, path):
    store = dist.FileStore(path, world)
    return _init_styles(rank, world, style, store)


@pytest.mark.parametrize("style", ["name", "device_id", "mixed", "default"])
def test_init_process_group_styles(style, tmp_path):
    out = run_ranks(_init_styles_outer, 2, style, str(tmp_path / "s"), backend=None)
    for t, c, backend in out:
        assert t == [3.0] * 4 and c == [3, 3]
        assert backend == ("cpu:gloo,neuron:neuron" if style == "mixed" else "neuron")


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 32),
        torch.nn.GELU(),
        torch.nn.Linear(32, 4),
    )


def _data(steps, batch):
    g = torch.Generator().manual_seed(5)
    return [
        (torch.randn(batch, 16, generator=g), torch.randn(batch, 4, generator=g))
        for _ in range(steps)
    ]


def _reference(steps, batch):
    """The same training on one process, CPU, full batch."""
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for x, y in _data(steps, batch):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, [p.detach().clone() for p in model.parameters()]


def _train(rank, world, kind, steps, batch):
    dev = torch.device("neuron", torch.neuron.current_device())
    model = _mlp().to(dev)
    if kind == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        mesh = init_device_mesh("neuron", (world,))
        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    per = batch // world
    losses = []
    for x, y in _data(steps, batch):
        xs, ys = x[rank * per : (rank + 1) * per].to(dev), y[rank * per : (rank + 1) * per].to(dev)
        loss = torch.nn.functional.mse_loss(model(xs), ys)
        opt.zero_grad()
        loss.backward()
        opt.step()
        full = loss.detach().clone()
        dist.all_reduce(full, op=dist.ReduceOp.AVG)
        losses.append(full.item())
    if kind == "ddp":
        params = [p.detach().cpu() for p in model.module.parameters()]
    else:
        params = [p.full_tensor().detach().cpu() for p in model.parameters()]
    return losses, params


@pytest.mark.parametrize("kind", ["ddp", "fsdp2"])
def test_data_parallel_training_matches_single_process_cpu(kind):
    steps, batch = 4, 8
    ref_losses, ref_params = _reference(steps, batch)
    for losses, params in run_ranks(_train, 2, kind, steps, batch, timeout=300):
        torch.testing.assert_close(
            torch.tensor(losses), torch.tensor(ref_losses), rtol=1e-4, atol=1e-5
        )
        for p, q in zip(params, ref_params, strict=True):
            torch.testing.assert_close(p, q, rtol=1e-4, atol=1e-5)


def _functional_and_dtensor(rank, world):
    import torch.distributed._functional_collectives as fc
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    dev = torch.device("neuron", torch.neuron.current_device())
    mesh = init_device_mesh("neuron", (world,))
    xs = [make(r, (6, 4), torch.float32, salt=40) for r in range(world)]
    x = xs[rank].to(dev)
    # functional collectives (what DTensor and compiled graphs call)
    close(fc.all_reduce(x, "sum", mesh), expect_reduce(xs, dist.ReduceOp.SUM), "fc.all_reduce")
    close(fc.all_gather_tensor(x, 0, mesh), torch.cat(xs), "fc.all_gather_tensor")
    full = [make(r, (world * 3, 2), torch.float32, salt=41) for r in range(world)]
    close(
        fc.reduce_scatter_tensor(full[rank].to(dev), "sum", 0, mesh),
        expect_reduce(full, dist.ReduceOp.SUM)[rank * 3 : (rank + 1) * 3],
        "fc.reduce_scatter_tensor",
    )
    outs = fc.all_gather_into_tensor_coalesced([x, x * 2], mesh)
    close(outs[1], torch.cat(xs) * 2, "fc.all_gather_into_tensor_coalesced")
    a2a = fc.all_to_all_single(torch.arange(world * 2.0, device=dev) + 10 * rank, None, None, mesh)
    close(
        a2a,
        torch.tensor([10.0 * p + 2 * rank + i for p in range(world) for i in range(2)]),
        "fc.all_to_all_single",
    )
    # DTensor redistribution: Shard -> Replicate (all_gather), Partial -> Shard (reduce_scatter)
    g = make(0, (world * 4, 5), torch.float32, salt=42)  # the same on every rank
    d = distribute_tensor(g.to(dev), mesh, [Shard(0)])
    assert isinstance(d, DTensor) and d.to_local().shape == (4, 5)
    close(d.redistribute(mesh, [Replicate()]).to_local(), g, "Shard(0) -> Replicate")
    close(d.full_tensor(), g, "full_tensor")
    # tensor parallelism: column then row parallel MLP; forward and gradients vs CPU
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    tp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    tp.load_state_dict(ref.state_dict())
    tp = parallelize_module(tp.to(dev), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    inp = make(0, (5, 8), torch.float32, salt=43)
    out = tp(inp.to(dev))
    out.sum().backward()
    ref(inp).sum().backward()
    close(out, ref(inp).detach(), "TP forward")
    for (name, p), q in zip(tp.named_parameters(), ref.parameters(), strict=True):
        close(p.grad.full_tensor(), q.grad, f"TP grad {name}")
    # sequence parallelism: LayerNorm on sequence shards, then the column /
    # row pair, its output sharded on the sequence again
    from torch.distributed.tensor.parallel import SequenceParallel

    torch.manual_seed(1)
    ref = torch.nn.Sequential(
        torch.nn.LayerNorm(8), torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)
    )
    with torch.no_grad():
        ref[0].weight.uniform_(0.5, 1.5)  # not the identity, so its gradient matters
    sp = torch.nn.Sequential(
        torch.nn.LayerNorm(8), torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8)
    )
    sp.load_state_dict(ref.state_dict())
    plan = {
        "0": SequenceParallel(),
        "1": ColwiseParallel(input_layouts=Shard(1)),
        "3": RowwiseParallel(output_layouts=Shard(1)),
    }
    sp = parallelize_module(sp.to(dev), mesh, plan)
    seq = make(0, (2, 2 * world, 8), torch.float32, salt=45)  # (batch, sequence, dim)
    mine = seq[:, 2 * rank : 2 * rank + 2]
    out = sp(mine.to(dev))
    out = out.to_local() if isinstance(out, DTensor) else out
    out.sum().backward()
    full = ref(seq)
    full.sum().backward()
    close(out, full[:, 2 * rank : 2 * rank + 2].detach(), "SequenceParallel forward")
    for (name, p), q in zip(sp.named_parameters(), ref.parameters(), strict=True):
        g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        close(g, q.grad, f"SequenceParallel grad {name}")
    # loss_parallel: cross entropy over a vocabulary sharded on the last dim
    from torch.distributed.tensor.parallel import loss_parallel

    logits = make(0, (6, world * 5), torch.float32, salt=44)
    target = torch.tensor([0, 3, world * 5 - 1, 2, 1, 4])
    dl = distribute_tensor(logits.to(dev), mesh, [Shard(1)]).requires_grad_()
    with loss_parallel():
        loss = torch.nn.functional.cross_entropy(dl, target.to(dev))
        loss.backward()
    lc = logits.clone().requires_grad_()
    ref_loss = torch.nn.functional.cross_entropy(lc, target)
    ref_loss.backward()
    close(
        loss.full_tensor() if isinstance(loss, DTensor) else loss,
        ref_loss.detach(),
        "loss_parallel",
    )
    close(dl.grad.full_tensor(), lc.grad, "loss_parallel grad")
    return True


@pytest.mark.parametrize("world", [2])
def test_functional_collectives_dtensor_and_tensor_parallel(world):
    assert all(run_ranks(_functional_and_dtensor, world, timeout=300))


def _groups(rank, world, path):
    dev = torch.device("neuron", torch.neuron.current_device())
    # a bound device (device_id) is what split_group needs, as with NCCL
    dist.init_process_group(
        "neuron", store=dist.FileStore(path, world), rank=rank, world_size=world, device_id=dev
    )
    # new_group of a subset; ranks outside it do not take part
    sub = dist.new_group([1, 2])
    if rank in (1, 2):
        t = torch.full((3,), float(rank), device=dev)
        dist.all_reduce(t, group=sub)
        close(t, torch.full((3,), 3.0), "new_group all_reduce")
        dist.barrier(group=sub)
    # split_group: evens and odds
    split = dist.split_group(split_ranks=[[0, 2], [1]])
    assert (split is None) == (rank == 1) or rank == 1
    if rank in (0, 2):
        t = torch.full((2,), float(rank + 1), device=dev)
        dist.all_reduce(t, group=split)
        close(t, torch.full((2,), 4.0), "split_group all_reduce")
    # the default group still works after subgroups were used
    t = torch.ones(4, device=dev)
    dist.all_reduce(t)
    close(t, torch.full((4,), float(world)), "default group after subgroups")
    dist.monitored_barrier()
    dist.destroy_process_group()
    return True


def test_new_group_split_group_and_monitored_barrier(tmp_path):
    assert all(run_ranks(_groups, 3, str(tmp_path / "s"), backend=None, timeout=300))


def _faults(rank, world, path):
    import datetime
    import os
    import time

    dev = torch.device("neuron", torch.neuron.current_device())
    dist.init_process_group(
        "neuron",
        store=dist.FileStore(path, world),
        rank=rank,
        world_size=world,
        timeout=datetime.timedelta(seconds=4),
    )
    errors = {}
    # arguments a rank can check alone: the exception types NCCL raises
    t = torch.ones(4, device=dev)
    for name, call in {
        "root": lambda: dist.broadcast(t, src=world),
        "noncontiguous": lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t()),
        "list length": lambda: dist.all_gather([t], t),
        "into_tensor size": lambda: dist.all_gather_into_tensor(torch.empty(3, device=dev), t),
        "other device": lambda: dist.all_reduce(torch.ones(2, device=f"neuron:{(rank + 1) % 2}")),
    }.items():
        try:
            call()
            errors[name] = None
        except (ValueError, RuntimeError) as e:
            errors[name] = type(e).__name__
    # arguments that differ across ranks: every rank raises, nothing is
    # reduced, and the group stays usable (csrc/ccl checks every call)
    for name, call in {
        "count": lambda: dist.all_reduce(torch.ones(10 + 10 * rank, device=dev)),
        "dtype": lambda: dist.all_reduce(
            torch.ones(4, device=dev, dtype=torch.float32 if rank else torch.float64)
        ),
        "op": lambda: dist.all_reduce(
            torch.ones(4, device=dev), op=dist.ReduceOp.MAX if rank else dist.ReduceOp.SUM
        ),
        "collective": lambda: (
            dist.broadcast(torch.ones(4, device=dev), src=0)
            if rank
            else dist.all_reduce(torch.ones(4, device=dev))
        ),
    }.items():
        try:
            call()
            torch.neuron.synchronize()
            errors["mismatch " + name] = None
        except RuntimeError as e:
            errors["mismatch " + name] = str(e)
    # the group still works after those
    t = torch.full((3,), float(rank), device=dev)
    dist.all_reduce(t)
    assert t.cpu().tolist() == [float(sum(range(world)))] * 3
    # monitored_barrier names the rank that does not come
    if rank == 0:
        try:
            dist.monitored_barrier(timeout=datetime.timedelta(seconds=2))
            errors["monitored"] = None
        except RuntimeError as e:
            errors["monitored"] = str(e)
    dist.barrier()
    # a peer that exits mid-job: the survivor raises within the timeout
    if rank == 1:
        torch.neuron.synchronize()
        os._exit(0)  # no result; the parent expects it
    shm_before = sorted(os.listdir("/dev/shm"))
    start = time.monotonic()
    try:
        t = torch.ones(1000, device=dev)
        dist.all_reduce(t)
        t.cpu()
        errors["dead peer"] = None
    except RuntimeError as e:
        errors["dead peer"] = str(e)
    errors["dead peer seconds"] = time.monotonic() - start
    # (other processes' Python semaphores and torch CPU shared tensors aside)
    errors["shm left"] = sorted(
        n
        for n in set(os.listdir("/dev/shm")) - set(shm_before)
        if not n.startswith(("sem.mp-", "torch_"))
    )
    return errors


def test_bad_arguments_and_a_dead_peer_raise(tmp_path):
    out = run_ranks(_faults, 2, str(tmp_path / "s"), backend=None, expect_results={0}, timeout=120)
    e = out[0]
    assert e["root"] == "ValueError" and e["noncontiguous"] == "ValueError"
    assert e["list length"] == "ValueError" and e["into_tensor size"] == "ValueError"
    assert e["other device"] == "ValueError"
    for name in ("count", "dtype", "op", "collective"):
        assert "every rank must call" in (e["mismatch " + name] or ""), (name, e)
    assert "Rank 1 failed to pass monitoredBarrier" in e["monitored"]
    assert "timed out" in e["dead peer"] and "rank 1" in e["dead peer"], e["dead peer"]
    assert e["dead peer seconds"] < 30
    assert e["shm left"] == []


def _direct_path(rank, world):
    """Large collectives (above ccl's 256 KiB threshold; all_to_all: what the
    busiest rank receives) on device memory the
    peers read in place (the direct path) or, with shared device memory off,
    through the staged slots: the same results. Returns how many calls took
    the direct path and how many were made."""
    dev = torch.device("neuron", torch.neuron.current_device())
    backend = dist.group.WORLD._get_backend(dev)
    before, calls = backend._direct_calls(), 0
    n = 150_001  # no multiple of the rank count or of a vector
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        xs = [make(r, (n,), dtype, salt=7) for r in range(world)]
        for op in ("sum", "max", "avg"):
            t = xs[rank].to(dev)
            dist.all_reduce(t, op=OPS[op])
            close(t, expect_reduce(xs, OPS[op]), f"all_reduce {dtype} {op}")
            calls += 1
        out = torch.empty(n * world, dtype=dtype, device=dev)
        dist.all_gather_into_tensor(out, xs[rank].to(dev))
        close(out, torch.cat(xs), f"all_gather {dtype}")
        out = torch.zeros(n * world, dtype=dtype, device=dev)  # in place: a slice of out
        mine = out[rank * n : (rank + 1) * n]
        mine.copy_(xs[rank].to(dev))
        dist.all_gather_into_tensor(out, mine)
        close(out, torch.cat(xs), f"all_gather in place {dtype}")
        big = [make(r, (n * world,), dtype, salt=8) for r in range(world)]
        part = torch.empty(n, dtype=dtype, device=dev)
        dist.reduce_scatter_tensor(part, big[rank].to(dev), op=OPS["sum"])
        want = expect_reduce(big, OPS["sum"])[rank * n : (rank + 1) * n]
        close(part, want, f"reduce_scatter {dtype}")
        t = xs[rank].to(dev)
        dist.broadcast(t, src=world - 1)
        close(t, xs[world - 1], f"broadcast {dtype}")
        # uneven all_to_all: rank s sends (s + d + 1) * m elements to rank d
        m = 70_000  # the busiest receiver gets >= 256 KiB even in bf16
        sizes = [[(s + d + 1) * m for d in range(world)] for s in range(world)]
        ins = [make(r, (sum(sizes[r]),), dtype, salt=9) for r in range(world)]
        recv = [sizes[s][rank] for s in range(world)]
        out = torch.empty(sum(recv), dtype=dtype, device=dev)
        dist.all_to_all_single(out, ins[rank].to(dev), recv, sizes[rank])
        want = torch.cat([ins[s].split(sizes[s])[rank] for s in range(world)])
        close(out, want, f"all_to_all {dtype}")
        calls += 5
    torch.neuron.synchronize()
    return backend._direct_calls() - before, calls


@pytest.mark.parametrize("world,shared", [(2, None), (3, None), (2, "0")])
def test_large_collectives_read_peers_in_place(world, shared):
    env = {"TORCH_NEURONX_SHARED_DEVICE_MEMORY": shared} if shared else None
    results = run_ranks(_direct_path, world, env=env, timeout=300)
    for direct, calls in results:
        assert direct == (calls if shared is None else 0), results


def _random_collectives(rank, world, count):
    import random

    rng = random.Random(1234)  # the same choices on every rank
    dev = torch.device("neuron", torch.neuron.current_device())
    kinds = ["all_reduce", "broadcast", "all_gather", "reduce_scatter"]
    dtypes = [
        torch.float32,
        torch.bfloat16,
        torch.float16,
        torch.float64,
        torch.int32,
        torch.int64,
        torch.uint8,
    ]
    done = 0
    for i in range(count):
        kind, dtype, n = rng.choice(kinds), rng.choice(dtypes), rng.choice([1, 7, 64, 1000, 70_000])
        ops = ["sum", "min", "max", "avg"] + ([] if dtype.is_floating_point else ["band", "bxor"])
        op = OPS[rng.choice(ops)]
        xs = [
            make(r, (n * world if kind == "reduce_scatter" else n,), dtype, salt=i)
            for r in range(world)
        ]
        if kind == "all_reduce":
            t = xs[rank].to(dev)
            dist.all_reduce(t, op=op)
            expect = expect_reduce(xs, op)
        elif kind == "broadcast":
            root = rng.randrange(world)
            t = xs[rank].to(dev)
            dist.broadcast(t, src=root)
            expect = xs[root]
        elif kind == "all_gather":
            t = torch.empty(n * world, dtype=dtype, device=dev)
            dist.all_gather_into_tensor(t, xs[rank].to(dev))
            expect = torch.cat(xs)
        else:
            t = torch.empty(n, dtype=dtype, device=dev)
            dist.reduce_scatter_tensor(t, xs[rank].to(dev), op=op)
            expect = expect_reduce(xs, op)[rank * n : (rank + 1) * n]
        close(t, expect, f"#{i} {kind} {dtype} n={n} op={op}")
        done += 1
    return done


def test_a_thousand_random_collectives_match_cpu():
    assert run_ranks(_random_collectives, 2, 1000, timeout=400) == [1000, 1000]
