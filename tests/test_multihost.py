"""torchrun across two hosts: two network namespaces of this machine joined
by a veth pair, each a "host" with two ranks (the test runs as root and
makes them; iproute2 is installed by scripts/run_tests.sh). Inside each
host the ranks use the shared-memory collectives, between the hosts Gloo
over TCP between the host leaders. Where namespaces cannot be made, the
same two torchrun invocations run on 127.0.0.1 with TORCH_NEURONX_HOST_ID
telling the ranks they are on different hosts, so the path between hosts
still runs. DDP's parameters after training must equal single-process CPU
training (tests/scripts/ddp_train.py checks it), and so must FSDP2's
(fully_shard over the 4 ranks: all-gather and reduce-scatter between
hosts), with each step's loss."""

import os
import random
import subprocess
import sys

import pytest
from distributed_util import launcher_env, run_commands
from test_launchers import read_results

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "scripts", "ddp_train.py")


def sh(*cmd):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30)


def make_namespaces(tag):
    """Two namespaces and a veth pair; returns (names, addresses, ifnames) or
    None where this machine does not allow it."""
    ns = [f"tn{tag}a", f"tn{tag}b"]
    veth = [f"tv{tag}a", f"tv{tag}b"]
    addr = ["10.231.77.1", "10.231.77.2"]
    steps = [
        ("ip", "netns", "add", ns[0]),
        ("ip", "netns", "add", ns[1]),
        ("ip", "link", "add", veth[0], "type", "veth", "peer", "name", veth[1]),
    ]
    for i in range(2):
        steps += [
            ("ip", "link", "set", veth[i], "netns", ns[i]),
            ("ip", "-n", ns[i], "addr", "add", f"{addr[i]}/24", "dev", veth[i]),
            ("ip", "-n", ns[i], "link", "set", veth[i], "up"),
            ("ip", "-n", ns[i], "link", "set", "lo", "up"),
        ]
    for step in steps:
        r = sh(*step)
        if r.returncode != 0:
            drop_namespaces(ns)
            return None, r.stderr.strip()
    return (ns, addr, veth), ""


def drop_namespaces(ns):
    for n in ns:
        sh("ip", "netns", "del", n)  # deletes its end of the veth pair too


def run_two_hosts(prefix, master, extra_env, mode):
    """Two torchrun invocations, one a host, 2 ranks each, running
    tests/scripts/ddp_train.py <mode>; returns the 4 ranks' results."""
    import tempfile

    results_dir = tempfile.mkdtemp(prefix="tn-hosts-")
    port = str(random.randint(20000, 40000))
    cmds = [
        prefix[node] + [
            sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
            "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr", master,
            "--master-port", port, SCRIPT, mode,
        ]
        for node in range(2)
    ]  # fmt: skip
    envs = [launcher_env(DDP_TRAIN_RESULTS=results_dir, **extra_env[node]) for node in range(2)]
    run_commands(cmds, timeout=300, envs=envs)
    return read_results(results_dir)


def with_host_ids(mode):
    """Both hosts on 127.0.0.1, told apart by TORCH_NEURONX_HOST_ID."""
    return run_two_hosts(
        [[], []],
        "127.0.0.1",
        [{"TORCH_NEURONX_HOST_ID": "A", "GLOO_SOCKET_IFNAME": "lo"},
         {"TORCH_NEURONX_HOST_ID": "B", "GLOO_SOCKET_IFNAME": "lo"}],
        mode,
    )  # fmt: skip


def with_namespaces(mode):
    """Each host a network namespace (as root), or, where they cannot be
    made, with_host_ids."""
    tag = str(os.getpid() % 100000)
    made, why = make_namespaces(tag) if os.geteuid() == 0 else (None, "not root")
    if not made:
        print(f"network namespaces unavailable ({why}): hosts told apart by TORCH_NEURONX_HOST_ID")
        return with_host_ids(mode), False
    ns, addr, veth = made
    try:
        return run_two_hosts(
            [["ip", "netns", "exec", ns[0]], ["ip", "netns", "exec", ns[1]]],
            addr[0],
            [{"GLOO_SOCKET_IFNAME": veth[0]}, {"GLOO_SOCKET_IFNAME": veth[1]}],
            mode,
        ), True
    finally:
        drop_namespaces(ns)


def check(results, namespaces):
    assert len(results) == 4, results
    hosts = [r["host"] for r in results]  # sorted by local rank: 0, 0, 1, 1
    assert len(set(hosts)) == 2 and sorted(hosts.count(h) for h in hosts) == [2] * 4, hosts
    if namespaces:
        assert all("net:[" in h for h in hosts), hosts
    else:
        assert set(hosts) == {"A", "B"}, hosts
    for r in results:
        assert r["world"] == 4 and r["device"] == f"neuron:{r['local_rank']}", r
        assert r["max_param_diff"] < 1e-5, r


def check_fsdp2(results):
    """Sharded over the 4 ranks: 16 rows split 4 a rank, the last weight's 2
    rows 1, 1, 0, 0; each step's global loss is the CPU oracle's."""
    shapes = {}
    for r in results:
        assert r["dtensors"] and r["shard_devices"] == [r["device"]], r
        shapes.setdefault(r["host"], []).append(r["local_shapes"])
        assert len(r["losses"]) == len(r["ref_losses"]) == 3, r
        for a, b in zip(r["losses"], r["ref_losses"], strict=True):
            assert abs(a - b) <= 1e-6 + 1e-5 * abs(b), r
    rows = sorted(s[2][0] for per_host in shapes.values() for s in per_host)
    assert rows == [0, 0, 1, 1], shapes
    assert all(s[0] == [4, 8] for per_host in shapes.values() for s in per_host), shapes


@pytest.mark.parametrize("mode", ["torchrun", "fsdp2"])
def test_torchrun_two_hosts_matches_cpu(mode):
    """DDP (`torchrun`) and FSDP2 between two network namespaces."""
    results, namespaces = with_namespaces(mode)
    check(results, namespaces)
    if mode == "fsdp2":
        check_fsdp2(results)


@pytest.mark.parametrize("mode", ["torchrun", "fsdp2"])
def test_torchrun_host_id_as_two_hosts_matches_cpu(mode):
    """DDP and FSDP2 with TORCH_NEURONX_HOST_ID making the ranks of one
    machine two hosts (run even where namespaces can be made)."""
    results = with_host_ids(mode)
    check(results, False)
    if mode == "fsdp2":
        check_fsdp2(results)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
