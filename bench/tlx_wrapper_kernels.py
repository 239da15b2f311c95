"""A kernel launched the way TLX's Hopper GEMM tutorials launch theirs, for
``bench/tlx_wrapper_host_probe.py``: three TMA descriptors built with a placeholder
box on every call, an autotuner whose config ``pre_hook`` sets the boxes, a grid
callable.  The body only copies one tile (the probe times the host path)."""
import tlxc
import tlxc.language as tl
import tlxc.language.tlx as tlx


def set_boxes(nargs):
    """The tutorials' pre_hook: the descriptors' boxes follow the config."""
    nargs["a_desc"].block_shape = [nargs["BM"], nargs["BK"]]
    nargs["b_desc"].block_shape = [nargs["BK"], nargs["BN"]]
    if nargs.get("EPILOGUE_SUBTILE", False):
        nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"] // 2]
    else:
        nargs["c_desc"].block_shape = [nargs["BM"], nargs["BN"]]


CONFIGS = [tlxc.Config({"BM": 128, "BN": 128, "BK": 64, "EPILOGUE_SUBTILE": sub}, num_warps=4, num_stages=0,
                       pre_hook=set_boxes) for sub in (True, False)]


@tlxc.autotune(configs=CONFIGS, key=["M", "N", "K"], use_cuda_graph=True)
@tlxc.jit
def copy_tile(a_desc, b_desc, c_desc, M, N, K, NUM_SMS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
              BK: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr):
    pid = tl.program_id(0)
    if pid < NUM_SMS:
        rows = tl.sum(a_desc.load([pid * BM, 0]).to(tl.float32), axis=1)[:, None]
        if EPILOGUE_SUBTILE:
            c_desc.store([pid * BM, 0], (rows + tl.zeros([BM, BN // 2], tl.float32)).to(tlx.dtype_of(c_desc)))
        else:
            c_desc.store([pid * BM, 0], (rows + tl.zeros([BM, BN], tl.float32)).to(tlx.dtype_of(c_desc)))
