"""CPU emulation of the generated CUDA C++ (``run.py``, ``tlx_cuda_emu.h``): logic checks of the
CUDA code generator without a GPU."""
