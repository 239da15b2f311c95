"""Shared set-up of the Hopper GEMM example tests (examples/hopper_gemm_ws*.py):
running an example's wrapper on the interpreter, and the launch
specialization its compile tests use."""
from __future__ import annotations

import torch

import tlxc
from tlxc.frontend.specialize import specialization_from_args


def run_on_interpreter(module, kernel_name: str, matmul, shape, seed: int, **options):
    """(out, float32 reference) of ``matmul(a, b, out, **options)`` with the
    module's kernel swapped for its interpreter, on seeded bf16 inputs and a
    NaN-poisoned output."""
    M, N, K = shape
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(M, K, generator=generator).to(torch.bfloat16)
    b = torch.randn(K, N, generator=generator).to(torch.bfloat16)
    out = torch.full((M, N), float("nan"), dtype=torch.bfloat16)
    kernel = getattr(module, kernel_name)
    setattr(module, kernel_name, tlxc.interpret(kernel))
    try:
        matmul(a, b, out, **options)
    finally:
        setattr(module, kernel_name, kernel)
    return out, a.float() @ b.float()


def launch_spec(kernel, a_box, b_box, c_box, M=1024, N=1024, K=1024, num_sms=132):
    """The specialization a launch on bf16 M x K / K x N tensors with these TMA
    boxes compiles (defaults for the other meta-parameters)."""
    a = torch.randn(M, K).to(torch.bfloat16)
    b = torch.randn(K, N).to(torch.bfloat16)
    c = torch.empty(M, N, dtype=torch.bfloat16)
    args = {"a_desc": tlxc.TensorDescriptor.from_tensor(a, a_box, swizzle=128),
            "b_desc": tlxc.TensorDescriptor.from_tensor(b, b_box, swizzle=128),
            "c_desc": tlxc.TensorDescriptor.from_tensor(c, c_box, swizzle=128 if c_box[1] == 64 else 0), "M": M, "N": N, "K": K}
    for name, param in kernel.signature.parameters.items():
        args.setdefault(name, param.default)
    args["NUM_SMS"] = num_sms
    return specialization_from_args(kernel, args)
