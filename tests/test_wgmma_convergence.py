"""Two codegen rules that keep ptxas (13.x) from serializing the wgmmas of warp-specialized
kernels (its note C7519, "program dependence on compiler-inserted WG.AR in divergent path"):

- a loop that issues wgmma starts each iteration with ``__syncwarp()``
  (codegen_c/rules_control.py ``_issues_wgmma``): a persistent tile loop whose back edge
  carries single-thread arrives, TMA stores and barrier try-wait loops was serialized;
- an MMA with A in registers packs and pins its four A registers before a ``wgmma.fence`` of
  its own (codegen_nvptx/rules_mma_async.py ``_pinned``), not after one fence for all k steps.

Kernels: tests/kernels_wgmma_convergence.py (the shapes of TLX's cooperative persistent GEMM
and of its two-group attention). The interpreter runs them against torch; the GPU test runs the
compiled kernels."""
from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")
import kernels_wgmma_convergence as W

import tlxc
import tlxc.codegen_c.rules_control as rules_control
from tlxc.codegen_nvptx.toolchain import compile_cuda

TILES_SIG = ("a_desc=tensordesc<fp16[128, 64]>,b_desc=tensordesc<fp16[64, 128]>,c_desc=tensordesc<fp16[128, 128]>,"
             "M=i32,N=i32,K=i32")
TILES_META = {"PROGRAMS": 132, "BM": 128, "BN": 128, "BK": 64, "STAGES": 3}
ATTN_SIG = ("q_desc=tensordesc<fp16[64, 128]>,k_desc=tensordesc<fp16[128, 128]>,v_desc=tensordesc<fp16[128, 128]>,"
            "o_desc=tensordesc<fp16[64, 128]>,n_keys=i32,scale=fp32")
ATTN_META = {"BM": 64, "BN": 128, "D": 128}
SYNC_LINE = "__syncwarp();  // converged warps at the top of a loop that issues wgmma"


def _nvrtc():
    try:
        from tlxc.codegen_nvptx.toolchain import nvrtc_version
        nvrtc_version()
    except Exception as exc:        # no NVRTC wheel: nothing to compile with
        pytest.skip(f"NVRTC is not available ({exc})")


def _cuda(kfn, sig, meta, arch="sm_90a") -> str:
    return kfn.compile(sig, meta, num_warps=4, arch=arch, stages=("cuda",)).asm["cuda"]


def _loop_bodies(cuda: str) -> list[tuple[str, str]]:
    """(header, first statement) of every runtime ``for`` loop (not the unrolled register loops)."""
    lines = cuda.splitlines()
    found = []
    for i, line in enumerate(lines):
        if re.match(r"\s*for \(int \w+ = \w+; \w+ < \w+; \w+ \+= \w+\) \{$", line) and "int i =" not in line:
            found.append((line.strip(), lines[i + 1].strip()))
    return found


# -- the generated code ----------------------------------------------------------------------
def test_only_loops_that_issue_wgmma_start_with_a_warp_sync():
    cuda = _cuda(W.persistent_tiles, TILES_SIG, TILES_META)
    loops = _loop_bodies(cuda)
    synced = [head for head, first in loops if first.startswith(SYNC_LINE)]
    # each replica's tile loop and K loop; not the loader's two loops
    assert len(loops) == 6 and len(synced) == 4, loops
    assert cuda.count(SYNC_LINE) == 4


def test_no_warp_sync_off_hopper():
    # wgmma is sm_90a's; on sm_100a an async_dot is tcgen05 and no loop gets the sync
    class Target:
        arch = "sm_100a"

    class Lowering:
        target = Target()

    assert rules_control._issues_wgmma(Lowering(), None) is False


def test_register_a_fragments_are_packed_before_each_fence():
    cuda = _cuda(W.scores_then_values, ATTN_SIG, ATTN_META).splitlines()
    calls = [i for i, line in enumerate(cuda) if "_rs<" in line]
    assert len(calls) == 16, "two replicas x 8 k steps of one m64 tile"
    for i in calls:
        # unsigned afragN[4] = {...}; the pin; the fence; the MMA on afragN
        name = re.match(r"\s*unsigned (afrag\w*)\[4\] = \{.*0xFFFFu.*\};$", cuda[i - 3]).group(1)
        assert cuda[i - 2].strip() == f"tlx_pin_registers<4>({name});"
        assert cuda[i - 1].strip() == "tlx_wgmma_fence();"
        assert "0xFFFFu" not in cuda[i]                     # nothing packed between the fence and the MMA
        assert all(f"{name}[{k}]" in cuda[i] for k in range(4))


# -- ptxas ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kfn,sig,meta", [(W.persistent_tiles, TILES_SIG, TILES_META),
                                          (W.scores_then_values, ATTN_SIG, ATTN_META)])
