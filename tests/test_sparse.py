"""Sparse COO tensors for the common training case: nn.Embedding(sparse=True)
trained with SGD and SparseAdam, matching CPU, with no CPU fallback."""

import pytest
import torch
from conftest import assert_same

N = "neuron"


def _coo(dev):
    i = torch.tensor([[0, 2, 0, 3, 2], [1, 0, 1, 2, 0]])
    v = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])
    return torch.sparse_coo_tensor(i, v, (4, 3, 2)).to(dev)


def test_coalesce_to_dense_and_arithmetic(no_fallback):
    s_cpu, s_n = _coo("cpu"), _coo(N)
    assert s_n.is_sparse and s_n.device.type == "neuron" and not s_n.is_coalesced()
    c_cpu, c_n = s_cpu.coalesce(), s_n.coalesce()
    assert c_n.is_coalesced() and c_n._nnz() == c_cpu._nnz() == 3
    assert_same(c_n._indices(), c_cpu._indices())
    assert_same(c_n._values(), c_cpu._values())
    assert_same(s_n.to_dense(), s_cpu.to_dense())
    d = torch.randn(4, 3, 2)
    assert_same(d.to(N) + s_n, d + s_cpu)
    assert_same(torch.add(d.to(N), s_n, alpha=-0.5), torch.add(d, s_cpu, alpha=-0.5))
    assert_same((s_n + s_n).to_dense(), (s_cpu + s_cpu).to_dense())
    assert_same((s_n * 3).to_dense(), (s_cpu * 3).to_dense())
    m_cpu, m_n = d.sparse_mask(c_cpu), d.to(N).sparse_mask(c_n)
    assert_same(m_n._values(), m_cpu._values())
    assert_same(m_n.to_dense(), m_cpu.to_dense())
    e = torch.sparse_coo_tensor(torch.zeros(2, 0, dtype=torch.long), torch.zeros(0, 2), (4, 3, 2))
    assert_same(e.to(N).coalesce().to_dense(), e.coalesce().to_dense())


@pytest.mark.parametrize("opt", ["SGD", "SparseAdam"])
def test_sparse_embedding_training_matches_cpu(no_fallback, opt):
    weights = {}
    for dev in ("cpu", N):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(50, 8, sparse=True, padding_idx=0).to(dev)
        o = getattr(torch.optim, opt)(emb.parameters(), lr=0.05)
        for step in range(4):
            idx = (torch.tensor([[1, 3, 3, 7, 0], [9, 1, 0, 49, 3]], device=dev) + step) % 50
            loss = emb(idx).pow(2).sum()
            o.zero_grad()
            loss.backward()
            assert emb.weight.grad.is_sparse
            o.step()
        weights[dev] = emb.weight.detach()
    assert_same(weights[N], weights["cpu"], atol=1e-6, rtol=1e-5)


def test_sparse_gradients_accumulate():
    grads = {}
    for dev in ("cpu", N):
        torch.manual_seed(0)
        emb = torch.nn.Embedding(10, 4, sparse=True).to(dev)
        for idx in ([1, 2, 2], [2, 5]):
            emb(torch.tensor(idx, device=dev)).sum().backward()  # grad += grad
        grads[dev] = emb.weight.grad.to_dense()
    assert_same(grads[N], grads["cpu"])
