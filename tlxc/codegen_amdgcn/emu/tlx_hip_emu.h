// tlx_hip_emu.h: run tlxc's generated HIP C++ on the host CPU, for numerical checks without an
// AMD GPU.  The generated text is compiled unchanged by the host g++ with this header included
// first (-include); the header gives the HIP keywords a host meaning and implements the AMDGCN
// builtins the text calls (codegen_amdgcn/amdgcn.py wraps each in one helper).
//
// Model (written from AMD's ISA documents for CDNA3/CDNA4 and the HSA runtime spec, not from the
// code generator's tables):
//   * one work-group at a time; its work-items are fibers (ucontext) on one OS thread, run in
//     turn until each reaches a barrier, a wave-level operation or its end;
//   * s_barrier: every unfinished work-item of the work-group waits for the others;
//   * wave64: work-items 64w..64w+63 form wave w; a wave-level builtin (readlane, ballot, DPP,
//     ds_swizzle, ds_bpermute, MFMA) waits until every unfinished lane of the wave reached it,
//     then each lane computes its result from all lanes' operands;
//   * LDS: __shared__ variables are static storage, shared by the work-group's fibers;
//   * the HSA dispatch packet (__builtin_amdgcn_dispatch_ptr) holds the launch's sizes.
// What this cannot show: timing, the real memory model (fibers interleave only at barriers and
// wave operations, so every access is sequentially consistent: a missing fence or s_waitcnt is
// invisible), lanes of a wave diverging inside a wave operation, hardware bugs.
#pragma once
#define TLX_HIP_EMU 1

#include <ucontext.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __forceinline__ inline

