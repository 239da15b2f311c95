// tlx_cuda_emu.h: run the kernel of tlxc's generated CUDA C++ (sm_90a) on the host CPU, for
// checks of the CUDA code generator without a GPU (codegen_nvptx/emu/run.py).  The kernel text is
// compiled unchanged by the host g++; the prelude of tlx_* helpers that the generator writes with
// inline PTX is cut off (run.py) and replaced by the host implementations below, written from the
// PTX ISA (wgmma fragment layouts, matrix descriptors, the swizzles, cp.async zero-fill).
// Model:
//   * one CTA at a time; its threads are fibers (ucontext) on one OS thread, switched only at CTA
//     barriers, warp operations (shuffles, __syncwarp) and warpgroup operations (wgmma);
//   * cp.async reads its source at issue and writes shared memory only when a wait_group retires
//     its group (a read of the buffer before that sees the old bytes); shared memory starts as 0xA5;
//   * wgmma computes when the whole warpgroup has issued it, from every thread's A fragment and the
//     descriptor's shared-memory B (128-, 64- or 32-byte swizzle), into each thread's accumulator.
// What this cannot show: timing, the real memory model (accesses are sequentially consistent
// between the switch points, so a missing fence is invisible), NVRTC/ptxas, hardware bugs.
//   * TMA tile loads (tlx_tma_load_*d, up to 5 dimensions, out-of-range elements read as zeros, the
//     128-, 64- or 32-byte swizzles; a box whose innermost start is not a 16-byte multiple is an error, as the
//     GPU's illegal instruction) copy at issue and complete their bytes on the mbarrier at once; an mbarrier
//     keeps its arrivals, transaction bytes and phase (mbarrier.init / arrive.expect_tx / try_wait).
//     The kernel's descriptor parameters receive ``tlx_tensormap`` as this header defines it (run.py
//     fills it from a tlxc.TensorDescriptor), not the driver's encoding.
//   * named barriers (bar.sync / bar.arrive id, threads) count threads and open at the count; setmaxnreg
//     is nothing; wgmma may read A from shared memory too (16-bit, K- or M-major): warp-specialized
//     kernels of up to 32 warps (1024 threads, CUDA's limit) run.
//   * TMA copies swizzle 128, 64 or 32 bytes, and wgmma reads operands in all three swizzles.
//   * ldmatrix (.x4, .trans) is a warp operation: the lanes' row addresses exchanged, then read.
//   * TMA prefetches (to L2) are nothing.
//   * TMA tile stores (and float32 / 32-64-bit integer reduce-adds) read shared memory when a bulk wait_group retires their
//     group (or at the CTA's end) and skip elements outside the tensor.
// Helpers not emulated (other TMA reductions, tcgen05, clusters, ...) fail the host compile by name.
#pragma once
#include <sys/mman.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __grid_constant__

extern "C" {
unsigned char tlx_smem[232448] __attribute__((aligned(1024)));
}

