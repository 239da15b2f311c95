"""The AMD launch path: HIP text -> hipRTC -> code object -> hipModuleLoadData -> hipModuleLaunchKernel,
through hip-python (``pip install "hip-python~=<ROCm major.minor.patch>.0"``).

Unverified: no ROCm and no AMD GPU were available where this was written (README, status).
What is tested on the CPU: the argument packing (one ``ctypes.Structure`` whose fields mirror the
kernel's parameters, checked against the kernarg layout the compiler writes into the code
object's metadata) and the sequence of hip-python calls (against a stand-in module).

hip-python imports without ROCm and raises ``RuntimeError`` ("failed to dlopen libamdhip64.so")
at its first call; ``hip_modules()`` turns that into a ``LaunchError``.

    kernel = HipKernel.from_compiled(compiled)          # compile_kernel(..., arch="gfx942", stages=("hip", "hsaco"))
    kernel.launch(grid, out, x, n, stream=torch.cuda.current_stream().cuda_stream)
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import LaunchError

# The C type of each launcher kind (codegen_amdgcn/hip.py: param_kind): natural C alignment,
# which is how clang lays out the kernarg segment of by-value and global-buffer arguments.
KIND_CTYPES = {"u64": ctypes.c_uint64, "i64": ctypes.c_int64, "i32": ctypes.c_int32, "u32": ctypes.c_uint32,
               "f32": ctypes.c_float, "f64": ctypes.c_double}


def argument_struct(kinds: Sequence[str]) -> type[ctypes.Structure]:
    """The ``ctypes.Structure`` type whose fields are the kernel's parameters, in order."""
    try:
        fields = [(f"a{i}", KIND_CTYPES[k]) for i, k in enumerate(kinds)]
    except KeyError as exc:
        raise LaunchError(f"no HIP argument kind {exc.args[0]!r}") from None
    return type("TlxcHipArgs", (ctypes.Structure,), {"_fields_": fields})


def pack_arguments(kinds: Sequence[str], values: Sequence[Any]) -> ctypes.Structure:
    """The packed arguments: a tensor by its ``data_ptr()``, a number as its kind's C type."""
    if len(kinds) != len(values):
        raise LaunchError(f"the kernel takes {len(kinds)} runtime arguments, got {len(values)}")
    struct = argument_struct(kinds)()
    for i, (kind, value) in enumerate(zip(kinds, values)):
        data_ptr = getattr(value, "data_ptr", None)
        if callable(data_ptr):
            if kind != "u64":
                raise LaunchError(f"argument {i} is a tensor where the kernel takes a {kind} scalar")
            value = value.data_ptr()
        elif value is None:
            value = 0
        elif isinstance(value, bool):
            value = int(value)
        if kind in ("f32", "f64"):
            value = float(value)
        elif not isinstance(value, int):
            raise LaunchError(f"argument {i} ({type(value).__name__}) is not a {kind}")
        setattr(struct, f"a{i}", value)
    return struct


def layout_of(struct_type: type[ctypes.Structure]) -> list[tuple[int, int]]:
    """(offset, size) of every field: what the code object's metadata must list for the kernarg segment."""
    return [(getattr(struct_type, name).offset, getattr(struct_type, name).size) for name, _ in struct_type._fields_]


def hip_modules():
    """(hip, hiprtc) of hip-python; a ``LaunchError`` saying what is missing otherwise."""
    try:
        from hip import hip, hiprtc
    except ImportError as exc:
        raise LaunchError(f"launching on an AMD GPU needs hip-python matching the ROCm install "
                          f"(pip install \"hip-python~=<ROCm version>.0\"): {exc}") from None
    return hip, hiprtc


def _check(result, call: str):
    """hip-python returns (error, *values); raise on an error, return the values."""
    if not isinstance(result, tuple):
        result = (result,)
    err, *values = result
    code = getattr(err, "value", err)
    if code not in (0, None):
        raise LaunchError(f"{call} failed: {getattr(err, 'name', err)}")
    return values[0] if len(values) == 1 else tuple(values)


def compile_hiprtc(source: str, arch: str, name: str = "kernel") -> bytes:
    """The code object hipRTC makes of ``source`` for ``arch`` on this machine's ROCm."""
    _, hiprtc = hip_modules()
    try:
        prog = _check(hiprtc.hiprtcCreateProgram(source.encode(), f"{name}.hip".encode(), 0, [], []),
                      "hiprtcCreateProgram")
    except RuntimeError as exc:              # hip-python without ROCm's libraries
        raise LaunchError(f"hipRTC is not available (no ROCm here?): {exc}") from None
    options = [f"--offload-arch={arch}".encode(), b"-O3", b"-std=c++17"]
    result = hiprtc.hiprtcCompileProgram(prog, len(options), options)
    if getattr(result[0], "value", result[0]) not in (0, None):
        size = _check(hiprtc.hiprtcGetProgramLogSize(prog), "hiprtcGetProgramLogSize")
        log = bytearray(size)
        hiprtc.hiprtcGetProgramLog(prog, log)
        raise LaunchError(f"hipRTC rejected the generated HIP for {arch} (a tlxc bug):\n{log.decode(errors='replace')}")
    size = _check(hiprtc.hiprtcGetCodeSize(prog), "hiprtcGetCodeSize")
    code = bytearray(size)
    _check(hiprtc.hiprtcGetCode(prog, code), "hiprtcGetCode")
    return bytes(code)