namespace tlx_emu {

constexpr int WAVE = 64;
enum State { READY, AT_BARRIER, AT_WAVE, DONE };

// hsa_kernel_dispatch_packet_t (HSA runtime spec 2.9), the fields the kernels read
struct DispatchPacket {
  uint16_t header, setup, workgroup_size[3], reserved0;
  uint32_t grid_size[3], private_segment_size, group_segment_size;
  uint64_t kernel_object;
  void* kernarg_address;
  uint64_t reserved2, completion_signal;
};
static_assert(offsetof(DispatchPacket, grid_size) == 12, "dispatch packet layout");

// A direct-to-LDS copy in flight: its bytes (read from global memory at issue) and where they land.
struct LdsCopy {
  void* dst;
  unsigned char bytes[16];
  unsigned size;
};

struct Item {
  ucontext_t ctx;
  State state = DONE;
  unsigned gen = 0;          // wave operations this lane has entered (selects the exchange bank)
  char* stack = nullptr;
  std::vector<LdsCopy> in_flight;   // this lane's global_load_lds copies not waited for yet
};

struct Emu {
  int threads = 0;
  unsigned group[3] = {0, 0, 0};
  DispatchPacket packet{};
  std::vector<Item> items;
  ucontext_t sched;
  int current = 0;
  std::function<void()> kernel;
  std::vector<uint64_t> bank;          // [wave][2][64] operands of the current wave operation
  std::vector<uint64_t> bank_b, bank_c;  // second/third operands (MFMA)
  std::vector<uint64_t> active;        // [wave][2] lanes that took part
  std::vector<unsigned char> blob;     // [wave][2][64][64]: MFMA A and B fragments (32 bytes each)
  std::string error;
  long long sleeps = 0;                // s_sleep yields of the current work-group (a spin-wait's budget)
};

inline Emu& E() {
  static Emu e;
  return e;
}

constexpr size_t STACK_BYTES = 512 * 1024;

inline void fiber_main() {
  Emu& e = E();
  e.kernel();
  e.items[e.current].state = DONE;
}

inline void yield(State s) {
  Emu& e = E();
  e.items[e.current].state = s;
  swapcontext(&e.items[e.current].ctx, &e.sched);
}

inline int lane_id() { return E().current % WAVE; }
inline int wave_id() { return E().current / WAVE; }

// Post this lane's operand(s) of a wave operation and wait for the wave; returns the bank index.
// Two banks alternate: a lane cannot enter operation k+2 before every lane has entered k+1,
// which each does only after reading operation k's bank.
inline size_t wave_exchange(uint64_t a, uint64_t b = 0, uint64_t c = 0) {
  Emu& e = E();
  Item& me = e.items[e.current];
  size_t slot = (size_t)wave_id() * 2 + (me.gen++ & 1);
  e.bank[slot * WAVE + lane_id()] = a;
  e.bank_b[slot * WAVE + lane_id()] = b;
  e.bank_c[slot * WAVE + lane_id()] = c;
  yield(AT_WAVE);
  return slot;
}

inline uint64_t lane_value(size_t slot, int lane) { return E().bank[slot * WAVE + (lane & (WAVE - 1))]; }
inline bool lane_active(size_t slot, int lane) { return (E().active[slot] >> (lane & (WAVE - 1))) & 1; }

inline void fail(const std::string& why) {
  if (E().error.empty()) E().error = why;
}

// Run one work-group to completion; false (E().error says why) on a deadlock.
inline bool run_group() {
  Emu& e = E();
  int n = e.threads, waves = (n + WAVE - 1) / WAVE;
  for (int i = 0; i < n; ++i) {
    Item& it = e.items[i];
    getcontext(&it.ctx);
    it.ctx.uc_stack.ss_sp = it.stack;
    it.ctx.uc_stack.ss_size = STACK_BYTES;
    it.ctx.uc_link = &e.sched;
    makecontext(&it.ctx, (void (*)())fiber_main, 0);
    it.state = READY;
    it.gen = 0;
    it.in_flight.clear();
  }
  e.sleeps = 0;
  for (;;) {
    bool slept = false;
    for (int i = 0; i < n; ++i) {
      if (e.items[i].state == READY) {
        e.current = i;
        swapcontext(&e.sched, &e.items[i].ctx);
        if (e.items[i].state == READY) slept = true;      // it yielded from s_sleep
      }
    }
    if (!e.error.empty()) return false;
    bool released = false, all_done = true, all_barrier = true;
    for (int w = 0; w < waves; ++w) {
      int lo = w * WAVE, hi = lo + WAVE < n ? lo + WAVE : n, at_wave = 0, live = 0;
      uint64_t mask = 0;
      for (int i = lo; i < hi; ++i) {
        if (e.items[i].state != DONE) ++live;
        if (e.items[i].state == AT_WAVE) { ++at_wave; mask |= 1ull << (i - lo); }
      }
      if (at_wave && at_wave == live) {
        size_t slot = (size_t)w * 2 + ((e.items[lo + __builtin_ctzll(mask)].gen - 1) & 1);
        e.active[slot] = mask;
        for (int i = lo; i < hi; ++i)
          if (e.items[i].state == AT_WAVE) e.items[i].state = READY;
        released = true;
      }
    }
    for (int i = 0; i < n; ++i) {
      if (e.items[i].state != DONE) all_done = false;
      if (e.items[i].state != DONE && e.items[i].state != AT_BARRIER) all_barrier = false;
    }
    if (all_done) return true;
    if (released || slept) continue;
    if (all_barrier) {
      for (int i = 0; i < n; ++i)
        if (e.items[i].state == AT_BARRIER) e.items[i].state = READY;
      continue;
    }
    std::string states;
    for (int i = 0; i < n; ++i) states += "RBWD"[e.items[i].state];
    fail("deadlock in work-group (" + std::to_string(e.group[0]) + "," + std::to_string(e.group[1]) + "," +
         std::to_string(e.group[2]) + "): a wave operation that not every lane of its wave reached, or a "
         "barrier some waves skip; work-item states (B barrier, W wave op, D done): " + states);
    return false;
  }
}

inline int launch_group_grid(unsigned gx, unsigned gy, unsigned gz, unsigned threads) {
  Emu& e = E();
  e.error.clear();
  if (threads == 0 || threads > 1024) {
    fail("work-group size " + std::to_string(threads) + " outside 1..1024");
    return 1;
  }
  if ((int)e.items.size() < (int)threads) {
    size_t old = e.items.size();
    e.items.resize(threads);
    for (size_t i = old; i < threads; ++i) e.items[i].stack = (char*)malloc(STACK_BYTES);
  }
  e.threads = (int)threads;
  int waves = ((int)threads + WAVE - 1) / WAVE;
  e.bank.assign((size_t)waves * 2 * WAVE, 0);
  e.bank_b.assign((size_t)waves * 2 * WAVE, 0);
  e.bank_c.assign((size_t)waves * 2 * WAVE, 0);
  e.active.assign((size_t)waves * 2, 0);
  e.blob.assign((size_t)waves * 2 * WAVE * 64, 0);
  e.packet = DispatchPacket{};
  e.packet.workgroup_size[0] = (uint16_t)threads;
  e.packet.workgroup_size[1] = e.packet.workgroup_size[2] = 1;
  e.packet.grid_size[0] = gx * threads;
  e.packet.grid_size[1] = gy;
  e.packet.grid_size[2] = gz;
  for (unsigned z = 0; z < gz; ++z)
    for (unsigned y = 0; y < gy; ++y)
      for (unsigned x = 0; x < gx; ++x) {
        e.group[0] = x, e.group[1] = y, e.group[2] = z;
        if (!run_group()) return e.error.rfind("deadlock", 0) == 0 ? 2 : 3;
        if (!e.error.empty()) return 3;       // a builtin used outside what the hardware allows
      }
  return 0;
}

template <class... A, size_t... I>
void call_with(void (*k)(A...), void** args, std::index_sequence<I...>) {
  k(*(std::remove_cv_t<std::remove_reference_t<A>>*)args[I]...);
}

template <class... A>
int launch(void (*k)(A...), void** args, unsigned gx, unsigned gy, unsigned gz, unsigned threads) {
  E().kernel = [=]() { call_with(k, args, std::index_sequence_for<A...>{}); };
  return launch_group_grid(gx, gy, gz, threads);
}

// -- the builtins ------------------------------------------------------------------------------
inline unsigned workitem_id_x() { return (unsigned)E().current; }
inline unsigned workgroup_id(int axis) { return E().group[axis]; }
inline const void* dispatch_ptr() { return &E().packet; }

inline void s_barrier() { yield(AT_BARRIER); }

// s_sleep in a spin-wait: let the other work-items run; a wait that spins this long never ends
constexpr long long SLEEP_BUDGET = 200000;      // sleeps per work-group (small shapes need far fewer)
inline void s_sleep() {
  if (++E().sleeps > SLEEP_BUDGET) fail("a spin-wait (s_sleep loop) never ended: a barrier wait no arrival completes");
  yield(READY);
}

inline int readfirstlane(int x) {
  size_t s = wave_exchange((uint32_t)x);
  return (int)(uint32_t)lane_value(s, __builtin_ctzll(E().active[s]));
}

inline int readlane(int x, int lane) {
  size_t s = wave_exchange((uint32_t)x);
  return (int)(uint32_t)lane_value(s, lane);
}

inline uint64_t ballot_w64(bool pred) {
  size_t s = wave_exchange(pred ? 1 : 0);
  uint64_t m = 0;
  for (int l = 0; l < WAVE; ++l)
    if (lane_active(s, l) && lane_value(s, l)) m |= 1ull << l;
  return m;
}

// ds_bpermute_b32: lane l returns src of lane (addr[l] / 4) mod 64; an inactive source gives 0
inline int ds_bpermute(int addr, int src) {
  size_t s = wave_exchange((uint32_t)src);
  int from = (addr >> 2) & (WAVE - 1);
  return lane_active(s, from) ? (int)(uint32_t)lane_value(s, from) : 0;
}

// ds_swizzle_b32 offset:pattern.  Bit 15 set: QDMode, lane 4q+i reads 4q + pattern[2i+1:2i].
// Bit 15 clear: bit-mask mode within each group of 32 lanes: and = [4:0], or = [9:5], xor = [14:10].
inline int ds_swizzle(int src, int pattern) {
  size_t s = wave_exchange((uint32_t)src);
  int l = lane_id(), from;
  if (pattern & 0x8000) {
    from = (l & ~3) | ((pattern >> (2 * (l & 3))) & 3);
  } else {
    int and_m = pattern & 0x1f, or_m = (pattern >> 5) & 0x1f, xor_m = (pattern >> 10) & 0x1f;
    from = (l & 0x20) | ((((l & 0x1f) & and_m) | or_m) ^ xor_m);
  }
  return lane_active(s, from) ? (int)(uint32_t)lane_value(s, from) : 0;
}

// DPP source lane for control `ctrl` (GCN3/CDNA "DPP_CTRL" enumeration); -1: no valid source.
inline int dpp_source(int l, int ctrl) {
  int row = l & ~15, i = l & 15;
  if (ctrl <= 0xff) return (l & ~3) | ((ctrl >> (2 * (l & 3))) & 3);          // quad_perm
  if (ctrl >= 0x101 && ctrl <= 0x10f) { int j = i + (ctrl & 15); return j < 16 ? row + j : -1; }  // row_shl
  if (ctrl >= 0x111 && ctrl <= 0x11f) { int j = i - (ctrl & 15); return j >= 0 ? row + j : -1; }  // row_shr
  if (ctrl >= 0x121 && ctrl <= 0x12f) return row + ((i + (ctrl & 15)) & 15);  // row_ror
  if (ctrl == 0x130) return l + 1 < WAVE ? l + 1 : -1;                          // wave_shl:1
  if (ctrl == 0x134) return (l + 1) & (WAVE - 1);                               // wave_rol:1
  if (ctrl == 0x138) return l - 1;                                              // wave_shr:1
  if (ctrl == 0x13c) return (l - 1) & (WAVE - 1);                               // wave_ror:1
  if (ctrl == 0x140) return row + (15 - i);                                     // row_mirror
  if (ctrl == 0x141) return row + ((i & 8) | (7 - (i & 7)));                    // row_half_mirror
  if (ctrl == 0x142) return row ? row - 1 : -1;                                 // row_bcast:15 (lane 15 of the row before)
  if (ctrl == 0x143) return l >= 32 ? 31 : -1;                                  // row_bcast:31
  return -3;
}

inline int update_dpp(int old, int src, int ctrl, int row_mask, int bank_mask, bool bound_ctrl) {
  size_t s = wave_exchange((uint32_t)src, (uint32_t)old);
  int l = lane_id();
  int from = dpp_source(l, ctrl);
  if (from == -3) { fail("DPP control " + std::to_string(ctrl) + " is not emulated"); return old; }
  bool written = ((row_mask >> (l >> 4)) & 1) && ((bank_mask >> ((l >> 2) & 3)) & 1);
  if (!written) return old;
  if (from < 0 || !lane_active(s, from)) return bound_ctrl ? 0 : old;
  return (int)(uint32_t)lane_value(s, from);
}

// MFMA, one block, no broadcast (cbsz = abid = blgp = 0), as the CDNA3/CDNA4 ISA lays it out:
//   A (M x K): element (i, k) in lane i + M * (k / P), vector element k % P (P = K * M / 64 per lane)
//   B (K x N): element (k, j) in lane j + N * (k / P), vector element k % P
//   D (M x N), register r of lane l:  32x32: i = 8 * (r / 4) + 4 * (l / 32) + r % 4, j = l % 32
//                                     16x16: i = 4 * (l / 16) + r,                   j = l % 16
// Products are exact in double; the sum is rounded to f32 once (the hardware rounds per step).
inline float bf16_bits_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

template <int M, int N, int K, bool BF16, class VAB, class VC>
VC mfma(VAB a, VAB b, VC c) {
  static_assert(M == N && (M == 16 || M == 32), "square 16 or 32 MFMA blocks");
  constexpr int P = K * M / WAVE;                 // k values per lane
  static_assert(sizeof(VAB) == 2 * P, "operand vector size");
  constexpr int R = M * N / WAVE;                 // accumulator registers per lane
  static_assert(sizeof(VC) == 4 * R, "accumulator vector size");
  Emu& e = E();
  Item& me = e.items[e.current];
  size_t slot = (size_t)wave_id() * 2 + (me.gen & 1);
  unsigned char* mine = &e.blob[(slot * WAVE + lane_id()) * 64];
  memcpy(mine, &a, sizeof a);
  memcpy(mine + 32, &b, sizeof b);
  wave_exchange(0);
  if (__builtin_popcountll(e.active[slot]) != WAVE) fail("MFMA with inactive lanes in the wave");
  auto operand = [&](int lane, int which, int idx) -> double {
    const unsigned char* p = &e.blob[(slot * WAVE + lane) * 64 + 32 * which + 2 * idx];
    uint16_t bits;
    memcpy(&bits, p, 2);
    if (BF16) return bf16_bits_to_float(bits);
    _Float16 h;
    memcpy(&h, &bits, 2);
    return (double)(float)h;
  };
  int l = lane_id();
  VC d;
  for (int r = 0; r < R; ++r) {
    int i = M == 32 ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r;
    int j = l % N;
    double sum = c[r];
    for (int k = 0; k < K; ++k) sum += operand(i + M * (k / P), 0, k % P) * operand(j + N * (k / P), 1, k % P);
    d[r] = (float)sum;
  }
  return d;
}

// The fp8 MFMA operand formats (one byte each; s sign, e exponent field, m mantissa field):
//   gfx942 (CDNA3 ISA, "FP8 and BF8"): FNUZ.  FP8 = E4M3 bias 8, BF8 = E5M2 bias 16; no infinities and
//     no negative zero: 0x80 is the one NaN, every other code is finite;
//   gfx950 (CDNA4 ISA): OCP.  FP8 = E4M3 bias 7 (S.1111.111 is NaN, no infinities), BF8 = E5M2 bias 15
//     (exponent 11111: infinity when m = 0, else NaN).
// A normal code is (1 + m / 2^M) 2^(e - bias), a subnormal one (e = 0) m / 2^M 2^(1 - bias).  The arch
// comes from the build (emu/run.py defines __gfx942__ or __gfx950__ as the device compiler does).
inline double fp8_value(uint8_t code, bool bf8) {
  const int ebits = bf8 ? 5 : 4, mbits = bf8 ? 2 : 3;
  const int e = (code >> mbits) & ((1 << ebits) - 1), m = code & ((1 << mbits) - 1);
  const double sign = (code & 0x80) ? -1.0 : 1.0;
#if defined(__gfx950__)
  const int bias = bf8 ? 15 : 7;
  if (!bf8 && (code & 0x7f) == 0x7f) return NAN;
  if (bf8 && e == 31) return m ? NAN : sign * INFINITY;
#elif defined(__gfx942__)
  const int bias = bf8 ? 16 : 8;
  if (code == 0x80) return NAN;
#else
  const int bias = 0;
  fail("an fp8 MFMA on the emulation needs its target (emu.build(..., arch=...))");
#endif
  if (e == 0) return sign * std::ldexp((double)m, 1 - bias - mbits);
  return sign * std::ldexp((double)((1 << mbits) + m), e - bias - mbits);
}

// fp8 MFMA: 8 operand bytes per lane, A (M x K) element (i, k) in byte k % 8 of lane i + M (k / 8),
// B (K x N) element (k, j) in byte k % 8 of lane j + N (k / 8); the accumulator as for f16 above.
template <int M, int N, int K, bool A_BF8, bool B_BF8, class VC>
VC mfma8(long a, long b, VC c) {
  static_assert(M == N && (M == 16 || M == 32) && K * M / WAVE == 8, "fp8 MFMA: 8 bytes per lane");
  constexpr int R = M * N / WAVE;
  static_assert(sizeof(VC) == 4 * R, "accumulator vector size");
  Emu& e = E();
  Item& me = e.items[e.current];
  size_t slot = (size_t)wave_id() * 2 + (me.gen & 1);
  unsigned char* mine = &e.blob[(slot * WAVE + lane_id()) * 64];
  memcpy(mine, &a, 8);
  memcpy(mine + 32, &b, 8);
  wave_exchange(0);
  if (__builtin_popcountll(e.active[slot]) != WAVE) fail("MFMA with inactive lanes in the wave");
  auto operand = [&](int lane, int which, int idx) -> double {
    return fp8_value(e.blob[(slot * WAVE + lane) * 64 + 32 * which + idx], which ? B_BF8 : A_BF8);
  };
  int l = lane_id();
  VC d;
  for (int r = 0; r < R; ++r) {
    int i = M == 32 ? 8 * (r / 4) + 4 * (l / 32) + r % 4 : 4 * (l / 16) + r;
    int j = l % N;
    double sum = c[r];
    for (int k = 0; k < K; ++k) sum += operand(i + M * (k / 8), 0, k % 8) * operand(j + N * (k / 8), 1, k % 8);
    d[r] = (float)sum;
  }
  return d;
}

// global_load_lds (gfx950: 16 bytes): lane l writes its `size` bytes from `src` to LDS at
// M0 + offset + size * l; M0 comes from `dst`, which every lane must give the same.  The copy is
// asynchronous (counted by vmcnt): the emulation fills the destination with 0xff bytes (NaN in
// every float format) at issue and writes the data only at the wave's next s_waitcnt vmcnt(0),
// the latest moment the hardware may, so a read before the wait, or by another wave before the
// barrier that follows it, sees NaN instead of the data.
inline void global_load_lds(const void* src, void* dst, unsigned size, int offset) {
  size_t s = wave_exchange((uint64_t)(uintptr_t)dst);
  int first = __builtin_ctzll(E().active[s]);
  if ((uint64_t)(uintptr_t)dst != lane_value(s, first))
    fail("global_load_lds: the LDS destination differs between lanes (it must be wave-uniform: it goes to M0)");
  if (size > 16) fail("global_load_lds: more than 16 bytes per lane");
  LdsCopy copy{(char*)dst + offset + (size_t)size * lane_id(), {}, size};
  memcpy(copy.bytes, src, size);
  memset(copy.dst, 0xff, size);
  E().items[E().current].in_flight.push_back(copy);
}

// s_waitcnt: with vmcnt(0) (bits 3:0 and 15:14 clear) every vector memory load of the wave has
// landed: each lane writes its direct-to-LDS copies, then the wave meets, so no lane goes on
// before every lane's copies are in LDS.  Other counters (lgkmcnt, expcnt) order nothing here:
// LDS and scalar accesses take effect at once in the emulation.
inline void s_waitcnt(int imm) {
  if ((imm & 0xf) != 0 || ((imm >> 14) & 3) != 0) return;
  Item& me = E().items[E().current];
  for (const LdsCopy& c : me.in_flight) memcpy(c.dst, c.bytes, c.size);
  me.in_flight.clear();
  wave_exchange(0);
}

}  // namespace tlx_emu