namespace cuemu {
struct Dim3 { unsigned x = 0, y = 0, z = 0; };
enum State { READY, WAITING, DONE };
struct TmaStore { const void* map; unsigned src; int c[5]; int rank, add; };   // a TMA store (add: a float32
                                                                               // reduce-add) not yet done
struct Thread {
  ucontext_t ctx;
  State state = DONE;
  char* stack = nullptr;
  unsigned warp_gen = 0, wg_gen = 0;
  struct Copy { void* dst; unsigned char bytes[16]; int n; };   // n bytes of a cp.async (4, 8 or 16)
  std::vector<std::vector<Copy>> groups;   // committed cp.async groups not waited for, oldest first
  std::vector<Copy> open;                  // copies issued since the last commit
  std::vector<std::vector<TmaStore>> bulk; // committed bulk (TMA store) groups not waited for, oldest first
  std::vector<TmaStore> bulk_open;         // TMA stores issued since the last bulk commit
};
static void tma_store_now(const TmaStore& s);
struct WgDeposit {
  float* d;
  unsigned a[4];
  unsigned long long desc;
  int scale_d, tb, n, kind;                // kind: 0 bf16 / 3 f16 (k16), 1 e4m3, 2 e5m2 (k32, B's type in kind_b)
  int kind_b;
  unsigned long long desc_a;               // ss: A from shared memory too (16-bit; ta: M-major)
  int ss, ta;
};
struct NamedBar { unsigned count = 0, gen = 0; };
static int g_threads = 0;
static std::vector<Thread> g_thr;
static ucontext_t g_sched;
static int g_cur = 0;
static Dim3 g_block, g_grid, g_bdim;
static std::function<void()> g_kernel;
static unsigned g_bar_count = 0, g_bar_gen = 0;
static NamedBar g_named[16];                        // bar.sync / bar.arrive by barrier id
static unsigned long long g_warp_bank[2][32][32];   // up to 32 warps (1024 threads)
static unsigned g_warp_count[2][32];
static WgDeposit g_wg_bank[2][8][128];      // up to 8 warpgroups (1024 threads)
static unsigned g_wg_count[2][8];
static char g_error[512] = "";
// Wait loops yield; every wait a thread gets past, a thread's start and its end count as progress.  A
// round of the scheduler without any is a deadlock: each live thread re-checked a condition no other
// thread can change any more (a barrier, an mbarrier, or a warp shuffle some lanes never reach).
static unsigned long long g_progress = 0;

static inline void yield_() { swapcontext(&g_thr[g_cur].ctx, &g_sched); }

static void entry() {
  ++g_progress;
  g_kernel();
  Thread& t = g_thr[g_cur];                 // a CTA's outstanding TMA stores complete before it ends
  for (auto& group : t.bulk) for (auto& s : group) tma_store_now(s);
  for (auto& s : t.bulk_open) tma_store_now(s);
  t.bulk.clear(); t.bulk_open.clear();
  ++g_progress;
  g_thr[g_cur].state = DONE;
  swapcontext(&g_thr[g_cur].ctx, &g_sched);
}

static inline unsigned tid() { return (unsigned)g_cur; }

// CTA barrier: every thread of the CTA
static inline void bar_sync() {
  unsigned gen = g_bar_gen;
  ++g_progress;
  if (++g_bar_count == (unsigned)g_threads) {
    g_bar_count = 0;
    ++g_bar_gen;
    return;
  }
  while (g_bar_gen == gen) yield_();
  ++g_progress;
}

// a named barrier (bar.sync / bar.arrive id, threads): every thread counts; the last of `threads`
// opens it; bar.arrive does not wait
static inline void named_bar(unsigned id, unsigned threads, bool wait) {
  NamedBar& b = g_named[id & 15];
  unsigned gen = b.gen;
  ++g_progress;
  if (++b.count == threads) {
    b.count = 0;
    ++b.gen;
    return;
  }
  if (wait) {
    while (b.gen == gen) yield_();
    ++g_progress;
  }
}

// a warp operation: every lane deposits a value, waits for the others, reads the bank
static inline const unsigned long long* warp_exchange(unsigned long long v) {
  Thread& t = g_thr[g_cur];
  int w = g_cur / 32, l = g_cur % 32, b = t.warp_gen & 1;
  g_warp_bank[b][w][l] = v;
  if (++g_warp_count[b][w] == 32) g_warp_count[b ^ 1][w] = 0;      // everyone finished the previous one
  ++g_progress;
  while (g_warp_count[b][w] < 32) yield_();
  ++g_progress;
  ++t.warp_gen;
  return g_warp_bank[b][w];
}

static inline unsigned smem_off(const void* p) { return (unsigned)((const unsigned char*)p - tlx_smem); }
// the TMA swizzles: the 16-byte chunk index (bits 4..) XOR the 128-byte row index (bits 7..), over
// 3 / 2 / 1 bits for the 128 / 64 / 32-byte modes
static inline unsigned swz(unsigned a, int bytes) { return a ^ (((a >> 7) & (unsigned)(bytes / 16 - 1)) << 4); }
static inline float bf16f(unsigned short h) { unsigned u = (unsigned)h << 16; float f; memcpy(&f, &u, 4); return f; }
static inline float f16f(unsigned short h) { _Float16 x; memcpy(&x, &h, 2); return (float)x; }   // exact
// a 16-bit wgmma element: kind 0 bf16, 3 f16
static inline float e16f(unsigned short h, int kind) { return kind == 3 ? f16f(h) : bf16f(h); }
// an 8-bit float: e4m3 (bias 7, no infinities, S.1111.111 NaN) or e5m2 (bias 15, IEEE-like)
static inline float fp8f(unsigned char x, int e5m2) {
  int man_bits = e5m2 ? 2 : 3, bias = e5m2 ? 15 : 7;
  int e = (x & 0x7f) >> man_bits, m = x & ((1 << man_bits) - 1);
  float v;
  if (!e5m2 && (x & 0x7f) == 0x7f) v = NAN;
  else if (e5m2 && e == 31) v = m ? NAN : INFINITY;
  else v = e ? ldexpf(1.0f + m / (float)(1 << man_bits), e - bias) : ldexpf(m / (float)(1 << man_bits), 1 - bias);
  return (x & 0x80) ? -v : v;
}

// a matrix descriptor's swizzle mode (bits 62-63) as its span in bytes: 1 -> 128, 2 -> 64, 3 -> 32, 0 -> 0
// (no swizzle, "interleave": not emulated)
static inline int swizzle_span(unsigned long long desc) {
  static const int span[4] = {0, 128, 64, 32};
  return span[desc >> 62];
}
// the byte address (before the swizzle) of an operand's element (mn, k) in the canonical layouts of a
// swizzle span S: K-major -- rows along MN, S bytes each, 8-row groups SBO apart; MN-major (trans) -- rows
// along K, S bytes each, 8-row groups SBO apart, S-byte MN blocks LBO apart
static inline unsigned operand_addr(unsigned start, unsigned lbo, unsigned sbo, int S, int trans, int mn, int k,
                                    int esz) {
  if (!trans) return start + (mn / 8) * sbo + (mn % 8) * S + k * esz;
  int per_row = S / esz;
  return start + (k / 8) * sbo + (k % 8) * S + (mn % per_row) * esz + (mn / per_row) * lbo;
}

// wgmma.mma_async m64nNk16 f32 += bf16 (A in registers or shared memory) x bf16 (B in shared memory,
// descriptor), or m64nNk32 with 8-bit A (four consecutive K elements per register, or K-major in shared
// memory) and a K-major 8-bit B
static void wgmma_compute(WgDeposit* dep) {
  int N = dep[0].n, tb = dep[0].tb, kind = dep[0].kind;
  bool eight = kind == 1 || kind == 2;     // 8-bit (k32) inputs; 16-bit ones: kind 0 bf16, 3 f16
  int K = eight ? 32 : 16, esz = eight ? 1 : 2;
  unsigned long long desc = dep[0].desc;
  for (int i = 1; i < 128; ++i)
    if (dep[i].desc != desc || dep[i].scale_d != dep[0].scale_d) {
      snprintf(g_error, sizeof g_error, "wgmma: threads of a warpgroup disagree on the descriptor or scale-d");
    }
  unsigned start = (unsigned)(desc & 0x3FFF) << 4;
  unsigned lbo = (unsigned)((desc >> 16) & 0x3FFF) << 4;
  unsigned sbo = (unsigned)((desc >> 32) & 0x3FFF) << 4;
  int span = swizzle_span(desc);
  if (!span) snprintf(g_error, sizeof g_error, "wgmma: the B descriptor's swizzle mode 0 (interleave) is not emulated");
  float A[64][32];
  if (dep[0].ss) {      // A [64, K] from its descriptor: K-major, or (ta, 16-bit only) M-major
    unsigned long long da = dep[0].desc_a;
    for (int i = 1; i < 128; ++i)
      if (dep[i].desc_a != da) snprintf(g_error, sizeof g_error, "wgmma: threads of a warpgroup disagree on A");
    unsigned a_start = (unsigned)(da & 0x3FFF) << 4, a_lbo = (unsigned)((da >> 16) & 0x3FFF) << 4;
    unsigned a_sbo = (unsigned)((da >> 32) & 0x3FFF) << 4;
    int a_span = swizzle_span(da);
    if (!a_span) snprintf(g_error, sizeof g_error, "wgmma: the A descriptor's swizzle mode 0 (interleave) is not emulated");
    for (int r = 0; r < 64 && a_span; ++r)
      for (int k = 0; k < K; ++k) {
        unsigned addr = swz(operand_addr(a_start, a_lbo, a_sbo, a_span, dep[0].ta, r, k, esz), a_span);
        if (addr + esz > sizeof(tlx_smem)) {
          snprintf(g_error, sizeof g_error, "wgmma: the A descriptor reads outside shared memory");
          return;
        }
        if (eight) {
          A[r][k] = fp8f(tlx_smem[addr], kind == 2);
          continue;
        }
        unsigned short h;
        memcpy(&h, tlx_smem + addr, 2);
        A[r][k] = e16f(h, kind);
      }
  }
  for (int t = 0; t < 128 && !dep[0].ss; ++t) {
    int w = t / 32, l = t % 32, r = 16 * w + l / 4;
    const unsigned* a = dep[t].a;
    if (eight) {        // a0: (r, 4q + i), a1: (r + 8, ..), a2: (r, 16 + 4q + i), a3: (r + 8, ..), byte i
      int c = (l % 4) * 4;
      for (int i = 0; i < 4; ++i) {
        A[r][c + i] = fp8f((a[0] >> (8 * i)) & 0xff, kind == 2);
        A[r + 8][c + i] = fp8f((a[1] >> (8 * i)) & 0xff, kind == 2);
        A[r][c + 16 + i] = fp8f((a[2] >> (8 * i)) & 0xff, kind == 2);
        A[r + 8][c + 16 + i] = fp8f((a[3] >> (8 * i)) & 0xff, kind == 2);
      }
      continue;
    }
    int c = (l % 4) * 2;
    A[r][c] = e16f(a[0] & 0xFFFF, kind); A[r][c + 1] = e16f(a[0] >> 16, kind);
    A[r + 8][c] = e16f(a[1] & 0xFFFF, kind); A[r + 8][c + 1] = e16f(a[1] >> 16, kind);
    A[r][c + 8] = e16f(a[2] & 0xFFFF, kind); A[r][c + 9] = e16f(a[2] >> 16, kind);
    A[r + 8][c + 8] = e16f(a[3] & 0xFFFF, kind); A[r + 8][c + 9] = e16f(a[3] >> 16, kind);
  }
  std::vector<float> B(K * N);
  for (int k = 0; k < K && span; ++k)
    for (int n = 0; n < N; ++n) {
      unsigned addr = swz(operand_addr(start, lbo, sbo, span, tb, n, k, esz), span);
      if (addr + esz > sizeof(tlx_smem)) {
        snprintf(g_error, sizeof g_error, "wgmma: the descriptor reads outside shared memory");
        return;
      }
      if (eight) {
        B[k * N + n] = fp8f(tlx_smem[addr], dep[0].kind_b == 2);
        continue;
      }
      unsigned short h;
      memcpy(&h, tlx_smem + addr, 2);
      B[k * N + n] = e16f(h, kind);
    }
  for (int t = 0; t < 128; ++t) {
    int w = t / 32, l = t % 32, r = 16 * w + l / 4, c = (l % 4) * 2;
    float* d = dep[t].d;
    for (int i = 0; i < N / 8; ++i)
      for (int e = 0; e < 4; ++e) {
        int row = r + (e >> 1) * 8, col = 8 * i + c + (e & 1);
        float s = dep[t].scale_d ? d[4 * i + e] : 0.0f;
        for (int k = 0; k < K; ++k) s += A[row][k] * B[k * N + col];
        d[4 * i + e] = s;
      }
  }
}

static inline void wgmma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long desc,
                         int scale_d, int tb, int n, int kind = 0, int kind_b = 0, unsigned long long desc_a = 0,
                         int ss = 0, int ta = 0) {
  Thread& t = g_thr[g_cur];
  int g = g_cur / 128, l = g_cur % 128, b = t.wg_gen & 1;
  g_wg_bank[b][g][l] = WgDeposit{d, {a0, a1, a2, a3}, desc, scale_d, tb, n, kind, kind_b, desc_a, ss, ta};
  if (++g_wg_count[b][g] == 128) {
    g_wg_count[b ^ 1][g] = 0;
    wgmma_compute(g_wg_bank[b][g]);
    g_wg_count[b][g] = 1000;            // released
  }
  ++g_progress;
  while (g_wg_count[b][g] < 1000) yield_();
  ++g_progress;
  ++t.wg_gen;
}
}  // namespace cuemu

