"""The compile pipeline: frontend → passes → backend, one function per stage."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from .errors import CompilationError
from .frontend.codegen import Options, build_kernel_ir
from .frontend.specialize import Specialization
from .ir.printer import print_module
from .ir.verifier import verify_module

ARCHS = ("sm_90a", "sm_100a", "sm_80", "sm_89", "gfx942", "gfx950")


@dataclass
class CompiledKernel:
    name: str
    arch: str
    spec: Specialization
    module: Any                         # the IR module after passes
    asm: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)


def check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise CompilationError(f"unknown arch '{arch}' (expected one of {', '.join(ARCHS)})")
    return arch


def frontend(kfn, spec: Specialization, *, arch: str = "sm_90a", num_warps: int = 4):
    if num_warps not in (1, 2, 4, 8, 16, 32):
        raise CompilationError(f"num_warps must be a power of two from 1 to 32, got {num_warps}")
    module = build_kernel_ir(kfn, spec, Options(num_warps=num_warps, arch=arch))
    verify_module(module)
    return module


def compile_kernel(kfn, spec: Specialization, *, arch: str = "sm_90a", num_warps: int = 4,
                   stages: tuple[str, ...] = ("ir",), **options) -> CompiledKernel:
    check_arch(arch)
    start = time.perf_counter()
    module = frontend(kfn, spec, arch=arch, num_warps=num_warps)
    compiled = CompiledKernel(kfn.__name__, arch, spec, module)
    compiled.asm["ir"] = print_module(module)
    compiled.metadata["frontend_seconds"] = time.perf_counter() - start
    compiled.metadata["num_warps"] = num_warps
    if os.environ.get("TLXC_DUMP_DIR"):
        _dump(compiled)
    return compiled


def _dump(compiled: CompiledKernel) -> None:
    root = os.environ["TLXC_DUMP_DIR"]
    os.makedirs(root, exist_ok=True)
    for stage, text in compiled.asm.items():
        mode = "wb" if isinstance(text, bytes) else "w"
        with open(os.path.join(root, f"{compiled.name}.{stage}"), mode) as f:
            f.write(text)
