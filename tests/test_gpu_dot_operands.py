"""The attention-backward pattern of tests/kernels_dot_operands.py on the GPU after fold-dot-add,
hoist/dedupe-operand-stores, pipeline-operand-loads, register-a-operand, share-operand-buffers,
hoist-conversions and load-in-use-layout: poisoned outputs, float64 references, loops shorter
than the ring (2 to 5 stages) and long ones."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import kernels_dot_operands as K

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n_rows, num_stages", [(64, 2), (192, 3), (1024, 5)])
def test_kv_grad_matches_float64(n_rows, num_stages):
    d, bn = 64, 128
    gen = torch.Generator().manual_seed(n_rows)
    k, v = ((torch.randn(bn * 3, d, generator=gen) * 0.3).half().cuda() for _ in range(2))
    q, g = ((torch.randn(n_rows, d, generator=gen) * 0.3).half().cuda() for _ in range(2))
    dk = torch.full((bn * 3, d), float("nan"), device="cuda")
    dv = torch.full((bn * 3, d), float("nan"), device="cuda")
    K.kv_grad[(3,)](k, v, q, g, dk, dv, n_rows, BN=bn, BM1=16, BM2=32, D=d, num_warps=4, num_stages=num_stages)
    torch.cuda.synchronize()
    kd, vd, qd, gd = (x.double() for x in (k, v, q, g))
    p = torch.exp2(kd @ qd.T * 0.05)
    ref_dv = p.half().double() @ gd
    ref_dk = (p * (vd @ gd.T)).half().double() @ qd
    for got, ref in ((dk, ref_dk), (dv, ref_dv)):
        assert not got.isnan().any()
        assert ((got.double() - ref).norm() / ref.norm()).item() < 2e-3


@pytest.mark.parametrize("n", [32, 96, 2048])
def test_row_bias_loop_matches_float64(n):
    gen = torch.Generator().manual_seed(n)
    k = (torch.randn(128, 64, generator=gen) * 0.2).half().cuda()
    q = (torch.randn(n, 64, generator=gen) * 0.2).half().cuda()
    m, r = torch.randn(n, generator=gen).cuda(), torch.randn(128, generator=gen).cuda()
    out = torch.full((128, 32), float("nan"), device="cuda")
    K.row_bias_loop[(1,)](k, q, m, r, out, n, BN=128, BM=32, D=64, num_warps=4)
    torch.cuda.synchronize()
    s = k.double() @ q.double().T
    ref = sum(torch.exp2(s[:, j:j + 32] - m.double()[j:j + 32][None, :] + r.double()[:, None])
              for j in range(0, n, 32))
    assert not out.isnan().any()
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-3