#define threadIdx (cuemu::Dim3{cuemu::tid(), 0, 0})
#define blockIdx (cuemu::g_block)
#define gridDim (cuemu::g_grid)
#define blockDim (cuemu::g_bdim)

static inline void __syncthreads() { cuemu::bar_sync(); }
static inline void __syncwarp(unsigned = 0xffffffffu) { cuemu::warp_exchange(0); }
static inline void __trap() {              // tl.device_assert: the launch fails (the thread runs on here)
  if (!cuemu::g_error[0]) snprintf(cuemu::g_error, sizeof cuemu::g_error, "trap: a device assertion failed");
}
static inline unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline long long __double_as_longlong(double d) { long long i; memcpy(&i, &d, 8); return i; }
static inline double __longlong_as_double(long long i) { double d; memcpy(&d, &i, 8); return d; }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
template <class T>
static inline T __shfl_sync(unsigned, T v, int src, int width = 32) {
  unsigned long long x = 0; memcpy(&x, &v, sizeof(T));
  const unsigned long long* bank = cuemu::warp_exchange(x);
  T r; memcpy(&r, &bank[src % 32], sizeof(T)); return r;
}
template <class T>
static inline T __shfl_xor_sync(unsigned, T v, int mask, int width = 32) {
  unsigned long long x = 0; memcpy(&x, &v, sizeof(T));
  const unsigned long long* bank = cuemu::warp_exchange(x);
  T r; memcpy(&r, &bank[(cuemu::tid() % 32) ^ mask], sizeof(T)); return r;
}
static inline unsigned long long __cvta_generic_to_shared(const void* p) { return cuemu::smem_off(p); }
static inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {     // byte i of the result: byte
  unsigned long long xy = ((unsigned long long)y << 32) | x, r = 0;         // (s >> 4i) & 7 of {y, x}
  for (int i = 0; i < 4; ++i) r |= ((xy >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
  return (unsigned)r;
}

static inline unsigned short tlx_cvt_rn_bf16_f32(float x) {
  unsigned u = __float_as_uint(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1);
  return (unsigned short)(u >> 16);
}
static inline float tlx_ex2_approx_ftz_f32(float x) { return exp2f(x); }
static inline float tlx_div_full_f32(float x, float y) { return x / y; }
static inline void tlx_ld_global_b32(const void* p, bool pred, unsigned& w0) { if (pred) memcpy(&w0, p, 4); }
static inline void tlx_st_global_b32(void* p, bool pred, unsigned w0) { if (pred) memcpy(p, &w0, 4); }
static inline void tlx_st_global_b64(void* p, bool pred, unsigned w0, unsigned w1) {
  if (pred) { unsigned w[2] = {w0, w1}; memcpy(p, w, 8); }
}
static inline void tlx_st_global_b128(void* p, bool pred, unsigned w0, unsigned w1, unsigned w2, unsigned w3) {
  if (pred) { unsigned w[4] = {w0, w1, w2, w3}; memcpy(p, w, 16); }
}
static inline void tlx_ld_global_b64(const void* p, bool pred, unsigned& w0, unsigned& w1) {
  if (pred) { unsigned w[2]; memcpy(w, p, 8); w0 = w[0]; w1 = w[1]; }
}
static inline void tlx_ld_global_b16(const void* p, bool pred, unsigned short& w0) { if (pred) memcpy(&w0, p, 2); }
static inline void tlx_st_global_b16(void* p, bool pred, unsigned short w0) { if (pred) memcpy(p, &w0, 2); }
static inline void tlx_ld_global_b128(const void* p, bool pred, unsigned& w0, unsigned& w1, unsigned& w2, unsigned& w3) {
  if (pred) { unsigned w[4]; memcpy(w, p, 16); w0 = w[0]; w1 = w[1]; w2 = w[2]; w3 = w[3]; }
}
template <int EVICT> static inline unsigned long long tlx_l2_policy() { return 0; }
template <int CACHE, int EVICT>
static inline void tlx_ld_global_hint_b32(const void* p, bool pred, unsigned& w0) { tlx_ld_global_b32(p, pred, w0); }
template <int CACHE, int EVICT>
static inline void tlx_ld_global_hint_b64(const void* p, bool pred, unsigned& w0, unsigned& w1) {
  tlx_ld_global_b64(p, pred, w0, w1);
}
// the other hinted and volatile accesses (cache operators and L2 policies change no value here); 8-bit
// accesses carry their byte in a 16-bit word, as the PTX helpers' "h" registers do
template <int CACHE, int EVICT>
static inline void tlx_ld_global_hint_b8(const void* p, bool pred, unsigned short& w0) {
  if (pred) { unsigned char b; memcpy(&b, p, 1); w0 = b; }
}
template <int CACHE, int EVICT>
static inline void tlx_ld_global_hint_b16(const void* p, bool pred, unsigned short& w0) { tlx_ld_global_b16(p, pred, w0); }
template <int CACHE, int EVICT>
static inline void tlx_st_global_hint_b8(void* p, bool pred, unsigned short w0) {
  if (pred) { unsigned char b = (unsigned char)w0; memcpy(p, &b, 1); }
}
template <int CACHE, int EVICT>
static inline void tlx_st_global_hint_b16(void* p, bool pred, unsigned short w0) { tlx_st_global_b16(p, pred, w0); }
template <int CACHE, int EVICT>
static inline void tlx_st_global_hint_b32(void* p, bool pred, unsigned w0) { tlx_st_global_b32(p, pred, w0); }
template <int CACHE, int EVICT>
static inline void tlx_st_global_hint_b64(void* p, bool pred, unsigned w0, unsigned w1) {
  tlx_st_global_b64(p, pred, w0, w1);
}
template <int CACHE, int EVICT>
static inline void tlx_st_global_hint_b128(void* p, bool pred, unsigned w0, unsigned w1, unsigned w2, unsigned w3) {
  tlx_st_global_b128(p, pred, w0, w1, w2, w3);
}
// a volatile load is how a kernel polls a flag: each one yields (without progress, as a failed
// compare-and-swap does), so a spin on a flag no thread raises shows as "no progress", not a hang
static inline void tlx_ld_volatile_global_b8(const void* p, bool pred, unsigned short& w0) {
  if (pred) { unsigned char b; memcpy(&b, p, 1); w0 = b; }
  cuemu::yield_();
}
static inline void tlx_ld_volatile_global_b16(const void* p, bool pred, unsigned short& w0) {
  tlx_ld_global_b16(p, pred, w0); cuemu::yield_();
}
static inline void tlx_ld_volatile_global_b32(const void* p, bool pred, unsigned& w0) {
  tlx_ld_global_b32(p, pred, w0); cuemu::yield_();
}
static inline void tlx_ld_volatile_global_b64(const void* p, bool pred, unsigned& w0, unsigned& w1) {
  tlx_ld_global_b64(p, pred, w0, w1); cuemu::yield_();
}
static inline void tlx_ld_volatile_global_b128(const void* p, bool pred, unsigned& w0, unsigned& w1, unsigned& w2,
                                               unsigned& w3) { tlx_ld_global_b128(p, pred, w0, w1, w2, w3); cuemu::yield_(); }
template <int CACHE, int EVICT>
static inline void tlx_ld_global_hint_b128(const void* p, bool pred, unsigned& w0, unsigned& w1, unsigned& w2,
                                           unsigned& w3) { tlx_ld_global_b128(p, pred, w0, w1, w2, w3); }
template <int SEM, int SCOPE>
static inline int tlx_atom_add_s32(void* p, int v) { int old; memcpy(&old, p, 4); int n = old + v; memcpy(p, &n, 4); return old; }
// exchange and compare-and-swap (sequentially consistent here); a failed compare yields, so a spin on a
// flag no earlier CTA raised shows as "no progress" instead of hanging the host
template <int SEM, int SCOPE>
static inline unsigned tlx_atom_exch_b32(void* p, unsigned v) { unsigned old; memcpy(&old, p, 4); memcpy(p, &v, 4); return old; }
template <int SEM, int SCOPE>
static inline unsigned long long tlx_atom_exch_b64(void* p, unsigned long long v) {
  unsigned long long old; memcpy(&old, p, 8); memcpy(p, &v, 8); return old;
}
template <int SEM, int SCOPE>
static inline unsigned tlx_atom_cas_b32(void* p, unsigned cmp, unsigned v) {
  unsigned old; memcpy(&old, p, 4);
  if (old == cmp) { memcpy(p, &v, 4); ++cuemu::g_progress; } else cuemu::yield_();
  return old;
}
template <int SEM, int SCOPE>
static inline unsigned long long tlx_atom_cas_b64(void* p, unsigned long long cmp, unsigned long long v) {
  unsigned long long old; memcpy(&old, p, 8);
  if (old == cmp) { memcpy(p, &v, 8); ++cuemu::g_progress; } else cuemu::yield_();
  return old;
}
static inline unsigned tlx_smem_addr(const void* p) { return cuemu::smem_off(p); }
static inline void tlx_fence_proxy_async_shared_cta() {}
// programmatic dependent launch: the emulation runs one grid to its end before the next starts,
// so a dependent launch never overlaps its primary and both controls have nothing to do
static inline void tlx_griddepcontrol_launch_dependents() {}
static inline void tlx_griddepcontrol_wait() {}
// cp.async: the source is read at issue, the shared-memory bytes land only when a wait_group
// retires the copy's group (a read of the buffer before that sees the old bytes)
template <int N> static inline void tlx_cuemu_cp_async(void* dst, const void* src, bool pred) {
  cuemu::Thread::Copy c; c.dst = dst; c.n = N;
  if (pred) memcpy(c.bytes, src, N); else memset(c.bytes, 0, N);
  cuemu::g_thr[cuemu::g_cur].open.push_back(c);
}
static inline void tlx_cp_async_4(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<4>(dst, src, pred); }
static inline void tlx_cp_async_8(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<8>(dst, src, pred); }
static inline void tlx_cp_async_16(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<16>(dst, src, pred); }
template <int CACHE>
static inline void tlx_cp_async_hint_4(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<4>(dst, src, pred); }
template <int CACHE>
static inline void tlx_cp_async_hint_8(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<8>(dst, src, pred); }
template <int CACHE>
static inline void tlx_cp_async_hint_16(void* dst, const void* src, bool pred) { tlx_cuemu_cp_async<16>(dst, src, pred); }
static inline void tlx_cp_async_commit_group() {
  auto& t = cuemu::g_thr[cuemu::g_cur];
  t.groups.push_back(t.open); t.open.clear();
}
template <int N> static inline void tlx_cp_async_wait_group() {
  auto& t = cuemu::g_thr[cuemu::g_cur];
  while ((int)t.groups.size() > N) {
    for (auto& c : t.groups.front()) memcpy(c.dst, c.bytes, c.n);
    t.groups.erase(t.groups.begin());
  }
}
static inline void tlx_ld_shared_b32(const void* p, unsigned& w0) { memcpy(&w0, p, 4); }
static inline void tlx_st_shared_b32(void* p, unsigned w0) { memcpy(p, &w0, 4); }
static inline void tlx_st_shared_b128(void* p, unsigned w0, unsigned w1, unsigned w2, unsigned w3) {
  unsigned w[4] = {w0, w1, w2, w3}; memcpy(p, w, 16);
}
static inline void tlx_st_shared_b64(void* p, unsigned w0, unsigned w1) { unsigned w[2] = {w0, w1}; memcpy(p, w, 8); }
static inline void tlx_ld_shared_b64(const void* p, unsigned& w0, unsigned& w1) { unsigned w[2]; memcpy(w, p, 8); w0 = w[0]; w1 = w[1]; }
static inline void tlx_ld_shared_b128(const void* p, unsigned& w0, unsigned& w1, unsigned& w2, unsigned& w3) {
  unsigned w[4]; memcpy(w, p, 16); w0 = w[0]; w1 = w[1]; w2 = w[2]; w3 = w[3];
}
// ldmatrix.m8n8.x4 (.trans): lane l gives the address of row l % 8 of matrix l / 8; lane t receives of
// matrix j the elements (t / 4, 2 (t % 4) + e), or with .trans (2 (t % 4) + e, t / 4), e = 0 (low half), 1
static inline void tlx_ldmatrix_words(const void* p, unsigned* w, bool trans) {
  const unsigned long long* rows = cuemu::warp_exchange(cuemu::smem_off(p));
  int t = cuemu::tid() % 32;
  for (int j = 0; j < 4; ++j) {
    unsigned short e[2];
    for (int h = 0; h < 2; ++h) {
      unsigned at = trans ? (unsigned)rows[8 * j + 2 * (t % 4) + h] + 2 * (t / 4)
                          : (unsigned)rows[8 * j + t / 4] + 4 * (t % 4) + 2 * h;
      memcpy(&e[h], tlx_smem + at, 2);
    }
    w[j] = (unsigned)e[0] | ((unsigned)e[1] << 16);
  }
}
static inline void tlx_ldmatrix_x4(const void* p, unsigned& w0, unsigned& w1, unsigned& w2, unsigned& w3) {
  unsigned w[4]; tlx_ldmatrix_words(p, w, false); w0 = w[0]; w1 = w[1]; w2 = w[2]; w3 = w[3];
}
static inline void tlx_ldmatrix_x4_trans(const void* p, unsigned& w0, unsigned& w1, unsigned& w2, unsigned& w3) {
  unsigned w[4]; tlx_ldmatrix_words(p, w, true); w0 = w[0]; w1 = w[1]; w2 = w[2]; w3 = w[3];
}
struct tlx_tensormap {                  // (the emulation's own: run.py fills it from a TensorDescriptor)
  unsigned char* base;
  long long dims[5], strides[5];          // innermost first; strides in bytes
  int box[5], rank, elem, swizzle;
  int is_float;                           // the elements' kind, for reduce-adds (float32, or 32/64-bit integers)
};
namespace cuemu {
struct MBar { unsigned count = 0, pending = 0, phase = 0; long long tx = 0; };
static MBar g_mbar[sizeof(tlx_smem) / 8];  // by shared-memory offset / 8
static MBar g_mbar_bad;
static inline MBar& mbar(const void* p) {
  unsigned off = smem_off(p);
  if (off >= sizeof(tlx_smem) || off % 8) {
    snprintf(g_error, sizeof g_error, "mbarrier at shared offset %u: outside shared memory or misaligned", off);
    return g_mbar_bad;
  }
  return g_mbar[off / 8];
}
static inline void mbar_settle(MBar& b) {
  if (b.pending == 0 && b.tx == 0) { b.phase ^= 1; b.pending = b.count; }
}
}  // namespace cuemu
static inline void tlx_mbarrier_init(unsigned long long* bar, unsigned count) {
  cuemu::MBar& b = cuemu::mbar(bar); b.count = b.pending = count; b.phase = 0; b.tx = 0;
}
static inline void tlx_mbarrier_arrive_expect_tx(unsigned long long* bar, unsigned bytes) {
  cuemu::MBar& b = cuemu::mbar(bar);
  b.tx += bytes;
  if (b.pending == 0) snprintf(cuemu::g_error, sizeof cuemu::g_error, "mbarrier: more arrivals than its count");
  --b.pending;
  cuemu::mbar_settle(b);
}
static inline void tlx_mbarrier_arrive(unsigned long long* bar) {
  cuemu::MBar& b = cuemu::mbar(bar);
  --b.pending;
  cuemu::mbar_settle(b);
}
static inline void tlx_mbarrier_arrive(unsigned long long* bar, unsigned count) {
  cuemu::MBar& b = cuemu::mbar(bar);
  if (b.pending < count) snprintf(cuemu::g_error, sizeof cuemu::g_error, "mbarrier: more arrivals than its count");
  b.pending -= count;
  cuemu::mbar_settle(b);
}
static inline bool tlx_mbarrier_try_wait_parity(unsigned long long* bar, unsigned phase) {
  return cuemu::mbar(bar).phase != (phase & 1);
}
static inline void tlx_mbarrier_wait(unsigned long long* bar, unsigned phase) {
  while (!tlx_mbarrier_try_wait_parity(bar, phase)) cuemu::yield_();
  ++cuemu::g_progress;
}
namespace cuemu {
// every element of map m's box at coordinates c: fn(inside the tensor, its global byte offset, its
// shared-memory address from `off`, swizzled); false, with g_error set, once one lies outside shared memory
template <class F>
static bool tma_box_walk(const tlx_tensormap& m, const int* c, unsigned off, const char* what, F fn) {
  int box[5] = {1, 1, 1, 1, 1};
  for (int d = 0; d < m.rank; ++d) box[d] = m.box[d];
  int idx[5];
  for (idx[4] = 0; idx[4] < box[4]; ++idx[4])
    for (idx[3] = 0; idx[3] < box[3]; ++idx[3])
      for (idx[2] = 0; idx[2] < box[2]; ++idx[2])
        for (idx[1] = 0; idx[1] < box[1]; ++idx[1])
          for (idx[0] = 0; idx[0] < box[0]; ++idx[0]) {
            bool in = true;
            long long g = 0;
            for (int d = 0; d < m.rank; ++d) {
              long long x = (long long)c[d] + idx[d];
              if (x < 0 || x >= m.dims[d]) in = false;
              g += x * m.strides[d];
            }
            long long lin = (((((long long)idx[4] * box[3] + idx[3]) * box[2] + idx[2]) * box[1] + idx[1]) * box[0]
                             + idx[0]) * m.elem;
            unsigned a = off + (unsigned)lin;
            if (m.swizzle == 128 || m.swizzle == 64 || m.swizzle == 32) a = swz(a, m.swizzle);
            else if (m.swizzle != 0) snprintf(g_error, sizeof g_error, "%s: swizzle %d not emulated", what, m.swizzle);
            if (a + m.elem > sizeof(tlx_smem)) {
              snprintf(g_error, sizeof g_error, "%s: a box element lies outside shared memory", what);
              return false;
            }
            fn(in, g, a);
          }
  return true;
}
}  // namespace cuemu
static inline void tlx_tma_load(void* dst, const void* map, unsigned long long* bar, const int* c, int rank) {
  const tlx_tensormap& m = *(const tlx_tensormap*)map;
  if (rank != m.rank) snprintf(cuemu::g_error, sizeof cuemu::g_error, "tma: %d coordinates, a rank-%d map", rank, m.rank);
  if ((long long)c[0] * m.elem % 16)      // the GPU: an illegal instruction
    snprintf(cuemu::g_error, sizeof cuemu::g_error, "tma: the box starts at innermost coordinate %d (%lld bytes), "
             "not a 16-byte multiple", c[0], (long long)c[0] * m.elem);
  long long bytes = 0;
  if (!cuemu::tma_box_walk(m, c, cuemu::smem_off(dst), "tma", [&](bool in, long long src, unsigned a) {
        if (in) memcpy(tlx_smem + a, m.base + src, m.elem); else memset(tlx_smem + a, 0, m.elem);
        bytes += m.elem;
      }))
    return;
  cuemu::MBar& b = cuemu::mbar(bar);
  b.tx -= bytes;
  cuemu::mbar_settle(b);
}
// TMA stores (cp.async.bulk.tensor ... global.shared::cta.bulk_group) read shared memory at the latest
// point the PTX allows: when a bulk wait_group retires their group, or at the CTA's end -- so a buffer
// rewritten before its store's wait shows as wrong output; elements outside the tensor are not written
namespace cuemu {
static void tma_store_now(const TmaStore& st) {
  const tlx_tensormap& m = *(const tlx_tensormap*)st.map;
  if (st.rank != m.rank) snprintf(g_error, sizeof g_error, "tma store: %d coordinates, a rank-%d map", st.rank, m.rank);
  if (st.add && (m.is_float ? m.elem != 4 : (m.elem != 4 && m.elem != 8))) {
    snprintf(g_error, sizeof g_error, "tma reduce-add: only float32 and 32/64-bit integer elements are emulated");
    return;
  }
  tma_box_walk(m, st.c, st.src, "tma store", [&](bool in, long long dst, unsigned a) {
    if (!in) return;
    if (!st.add) {
      memcpy(m.base + dst, tlx_smem + a, m.elem);
      return;
    }
    if (!m.is_float) {                    // integers add wrapping (signed or not: the same bits)
      unsigned long long x = 0, y = 0;
      memcpy(&x, m.base + dst, m.elem); memcpy(&y, tlx_smem + a, m.elem);
      x += y;
      memcpy(m.base + dst, &x, m.elem);
      return;
    }
    float x, y;
    memcpy(&x, m.base + dst, 4); memcpy(&y, tlx_smem + a, 4);
    x += y;
    memcpy(m.base + dst, &x, 4);
  });
}
static inline void tma_store(const void* map, const void* src, const int* c, int rank, int add = 0) {
  TmaStore st{map, smem_off(src), {0, 0, 0, 0, 0}, rank, add};
  for (int d = 0; d < rank; ++d) st.c[d] = c[d];
  g_thr[g_cur].bulk_open.push_back(st);
}
}  // namespace cuemu
static inline void tlx_bulk_commit_group() {
  cuemu::Thread& t = cuemu::g_thr[cuemu::g_cur];
  t.bulk.push_back(t.bulk_open);
  t.bulk_open.clear();
}
template <int N> static inline void tlx_bulk_wait_group_read() {
  cuemu::Thread& t = cuemu::g_thr[cuemu::g_cur];
  while ((int)t.bulk.size() > N) {
    for (auto& st : t.bulk.front()) cuemu::tma_store_now(st);
    t.bulk.erase(t.bulk.begin());
  }
}
template <int N> static inline void tlx_bulk_wait_group() { tlx_bulk_wait_group_read<N>(); }
static inline void tlx_tma_store_1d(const void* map, const void* src, int c0) {
  int c[1] = {c0}; cuemu::tma_store(map, src, c, 1);
}
static inline void tlx_tma_store_2d(const void* map, const void* src, int c0, int c1) {
  int c[2] = {c0, c1}; cuemu::tma_store(map, src, c, 2);
}
static inline void tlx_tma_store_3d(const void* map, const void* src, int c0, int c1, int c2) {
  int c[3] = {c0, c1, c2}; cuemu::tma_store(map, src, c, 3);
}
static inline void tlx_tma_store_4d(const void* map, const void* src, int c0, int c1, int c2, int c3) {
  int c[4] = {c0, c1, c2, c3}; cuemu::tma_store(map, src, c, 4);
}
static inline void tlx_tma_store_5d(const void* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  int c[5] = {c0, c1, c2, c3, c4}; cuemu::tma_store(map, src, c, 5);
}
static inline void tlx_tma_reduce_add_1d(const void* map, const void* src, int c0) {
  int c[1] = {c0}; cuemu::tma_store(map, src, c, 1, 1);
}
static inline void tlx_tma_reduce_add_2d(const void* map, const void* src, int c0, int c1) {
  int c[2] = {c0, c1}; cuemu::tma_store(map, src, c, 2, 1);
}
static inline void tlx_tma_reduce_add_3d(const void* map, const void* src, int c0, int c1, int c2) {
  int c[3] = {c0, c1, c2}; cuemu::tma_store(map, src, c, 3, 1);
}
static inline void tlx_tma_reduce_add_4d(const void* map, const void* src, int c0, int c1, int c2, int c3) {
  int c[4] = {c0, c1, c2, c3}; cuemu::tma_store(map, src, c, 4, 1);
}
static inline void tlx_tma_load_1d(void* dst, const void* map, unsigned long long* bar, int c0) {
  int c[1] = {c0}; tlx_tma_load(dst, map, bar, c, 1);
}
static inline void tlx_tma_load_2d(void* dst, const void* map, unsigned long long* bar, int c0, int c1) {
  int c[2] = {c0, c1}; tlx_tma_load(dst, map, bar, c, 2);
}
static inline void tlx_tma_load_3d(void* dst, const void* map, unsigned long long* bar, int c0, int c1, int c2) {
  int c[3] = {c0, c1, c2}; tlx_tma_load(dst, map, bar, c, 3);
}
static inline void tlx_tma_load_4d(void* dst, const void* map, unsigned long long* bar, int c0, int c1, int c2, int c3) {
  int c[4] = {c0, c1, c2, c3}; tlx_tma_load(dst, map, bar, c, 4);
}
static inline void tlx_tma_load_5d(void* dst, const void* map, unsigned long long* bar, int c0, int c1, int c2, int c3,
                                   int c4) {
  int c[5] = {c0, c1, c2, c3, c4}; tlx_tma_load(dst, map, bar, c, 5);
}
// L2 prefetches of a box (cp.async.bulk.prefetch.tensor) move no data the kernel sees: nothing to emulate
static inline void tlx_tma_prefetch_1d(const void*, int) {}
static inline void tlx_tma_prefetch_2d(const void*, int, int) {}
static inline void tlx_tma_prefetch_3d(const void*, int, int, int) {}
static inline void tlx_tma_prefetch_4d(const void*, int, int, int, int) {}
static inline void tlx_tma_prefetch_5d(const void*, int, int, int, int, int) {}
static inline void tlx_bar_sync(unsigned id, unsigned threads) { cuemu::named_bar(id, threads, true); }
static inline void tlx_bar_arrive(unsigned id, unsigned threads) { cuemu::named_bar(id, threads, false); }
template <int N> static inline void tlx_setmaxnreg_inc() {}
template <int N> static inline void tlx_setmaxnreg_dec() {}
static inline float tlx_bf16_to_f32(unsigned short x) { return cuemu::bf16f(x); }
// cvt.f32.f16 (exact) and cvt.rn.f16.f32 (to nearest even; overflow to infinity, NaN kept): the host's _Float16
static inline float tlx_cvt_f32_f16(unsigned short x) { return cuemu::f16f(x); }
static inline unsigned short tlx_cvt_rn_f16_f32(float x) {
  _Float16 h = (_Float16)x; unsigned short u; memcpy(&u, &h, 2); return u;
}
template <typename T> static inline T* tlx_opaque_pointer(T* p) { return p; }   // (a hint to the device compiler)
// cvt.rzi.{s,u}{32,64}.{f32,f64}: toward zero, NaN -> 0, out-of-range values saturated (never a C cast's UB)
template <typename I, typename F> static inline I tlx_cuemu_cvt_rzi(F x) {
  if (x != x) return I(0);
  const F low = std::numeric_limits<I>::is_signed ? -std::ldexp(F(1), std::numeric_limits<I>::digits) : F(0);
  const F high = std::ldexp(F(1), std::numeric_limits<I>::digits);
  if (x <= low) return std::numeric_limits<I>::min();
  if (x >= high) return std::numeric_limits<I>::max();
  return I(x);
}
static inline int tlx_cvt_rzi_s32_f32(float x) { return tlx_cuemu_cvt_rzi<int>(x); }
static inline int tlx_cvt_rzi_s32_f64(double x) { return tlx_cuemu_cvt_rzi<int>(x); }
static inline unsigned tlx_cvt_rzi_u32_f32(float x) { return tlx_cuemu_cvt_rzi<unsigned>(x); }
static inline unsigned tlx_cvt_rzi_u32_f64(double x) { return tlx_cuemu_cvt_rzi<unsigned>(x); }
static inline long long tlx_cvt_rzi_s64_f32(float x) { return tlx_cuemu_cvt_rzi<long long>(x); }
static inline long long tlx_cvt_rzi_s64_f64(double x) { return tlx_cuemu_cvt_rzi<long long>(x); }
static inline unsigned long long tlx_cvt_rzi_u64_f32(float x) { return tlx_cuemu_cvt_rzi<unsigned long long>(x); }
static inline unsigned long long tlx_cvt_rzi_u64_f64(double x) { return tlx_cuemu_cvt_rzi<unsigned long long>(x); }
// cvt.rna.tf32.f32: 10 explicit mantissa bits, to nearest, ties away from zero (infinities and NaN kept)
static inline float tlx_cvt_rna_tf32_f32(float x) {
  if (!std::isfinite(x)) return x;
  return __uint_as_float((__float_as_uint(x) + 0x1000u) & 0xffffe000u);
}
// mma.sync m16n8k8 f32 += tf32 x tf32: the warp's A (a0..a3: row g + 8 (i & 1), column t + 4 (i >> 1)) and
// B (b0, b1: row t + 4 i, column g) fragments exchanged, each lane computing its own c0..c3 (row g + 8 (i >> 1),
// column 2 t + (i & 1)); g = lane / 4, t = lane % 4
static inline void tlx_mma_m16n8k8_f32_tf32(float* d, const float* a, const float* b) {
  float fa[32][4], fb[32][2];
  for (int pair = 0; pair < 3; ++pair) {
    const float* src = pair < 2 ? a + 2 * pair : b;
    unsigned long long v = (unsigned long long)__float_as_uint(src[1]) << 32 | __float_as_uint(src[0]);
    const unsigned long long* bank = cuemu::warp_exchange(v);
    for (int l = 0; l < 32; ++l) {
      float lo = __uint_as_float((unsigned)bank[l]), hi = __uint_as_float((unsigned)(bank[l] >> 32));
      if (pair < 2) { fa[l][2 * pair] = lo; fa[l][2 * pair + 1] = hi; } else { fb[l][0] = lo; fb[l][1] = hi; }
    }
  }
  const int lane = cuemu::tid() % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    float sum = d[i];
    for (int k = 0; k < 8; ++k)
      sum += fa[(row % 8) * 4 + k % 4][(row / 8) | ((k / 4) << 1)] * fb[col * 4 + k % 4][k / 4];
    d[i] = sum;
  }
}
// mma.sync m16n8k32 s32 += s8 x s8: A a0..a15 (four to a register: row g + 8 ((i >> 2) & 1), column 4 t + (i & 3)
// + 16 (i >= 8)), B b0..b7 (row 4 t + (i & 3) + 16 (i >= 4), column g) exchanged; c as the f32 accumulator's
static inline void tlx_mma_m16n8k32_s32_s8(int* d, const unsigned* a, const unsigned* b) {
  unsigned ra[32][4], rb[32][2];
  for (int pair = 0; pair < 3; ++pair) {
    const unsigned* src = pair < 2 ? a + 2 * pair : b;
    const unsigned long long* bank = cuemu::warp_exchange((unsigned long long)src[1] << 32 | src[0]);
    for (int l = 0; l < 32; ++l) {
      unsigned lo = (unsigned)bank[l], hi = (unsigned)(bank[l] >> 32);
      if (pair < 2) { ra[l][2 * pair] = lo; ra[l][2 * pair + 1] = hi; } else { rb[l][0] = lo; rb[l][1] = hi; }
    }
  }
  const int lane = cuemu::tid() % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    long long sum = d[i];
    for (int k = 0; k < 32; ++k) {
      const int ia = (k % 4) + 4 * ((row / 8) + 2 * (k / 16)), ib = (k % 4) + 4 * (k / 16);   // element index
      const signed char av = (signed char)(ra[(row % 8) * 4 + (k % 16) / 4][ia / 4] >> (8 * (ia % 4)));
      const signed char bv = (signed char)(rb[col * 4 + (k % 16) / 4][ib / 4] >> (8 * (ib % 4)));
      sum += (long long)av * bv;
    }
    d[i] = (int)sum;
  }
}
static inline void tlx_wgmma_fence() {}
static inline void tlx_wgmma_commit_group() {}
template <int N, int R> static inline void tlx_wgmma_wait_group(float*) {}
template <int R> static inline void tlx_pin_registers(unsigned*) {}
template <int R> static inline void tlx_fresh_registers(unsigned*) {}
static inline unsigned long long tlx_wgmma_desc(const void* base, unsigned offset, unsigned long long fields) {
  unsigned lo = ((unsigned)fields | ((tlx_smem_addr(base) & 0x3FFFFu) >> 4)) + (offset >> 4);
  return ((fields >> 32) << 32) | lo;
}
#define TLX_EMU_WGMMA_RS(N)                                                                                  \
  template <int TB>                                                                                         \
  static inline void tlx_wgmma_m64n##N##k16_f32_bf16_rs(float* d, unsigned a0, unsigned a1, unsigned a2,    \
                                                        unsigned a3, unsigned long long db, int scale_d) {  \
    cuemu::wgmma(d, a0, a1, a2, a3, db, scale_d, TB, N);                                                    \
  }                                                                                                         \
  template <int TB>                                                                                         \
  static inline void tlx_wgmma_m64n##N##k16_f32_f16_rs(float* d, unsigned a0, unsigned a1, unsigned a2,     \
                                                       unsigned a3, unsigned long long db, int scale_d) {   \
    cuemu::wgmma(d, a0, a1, a2, a3, db, scale_d, TB, N, 3, 3);                                              \
  }
