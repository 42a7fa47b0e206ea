"""Device registration, torch.neuron basics, torch.accelerator, packaging."""

import os

import torch
from conftest import run_python


def test_registered_as_neuron():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.neuron.is_available()
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.is_available()


def test_default_model_is_one_trn2_chip():
    assert torch.neuron.device_count() == 4
    p = torch.neuron.get_device_properties(0)
    assert p.modelled_memory == 24 * 2**30  # 96 GiB of HBM shared by 4 logical cores
    # ... as far as the host can back it (software device memory is host memory)
    import os

    host = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert 0 < p.total_memory <= p.modelled_memory and p.total_memory <= host
    assert p.generation == 2 and p.instance_model == "trn2"
    assert "trn2" in torch.neuron.get_device_name(3)
    assert torch.neuron.get_device_properties(3).global_core_id == 3


def test_set_device_and_context():
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    t = torch.empty(2, device="neuron")
    assert t.device == torch.device("neuron:1")
    with torch.neuron.device(2):
        assert torch.neuron.current_device() == 2
        assert torch.empty(1, device="neuron").device.index == 2
    assert torch.neuron.current_device() == 1
    torch.accelerator.set_device_index(3)
    assert torch.neuron.current_device() == 3
    with torch.neuron.device_of(torch.empty(1, device="neuron:2")):
        assert torch.neuron.current_device() == 2


def test_generated_methods():
    t = torch.arange(6.0).reshape(2, 3)
    n = t.neuron()
    assert n.is_neuron and not t.is_neuron
    assert n.device == torch.device("neuron:0")
    assert torch.equal(n.cpu(), t)
    m = torch.nn.Linear(3, 2).neuron()
    assert all(p.is_neuron for p in m.parameters())
    s = torch.UntypedStorage(8).neuron()
    assert s.device.type == "neuron" and s.is_neuron
    assert t.to("neuron:1").device.index == 1