def test_ptxas_does_not_serialize(kfn, sig, meta):
    _nvrtc()
    compiled = kfn.compile(sig, meta, num_warps=4, stages=("cuda", "cubin"))
    assert compiled.metadata["wgmma_serialized"] is None, compiled.metadata["ptxas_log"]
    assert compiled.metadata["spills_bytes"] == 0, compiled.metadata["ptxas_log"]


def test_ptxas_serializes_the_tile_loop_without_the_warp_sync_and_the_uniform_warp(monkeypatch):
    """The rule's reason, as ptxas 13.x behaves: without the sync, and with the warp index
    taken from ``tid >> 5`` (not warp-uniform to ptxas), the same kernel is serialized.
    (If a later ptxas stops doing so, this test says the rule may be dropped.)"""
    _nvrtc()
    monkeypatch.setattr(rules_control, "_issues_wgmma", lambda lw, op: False)
    source = W.persistent_tiles.compile(TILES_SIG, TILES_META, num_warps=4, stages=("cuda",)).asm["cuda"]
    uniform = "const int warp = __shfl_sync(0xffffffffu, tid >> 5, 0);"
    assert uniform in source
    name = re.search(r"__global__ void (?:__launch_bounds__\(\d+(?:, \d+)?\) )?(\w+)\(", source).group(1)
    built = compile_cuda(source.replace(uniform, "const int warp = tid >> 5;"), "sm_90a", [name])
    # ptxas 13.5 says C7519 (warpgroup.arrive injected), 13.0 (the H200 machine's) C7520 (WG.AR in a divergent path)
    assert "wgmma.mma_async instructions are serialized" in built.log, built.log


def test_the_uniform_warp_index_alone_keeps_the_tile_loop_unserialized(monkeypatch):
    """``warp`` from a shuffle of lane 0 lets ptxas prove the warps converged at the wgmma
    even without the loop's ``__syncwarp`` (and keeps descriptors in uniform registers)."""
    _nvrtc()
    monkeypatch.setattr(rules_control, "_issues_wgmma", lambda lw, op: False)
    compiled = W.persistent_tiles.compile(TILES_SIG, TILES_META, num_warps=4, stages=("cuda", "cubin"))
    assert compiled.metadata["wgmma_serialized"] is None, compiled.metadata["ptxas_log"]


# -- results: interpreter (CPU) and GPU -----------------------------------------------------------
def _tiles_case(device, m, n, k, programs):
    torch.manual_seed(1)
    a = torch.randn(m, k, dtype=torch.float16, device=device)
    b = torch.randn(k, n, dtype=torch.float16, device=device)
    c = torch.full((m, n), float("nan"), dtype=torch.float16, device=device)
    TD = tlxc.TensorDescriptor
    args = (TD.from_tensor(a, [128, 64]), TD.from_tensor(b, [64, 128]), TD.from_tensor(c, [128, 128]), m, n, k)
    W.persistent_tiles[(programs,)](*args, PROGRAMS=programs, BM=128, BN=128, BK=64, STAGES=3, num_warps=4)
    ref = a.double() @ b.double()
    err = (c.double() - ref).abs().max().item() / ref.abs().max().item()
    assert err < 2e-3, err


def _attn_case(device, n_keys):
    torch.manual_seed(2)
    q = torch.randn(128, 128, dtype=torch.float16, device=device)
    k = torch.randn(n_keys, 128, dtype=torch.float16, device=device)
    v = torch.randn(n_keys, 128, dtype=torch.float16, device=device)
    o = torch.full((128, 128), float("nan"), dtype=torch.float16, device=device)
    scale = 0.08
    TD = tlxc.TensorDescriptor
    W.scores_then_values[(1,)](TD.from_tensor(q, [64, 128]), TD.from_tensor(k, [128, 128]),
                               TD.from_tensor(v, [128, 128]), TD.from_tensor(o, [64, 128]), n_keys, scale,
                               BM=64, BN=128, D=128, num_warps=4)
    ref = torch.softmax(q.double() @ k.double().T * scale, -1) @ v.double()
    err = (o.double() - ref).abs().max().item() / ref.abs().max().item()
    assert err < 5e-3, err


def test_interpreter_persistent_tiles():
    # 3 x 2 tiles of 256 x 128 (the last row and column partial) walked by 2 programs
    _tiles_case("cpu", 640, 200, 192, 2)


def test_interpreter_scores_then_values():
    _attn_case("cpu", 384)


@pytest.mark.gpu
def test_gpu_persistent_tiles():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    _tiles_case("cuda", 2048 + 256, 1000, 1024 + 64, 7)


@pytest.mark.gpu
def test_gpu_scores_then_values():
    if not torch.cuda.is_available():
        pytest.skip("no GPU")
    _attn_case("cuda", 128 * 9)