TLX_EMU_WGMMA_RS(16)
TLX_EMU_WGMMA_RS(32)
TLX_EMU_WGMMA_RS(64)
TLX_EMU_WGMMA_RS(80)
TLX_EMU_WGMMA_RS(96)
TLX_EMU_WGMMA_RS(128)
TLX_EMU_WGMMA_RS(192)
TLX_EMU_WGMMA_RS(256)
// both operands in shared memory (16-bit): TA / TB the transpose bits (M-major A, N-major B)
#define TLX_EMU_WGMMA_SS(N)                                                                                  \
  template <int TA, int TB>                                                                                 \
  static inline void tlx_wgmma_m64n##N##k16_f32_bf16(float* d, unsigned long long da, unsigned long long db, \
                                                     int scale_d) {                                        \
    cuemu::wgmma(d, 0, 0, 0, 0, db, scale_d, TB, N, 0, 0, da, 1, TA);                                       \
  }                                                                                                         \
  template <int TA, int TB>                                                                                 \
  static inline void tlx_wgmma_m64n##N##k16_f32_f16(float* d, unsigned long long da, unsigned long long db,  \
                                                    int scale_d) {                                         \
    cuemu::wgmma(d, 0, 0, 0, 0, db, scale_d, TB, N, 3, 3, da, 1, TA);                                       \
  }