def test_visible_cores_and_trn3_model():
    r = run_python(
        "import torch; p = torch.neuron.get_device_properties(1);"
        "print(torch.neuron.device_count(), p.global_core_id, p.generation, p.modelled_memory >> 30)",
        {"NEURON_RT_VISIBLE_CORES": "1-2", "TORCH_NEURONX_INSTANCE": "trn3"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["2", "2", "3", "36"]
    r = run_python("import torch; print(torch.neuron.device_count())", {"NEURON_RT_NUM_CORES": "1"})
    assert r.stdout.strip() == "1"


def test_bad_visible_cores_is_a_clear_error():
    r = run_python(
        "import torch\ntry:\n  torch.empty(1, device='neuron')\nexcept RuntimeError as e: print('ERR', e)",
        {"NEURON_RT_VISIBLE_CORES": "0-9"},
    )
    assert r.returncode == 0, r.stderr
    assert "NEURON_RT_VISIBLE_CORES" in r.stdout and "ERR" in r.stdout


def test_autoload_by_import_torch_and_opt_out():
    r = run_python(
        "import torch; print(torch.neuron.is_available(), torch.ones(1, device='neuron').device)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "neuron:0"]
    r = run_python(
        "import torch, sys; print(hasattr(torch, 'neuron'), 'torch_neuronx' in sys.modules);"
        "import torch_neuronx; print(torch.neuron.device_count())",
        {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "False", "4"]


def test_distribution_metadata():
    from importlib.metadata import entry_points, version

    assert version("torch-neuronx")
    eps = [e for e in entry_points(group="torch.backends") if e.name == "torch_neuronx"]
    assert eps and eps[0].value == "torch_neuronx:_autoload"


def test_amp_and_bf16_queries():
    assert torch.neuron.is_bf16_supported()
    assert torch.bfloat16 in torch.neuron.get_amp_supported_dtype()
    assert torch.amp.is_autocast_available("neuron")


def test_info_tool_runs():
    r = run_python("import runpy; runpy.run_module('torch_neuronx.info', run_name='__main__')")
    assert r.returncode == 0, r.stderr
    assert "neuron:0" in r.stdout and "trn2" in r.stdout and "kernel ISA" in r.stdout
    assert "c10d backend 'neuron' registered for neuron, cpu" in r.stdout, r.stdout


def test_info_tool_shows_the_rank_device_and_core_share():
    r = run_python(
        "import runpy; runpy.run_module('torch_neuronx.info', run_name='__main__')",
        {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "TORCH_NEURONX_HOST_ID": "hostA"},
    )
    assert r.returncode == 0, r.stderr
    assert "host id 'hostA', LOCAL_RANK=1 -> current device neuron:1" in r.stdout, r.stdout
    assert "host thread pool: 1 threads" in r.stdout or os.cpu_count() != 2, r.stdout


def test_thread_pool_size_is_overridable():
    r = run_python(
        "import torch_neuronx; print(torch_neuronx._C._num_threads())",
        {"TORCH_NEURONX_NUM_THREADS": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "1"


def test_torch_accelerator_end_to_end():
    torch.accelerator.set_device_index(1)
    x = torch.ones(1000, device=torch.accelerator.current_accelerator())
    assert x.device == torch.device("neuron:1")
    s = torch.accelerator.current_stream()
    assert s.device == torch.device("neuron:1")
    y = x * 2
    torch.accelerator.synchronize()
    assert torch.neuron.current_stream(1).query()
    assert torch.accelerator.memory_allocated(1) == torch.neuron.memory_allocated(1) > 0
    assert y.sum().item() == 2000
    torch.accelerator.set_device_index(0)


def test_device_from_pointer():
    x = torch.arange(8.0, device="neuron:2")
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    # from_blob on a device pointer resolves the device through the hooks
    y = torch.utils.dlpack.from_dlpack(torch.utils.dlpack.to_dlpack(x[2:]))
    assert y.device == torch.device("neuron:2") and y[0].item() == 2.0


def test_module_to_keeps_parameters_and_tied_weights():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight  # tied, as in GPT-2 style language models
    model = torch.nn.ModuleList([emb, head])
    before = emb.weight
    model.to("neuron")
    assert head.weight is emb.weight is before  # same Parameter object, moved
    assert before.device.type == "neuron"
    model.to("neuron:1")
    assert head.weight is emb.weight and emb.weight.device.index == 1
    model.cpu()
    assert head.weight is emb.weight and emb.weight.device.type == "cpu"
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1, device="neuron"))


PLACEMENT = (
    "import os, torch\n"
    "x = torch.ones(64, 64, device='neuron'); (x @ x).sum().item()\n"
    "for t in sorted(os.listdir('/proc/self/task')):\n"
    "    name = open(f'/proc/self/task/{t}/comm').read().strip()\n"
    "    if name.startswith('neuron-'):\n"
    "        print(name, sorted(os.sched_getaffinity(int(t))))\n"
)


def test_host_threads_are_named_and_placed():
    """Pool helpers and queue workers carry names; with one pool thread per
    usable CPU, helper i runs on the i-th CPU and queue workers on the first;
    TORCH_NEURONX_PIN_THREADS=0 leaves them free."""
    import os

    cpus = sorted(os.sched_getaffinity(0))
    r = run_python(PLACEMENT)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    names = [ln.split(" ", 1)[0] for ln in lines]
    assert "neuron-queue" in names
    assert names.count("neuron-pool") == len(cpus) - 1
    if len(cpus) > 1:
        pool = sorted(ln.split(" ", 1)[1] for ln in lines if ln.startswith("neuron-pool"))
        assert pool == sorted(str([c]) for c in cpus[1:])
        assert all(
            ln.split(" ", 1)[1] == str([cpus[0]]) for ln in lines if ln.startswith("neuron-queue")
        )
    free = run_python(PLACEMENT, {"TORCH_NEURONX_PIN_THREADS": "0"})
    assert free.returncode == 0, free.stderr
    assert all(ln.split(" ", 1)[1] == str(cpus) for ln in free.stdout.splitlines())
    fewer = run_python(PLACEMENT, {"TORCH_NEURONX_NUM_THREADS": "1"})  # not one per CPU
    assert all(ln.split(" ", 1)[1] == str(cpus) for ln in fewer.stdout.splitlines())