// The AMDGCN builtins, as the generated text calls them (clang's names and argument orders).
#define __builtin_amdgcn_workitem_id_x() tlx_emu::workitem_id_x()
#define __builtin_amdgcn_workgroup_id_x() tlx_emu::workgroup_id(0)
#define __builtin_amdgcn_workgroup_id_y() tlx_emu::workgroup_id(1)
#define __builtin_amdgcn_workgroup_id_z() tlx_emu::workgroup_id(2)
#define __builtin_amdgcn_dispatch_ptr() tlx_emu::dispatch_ptr()
#define __builtin_amdgcn_s_barrier() tlx_emu::s_barrier()
#define __builtin_amdgcn_s_sleep(n) ((void)(n), tlx_emu::s_sleep())
#define __builtin_amdgcn_fence(order, scope) ((void)(order), (void)(scope))
#define __builtin_amdgcn_s_setprio(p) ((void)(p))
#define __builtin_amdgcn_sched_barrier(mask) ((void)(mask))
#define __builtin_amdgcn_readfirstlane(x) tlx_emu::readfirstlane(x)
#define __builtin_amdgcn_readlane(x, l) tlx_emu::readlane((x), (l))
#define __builtin_amdgcn_ballot_w64(p) tlx_emu::ballot_w64(p)
#define __builtin_amdgcn_ds_bpermute(addr, x) tlx_emu::ds_bpermute((addr), (x))
#define __builtin_amdgcn_ds_swizzle(x, pattern) tlx_emu::ds_swizzle((x), (pattern))
#define __builtin_amdgcn_update_dpp(old, x, ctrl, rows, banks, bound) \
  tlx_emu::update_dpp((old), (x), (ctrl), (rows), (banks), (bound))