// every N of the ISA (8-256 in steps of 8: fuse-dot-pairs' summed widths, e.g. 128 + 16 + 8)
TLX_EMU_WGMMA_SS(8) TLX_EMU_WGMMA_SS(16) TLX_EMU_WGMMA_SS(24) TLX_EMU_WGMMA_SS(32) TLX_EMU_WGMMA_SS(40) TLX_EMU_WGMMA_SS(48) TLX_EMU_WGMMA_SS(56) TLX_EMU_WGMMA_SS(64)
TLX_EMU_WGMMA_SS(72) TLX_EMU_WGMMA_SS(80) TLX_EMU_WGMMA_SS(88) TLX_EMU_WGMMA_SS(96) TLX_EMU_WGMMA_SS(104) TLX_EMU_WGMMA_SS(112) TLX_EMU_WGMMA_SS(120) TLX_EMU_WGMMA_SS(128)
TLX_EMU_WGMMA_SS(136) TLX_EMU_WGMMA_SS(144) TLX_EMU_WGMMA_SS(152) TLX_EMU_WGMMA_SS(160) TLX_EMU_WGMMA_SS(168) TLX_EMU_WGMMA_SS(176) TLX_EMU_WGMMA_SS(184) TLX_EMU_WGMMA_SS(192)
TLX_EMU_WGMMA_SS(200) TLX_EMU_WGMMA_SS(208) TLX_EMU_WGMMA_SS(216) TLX_EMU_WGMMA_SS(224) TLX_EMU_WGMMA_SS(232) TLX_EMU_WGMMA_SS(240) TLX_EMU_WGMMA_SS(248) TLX_EMU_WGMMA_SS(256)
#define TLX_EMU_WGMMA_RS8(N, A, KA, KB)                                                                     \
  static inline void tlx_wgmma_m64n##N##k32_f32_##A##_rs(float* d, unsigned a0, unsigned a1, unsigned a2,    \
                                                        unsigned a3, unsigned long long db, int scale_d) {  \
    cuemu::wgmma(d, a0, a1, a2, a3, db, scale_d, 0, N, KA, KB);                                             \
  }
