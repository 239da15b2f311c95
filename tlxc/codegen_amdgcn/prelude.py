"""The prelude of every generated HIP file: the HIP keywords and the CUDA-named device functions
the shared C-style lowering writes, on clang builtins, so that the text needs no HIP header."""
from __future__ import annotations

# The HIP keywords, for the compilers that see no HIP header (hipRTC defines them: the guards
# skip there), and the CUDA-named device functions the shared lowering writes, on clang builtins.
PRELUDE = r"""#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif
#if !defined(__HIPCC_RTC__)
static __device__ __forceinline__ float __int_as_float(int x) { return __builtin_bit_cast(float, x); }
static __device__ __forceinline__ int __float_as_int(float x) { return __builtin_bit_cast(int, x); }
static __device__ __forceinline__ float __uint_as_float(unsigned x) { return __builtin_bit_cast(float, x); }
static __device__ __forceinline__ unsigned __float_as_uint(float x) { return __builtin_bit_cast(unsigned, x); }
static __device__ __forceinline__ double __longlong_as_double(long long x) { return __builtin_bit_cast(double, x); }
static __device__ __forceinline__ long long __double_as_longlong(double x) { return __builtin_bit_cast(long long, x); }
static __device__ __forceinline__ float rsqrtf(float x) { return 1.0f / __builtin_sqrtf(x); }
#endif
#if !defined(__HIPCC_RTC__) && !defined(TLX_HIP_EMU)
#define TLX_MATH1(f, b) static __device__ __forceinline__ float f(float x) { return b(x); }
#define TLX_MATH2(f, b) static __device__ __forceinline__ float f(float x, float y) { return b(x, y); }
#define TLX_MATHD1(f, b) static __device__ __forceinline__ double f(double x) { return b(x); }
#define TLX_MATHD2(f, b) static __device__ __forceinline__ double f(double x, double y) { return b(x, y); }
TLX_MATH1(expf, __builtin_expf) TLX_MATH1(exp2f, __builtin_exp2f) TLX_MATH1(logf, __builtin_logf)
TLX_MATH1(log2f, __builtin_log2f) TLX_MATH1(sqrtf, __builtin_sqrtf) TLX_MATH1(fabsf, __builtin_fabsf)
TLX_MATH1(floorf, __builtin_floorf) TLX_MATH1(ceilf, __builtin_ceilf) TLX_MATH1(truncf, __builtin_truncf)
TLX_MATH1(rintf, __builtin_rintf) TLX_MATH1(sinf, __builtin_sinf) TLX_MATH1(cosf, __builtin_cosf)
TLX_MATH2(fmaxf, __builtin_fmaxf) TLX_MATH2(fminf, __builtin_fminf) TLX_MATH2(copysignf, __builtin_copysignf)
TLX_MATHD1(sqrt, __builtin_sqrt) TLX_MATHD1(fabs, __builtin_fabs) TLX_MATHD1(floor, __builtin_floor)
TLX_MATHD1(ceil, __builtin_ceil) TLX_MATHD1(trunc, __builtin_trunc) TLX_MATHD1(rint, __builtin_rint)
TLX_MATHD2(fmax, __builtin_fmax) TLX_MATHD2(fmin, __builtin_fmin) TLX_MATHD2(copysign, __builtin_copysign)
static __device__ __forceinline__ float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
static __device__ __forceinline__ double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
#endif"""

# The math functions PRELUDE provides (rules_hip.py refuses the others at the user's line).
MATH_F32 = frozenset({"expf", "exp2f", "logf", "log2f", "sqrtf", "fabsf", "floorf", "ceilf", "truncf", "rintf",
                      "sinf", "cosf", "fmaxf", "fminf", "copysignf", "fmaf", "rsqrtf"})
MATH_F64 = frozenset({"sqrt", "fabs", "floor", "ceil", "trunc", "rint", "fmax", "fmin", "copysign", "fma"})


__all__ = ["MATH_F32", "MATH_F64", "PRELUDE"]