@dataclass
class HipKernel:
    """One loaded kernel: its function handle, work-group size and argument kinds."""

    function: Any
    name: str
    threads: int
    kinds: tuple[str, ...]
    module: Any = None

    @classmethod
    def load(cls, code_object: bytes, name: str, threads: int, kinds: Sequence[str]) -> HipKernel:
        hip, _ = hip_modules()
        try:
            module = _check(hip.hipModuleLoadData(code_object), "hipModuleLoadData")
        except RuntimeError as exc:
            raise LaunchError(f"the HIP runtime is not available (no ROCm here?): {exc}") from None
        function = _check(hip.hipModuleGetFunction(module, name.encode()), "hipModuleGetFunction")
        return cls(function, name, threads, tuple(kinds), module)

    @classmethod
    def from_compiled(cls, compiled, *, use_hiprtc: bool = False) -> HipKernel:
        """From ``compile_kernel(..., arch="gfx9xx")``: its offline code object (``hsaco``), or hipRTC's
        build of its ``hip`` text with ``use_hiprtc=True`` (or when it has no code object)."""
        meta = compiled.metadata
        code = compiled.asm.get("hsaco")
        if use_hiprtc or code is None:
            code = compile_hiprtc(compiled.asm["hip"], compiled.arch, meta["name"])
        return cls.load(code, meta["name"], meta["threads"], meta["params"])

    def launch(self, grid: Sequence[int], *args, stream: int | None = None) -> ctypes.Structure:
        """Launch on ``grid`` work-groups; returns the packed arguments (kept alive by the caller
        until the launch is enqueued: hip-python copies them into the launch)."""
        hip, _ = hip_modules()
        gx, gy, gz = (list(grid) + [1, 1, 1])[:3]
        if min(gx, gy, gz) <= 0:
            return pack_arguments(self.kinds, args)
        packed = pack_arguments(self.kinds, args)
        _check(hip.hipModuleLaunchKernel(self.function, gx, gy, gz, self.threads, 1, 1, 0, stream or 0, None,
                                         extra=(packed,)), "hipModuleLaunchKernel")
        return packed


def device_arch(device: int | None = None) -> str:
    """The tlxc target of the current torch-on-ROCm device (its ``gcnArchName``, features dropped)."""
    import torch

    from ..arch import ArchError, resolve
    if getattr(torch.version, "hip", None) is None or not torch.cuda.is_available():
        raise LaunchError("no torch-on-ROCm device: the HIP launch path needs a ROCm build of torch and an AMD GPU")
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if device is None else device)
    name = str(getattr(props, "gcnArchName", "")).split(":")[0]
    try:
        return resolve(name).arch
    except ArchError as exc:
        raise LaunchError(f"this AMD GPU ({name or 'unknown arch'}) is not a tlxc target: {exc}") from None


_KERNELS: dict[tuple, HipKernel] = {}        # (kernel source key, specialization, arch, num_warps) -> loaded


def launch(kfn, grid: Sequence[int], *args, num_warps: int = 4, waves_per_eu: int = 0, stream: int | None = None,
           arch: str | None = None, **kwargs) -> ctypes.Structure:
    """``kfn[grid](*args, **kwargs)`` on an AMD GPU: the arguments bound and specialized as the CUDA
    launch path does (``specialization_from_args``), the kernel compiled once per specialization
    (HIP text -> hipRTC on this machine's ROCm), then launched on the current torch stream.
    ``waves_per_eu``: Triton's AMD occupancy hint (the kernel's ``amdgpu_waves_per_eu``; 0: none)."""
    from ..compiler import compile_kernel
    from ..frontend.specialize import specialization_from_args
    from .launch import launch_config
    try:
        bound = kfn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    spec = specialization_from_args(kfn, arguments)
    arch = arch or device_arch()
    key = (kfn.cache_key, spec.key(), arch, num_warps, waves_per_eu)
    kernel = _KERNELS.get(key)
    if kernel is None:
        options = launch_config(kfn.__name__, {"num_warps": num_warps, "waves_per_eu": waves_per_eu}).compile_options()
        compiled = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps, stages=("hip",), **options)
        kernel = _KERNELS[key] = HipKernel.from_compiled(compiled, use_hiprtc=True)
    if stream is None:
        import torch
        stream = torch.cuda.current_stream().cuda_stream
    return kernel.launch(grid, *(arguments[name] for name, _ in spec.runtime_params()), stream=stream)


def emulate(kfn, grid: Sequence[int], *args, arch: str = "gfx942", num_warps: int = 4, code_object: bool = False,
            check_barriers: bool = True, **kwargs):
    """``kfn[grid](*args, **kwargs)`` on the CPU emulation of the generated HIP (codegen_amdgcn/emu; torch
    CPU tensors): the arguments bound and specialized as ``launch`` does, the same HIP text compiled by
    the host C++ compiler against the emulation header.  ``code_object=True`` also builds the offline
    code object (``compiled.asm["hsaco"]`` / ``["amdgcn"]``).  Returns the compiled kernel."""
    from ..codegen_amdgcn.emu import run as emu
    from ..compiler import compile_kernel
    from ..frontend.specialize import specialization_from_args
    try:
        bound = kfn.signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise LaunchError(f"cannot launch {kfn.__name__}: {exc}") from None
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    spec = specialization_from_args(kfn, arguments)
    stages = ("hip", "hsaco") if code_object else ("hip",)
    compiled = compile_kernel(kfn, spec, arch=arch, num_warps=num_warps, stages=stages, check_barriers=check_barriers)
    info = compiled.metadata
    module = emu.build(compiled.asm["hip"], [info["name"]], arch=arch)
    module.run(info["name"], [arguments[name] for name, _ in spec.runtime_params()], grid=grid,
               threads=info["threads"], kinds=info["params"])
    return compiled


__all__ = ["KIND_CTYPES", "HipKernel", "argument_struct", "compile_hiprtc", "device_arch", "emulate", "hip_modules",
           "launch", "layout_of", "pack_arguments"]