// both 8-bit operands in shared memory, K-major (no transpose bits): A kind KA, B kind KB (1 e4m3, 2 e5m2)
#define TLX_EMU_WGMMA_SS8(N, A, KA, KB)                                                                     \
  static inline void tlx_wgmma_m64n##N##k32_f32_##A(float* d, unsigned long long da, unsigned long long db, \
                                                   int scale_d) {                                          \
    cuemu::wgmma(d, 0, 0, 0, 0, db, scale_d, 0, N, KA, KB, da, 1, 0);                                       \
  }
TLX_EMU_WGMMA_SS8(32, f8e4m3, 1, 1) TLX_EMU_WGMMA_SS8(64, f8e4m3, 1, 1) TLX_EMU_WGMMA_SS8(128, f8e4m3, 1, 1)
TLX_EMU_WGMMA_SS8(256, f8e4m3, 1, 1) TLX_EMU_WGMMA_SS8(64, f8e5m2, 2, 2) TLX_EMU_WGMMA_SS8(128, f8e5m2, 2, 2)
TLX_EMU_WGMMA_SS8(128, f8e4m3_f8e5m2, 1, 2) TLX_EMU_WGMMA_SS8(128, f8e5m2_f8e4m3, 2, 1)
TLX_EMU_WGMMA_RS8(32, f8e4m3, 1, 1)
TLX_EMU_WGMMA_RS8(64, f8e4m3, 1, 1)
TLX_EMU_WGMMA_RS8(128, f8e4m3, 1, 1)
TLX_EMU_WGMMA_RS8(64, f8e5m2, 2, 2)
TLX_EMU_WGMMA_RS8(64, f8e4m3_f8e5m2, 1, 2)
namespace cuemu {
// cvt.rn.satfinite: the nearest finite code (ties to the even code), NaN to NaN; at or past the largest
// finite value (infinities too) that value -- the nearest-code search alone would see a tie there (every
// code infinitely far, or farther than a float resolves) and take an even code below it
static inline unsigned char fp8_from_f32(float x, int e5m2) {
  if (std::isnan(x)) return 0x7f;
  unsigned char sign = std::signbit(x) ? 0x80 : 0, best = 0;
  float ax = fabsf(x), err = INFINITY;
  int top = e5m2 ? 0x7b : 0x7e;                                       // the largest finite: 57344 / 448
  if (ax >= fp8f((unsigned char)top, e5m2)) return sign | (unsigned char)top;
  for (int code = 0; code <= top; ++code) {
    float e = fabsf(fp8f((unsigned char)code, e5m2) - ax);
    if (e < err || (e == err && !(code & 1))) { err = e; best = (unsigned char)code; }
  }
  return sign | best;
}
}  // namespace cuemu
static inline unsigned char tlx_cvt_rn_satfinite_e4m3_f32(float x) { return cuemu::fp8_from_f32(x, 0); }
static inline unsigned char tlx_cvt_rn_satfinite_e5m2_f32(float x) { return cuemu::fp8_from_f32(x, 1); }
static inline float tlx_e4m3_to_f32(unsigned char x) { return cuemu::fp8f(x, 0); }
static inline unsigned tlx_cvt_rn_satfinite_e4m3x4_f32(float b0, float b1, float b2, float b3) {
  return cuemu::fp8_from_f32(b0, 0) | (cuemu::fp8_from_f32(b1, 0) << 8) | (cuemu::fp8_from_f32(b2, 0) << 16) |
         ((unsigned)cuemu::fp8_from_f32(b3, 0) << 24);
}
static inline unsigned tlx_cvt_rn_satfinite_e5m2x4_f32(float b0, float b1, float b2, float b3) {
  return cuemu::fp8_from_f32(b0, 1) | (cuemu::fp8_from_f32(b1, 1) << 8) | (cuemu::fp8_from_f32(b2, 1) << 16) |
         ((unsigned)cuemu::fp8_from_f32(b3, 1) << 24);
}