#define __builtin_amdgcn_mfma_f32_32x32x8f16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<32, 32, 8, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x16f16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<16, 16, 16, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<32, 32, 8, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<16, 16, 16, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_f16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<16, 16, 32, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x16_f16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<32, 32, 16, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_bf16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<16, 16, 32, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x16_bf16(a, b, c, cbsz, abid, blgp) tlx_emu::mfma<32, 32, 16, true>(a, b, c)

#define __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<32, 32, 16, false, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<32, 32, 16, false, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<32, 32, 16, true, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<32, 32, 16, true, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<16, 16, 32, false, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_fp8_bf8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<16, 16, 32, false, true>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<16, 16, 32, true, false>(a, b, c)
#define __builtin_amdgcn_mfma_f32_16x16x32_bf8_bf8(a, b, c, cbsz, abid, blgp) tlx_emu::mfma8<16, 16, 32, true, true>(a, b, c)

#define __builtin_amdgcn_global_load_lds(src, dst, size, offset, aux) \
  tlx_emu::global_load_lds((const void*)(src), (void*)(dst), (size), (offset))
#define __builtin_amdgcn_s_waitcnt(imm) tlx_emu::s_waitcnt(imm)

// One entry per kernel, appended after the generated text by the runner (emu/run.py).
#define TLX_EMU_ENTRY(K)                                                                                  \
  extern "C" int tlx_emu_run_##K(void** args, unsigned gx, unsigned gy, unsigned gz, unsigned threads) { \
    return tlx_emu::launch(K, args, gx, gy, gz, threads);                                                 \
  }

extern "C" __attribute__((used)) const char* tlx_emu_error() { return tlx_emu::E().error.c_str(); }
