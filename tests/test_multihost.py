"""torchrun across two hosts: two network namespaces of this machine joined
by a veth pair, each a "host" with two ranks (the test runs as root and
makes them; iproute2 is installed by scripts/run_tests.sh). Inside each
host the ranks use the shared-memory collectives, between the hosts Gloo
over TCP between the host leaders. Where namespaces cannot be made, the
same two torchrun invocations run on 127.0.0.1 with TORCH_NEURONX_HOST_ID
telling the ranks they are on different hosts, so the path between hosts
still runs. DDP's parameters after training must equal single-process CPU
training (tests/scripts/ddp_train.py checks it)."""

import os
import random
import subprocess
import sys

import pytest

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


def run_two_hosts(prefix, master, extra_env):
    port = str(random.randint(20000, 40000))
    procs = []
    import tempfile

    from test_launchers import read_results

    results_dir = tempfile.mkdtemp(prefix="tn-hosts-")
    env = dict(os.environ)
    env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
    env["OMP_NUM_THREADS"] = "1"
    env["DDP_TRAIN_RESULTS"] = results_dir
    try:
        for node in range(2):
            cmd = prefix[node] + [
                sys.executable, "-m", "torch.distributed.run", "--nnodes", "2",
                "--node-rank", str(node), "--nproc-per-node", "2", "--master-addr", master,
                "--master-port", port, SCRIPT, "torchrun",
            ]  # fmt: skip
            e = dict(env, **extra_env[node])
            procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    env=e,
                    start_new_session=True,
                )  # fmt: skip
            )
        outs = []
        for p in procs:
            out, _ = p.communicate(timeout=300)
            outs.append(out)
            assert p.returncode == 0, out[-6000:]
        return read_results(results_dir)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait(timeout=30)


def test_torchrun_two_hosts_ddp_matches_cpu():
    tag = str(os.getpid() % 100000)
    made, why = make_namespaces(tag) if os.geteuid() == 0 else (None, "not root")
    if made:
        ns, addr, veth = made
        try:
            results = run_two_hosts(
                [["ip", "netns", "exec", ns[0]], ["ip", "netns", "exec", ns[1]]],
                addr[0],
                [{"GLOO_SOCKET_IFNAME": veth[0]}, {"GLOO_SOCKET_IFNAME": veth[1]}],
            )
        finally:
            drop_namespaces(ns)
    else:
        print(f"network namespaces unavailable ({why}): hosts told apart by TORCH_NEURONX_HOST_ID")
        results = run_two_hosts(
            [[], []],
            "127.0.0.1",
            [{"TORCH_NEURONX_HOST_ID": "A", "GLOO_SOCKET_IFNAME": "lo"},
             {"TORCH_NEURONX_HOST_ID": "B", "GLOO_SOCKET_IFNAME": "lo"}],
        )  # fmt: skip
    assert len(results) == 4, results
    for r in results:
        assert r["world"] == 4 and r["device"] == f"neuron:{r['local_rank']}", r
        assert r["max_param_diff"] < 1e-5, r


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