namespace cuemu {
// run kernel `body` on a grid of CTAs of `threads` threads
static int run_grid(unsigned gx, unsigned gy, unsigned gz, int threads, std::function<void()> body) {
  g_error[0] = 0;                                      // (a run after a failed one starts clean)
  if (threads > 1024 || threads % 32) {
    snprintf(g_error, sizeof g_error, "%d threads: the emulation holds up to 32 whole warps", threads);
    return 1;
  }
  g_threads = threads;
  g_grid = Dim3{gx, gy, gz};
  g_bdim = Dim3{(unsigned)threads, 1, 1};
  g_thr.assign(threads, Thread{});
  // each fiber's stack: 8 MB reserved (committed as touched) above a guard page, so that an overflow
  // faults at once instead of corrupting the host process's heap
  const size_t STACK = 8u << 20, GUARD = 4096;
  for (auto& t : g_thr) {
    void* m = mmap(nullptr, STACK + GUARD, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) { snprintf(g_error, sizeof g_error, "no memory for the fibers' stacks"); return 1; }
    mprotect(m, GUARD, PROT_NONE);
    t.stack = (char*)m + GUARD;
  }
  struct Unmap {
    size_t size;
    ~Unmap() { for (auto& t : g_thr) if (t.stack) munmap(t.stack - 4096, size); }
  } unmap{STACK + GUARD};
  g_kernel = body;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        g_block = Dim3{x, y, z};
        g_bar_count = 0;
        for (auto& nb : g_named) nb = NamedBar{};
        memset(g_warp_count, 0, sizeof g_warp_count);
        memset(g_wg_count, 0, sizeof g_wg_count);
        for (auto& b : g_mbar) b = MBar{};
        memset(tlx_smem, 0xA5, sizeof tlx_smem);          // stale shared memory: a read before a write shows
        for (int i = 0; i < threads; ++i) {
          Thread& t = g_thr[i];
          t.state = READY; t.warp_gen = 0; t.wg_gen = 0; t.groups.clear(); t.open.clear();
          t.bulk.clear(); t.bulk_open.clear();
          getcontext(&t.ctx);
          t.ctx.uc_stack.ss_sp = t.stack; t.ctx.uc_stack.ss_size = STACK; t.ctx.uc_link = nullptr;
          makecontext(&t.ctx, entry, 0);
        }
        bool live = true;
        int idle = 0;
        while (live) {
          live = false;
          unsigned long long before = g_progress;
          int waiting = -1;
          for (int i = 0; i < threads; ++i) {
            if (g_thr[i].state == DONE) continue;
            live = true;
            waiting = i;
            g_cur = i;
            swapcontext(&g_sched, &g_thr[i].ctx);
          }
          if (g_error[0]) return 1;
          idle = live && g_progress == before ? idle + 1 : 0;
          if (idle > 2) {
            snprintf(g_error, sizeof g_error, "no progress in CTA (%u, %u, %u): every live thread waits on a barrier, "
                     "an mbarrier or a warp shuffle no other thread will complete (a deadlock; e.g. thread %d)",
                     x, y, z, waiting);
            return 1;
          }
        }
      }
  return g_error[0] ? 1 : 0;
}
}  // namespace cuemu
extern "C" const char* tlx_cuemu_error() { return cuemu::g_error; }
