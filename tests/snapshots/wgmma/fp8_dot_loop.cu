for (int k_ = s_12; ; k_ += s_13) {
      __syncwarp();  // converged warps at the top of a loop that issues wgmma (ptxas C7519)
      tlx_cp_async_wait_group<1>();
      tlx_fence_proxy_async_shared_cta();  // fence: every thread's cp.async data, visible to all threads and the async proxy
      __syncthreads();  // sync: every thread's cp.async data, visible to all threads and the async proxy
      int s_39 = 1;
      int s_40;
      s_40 = (int)((stage_1 + s_39));
      int s_41 = 3;
      bool s_42;
      s_42 = (s_40 == s_41);
      int s_43 = 0;
      int stage_2;
      stage_2 = (s_42 ? s_43 : s_40);
      // kernels_dot_fp8.py:25
      int s_44 = 128;
      // kernels_dot_fp8.py:26
      int s_45 = 128;
      // kernels_dot_fp8.py:27
      unsigned char* s_46 = dot0_a_smem + stage_1 * 16384;
      unsigned char* s_47 = dot0_b_smem + stage_1 * 32768;
      // wgmma: 1 tile(s) of m64n256k32 x 4 k-steps per warpgroup; A K-major, B K-major
      float dacc[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) dacc[i] = acc_1[i];
      tlx_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n256k32_f32_f8e4m3(&dacc[0], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_46), ((((warp) >> 2) & 1) * 64) * 128 + (32 * kk) * 1, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_47), (0) * 128 + (32 * kk) * 1, 0x4000004000010000ull), kk == 0 ? (int)(true) : 1);
      }
      tlx_wgmma_commit_group();
      tlx_wgmma_wait_group<1, 128>(dacc);
      __syncthreads();  // sync: every warpgroup's retired wgmma reads, before shared memory is refilled
      // kernels_dot_fp8.py:28
      int s_48 = 128;
      int t_50[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_50[i] = s_48;
      unsigned char* a_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_3[i] = (a_ptrs_2[i] + t_50[i]);
      // kernels_dot_fp8.py:29
      int s_49 = 128;
      int t_51[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_51[i] = s_49;
      unsigned char* b_ptrs_3[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_3[i] = (b_ptrs_2[i] + t_51[i]);
      // kernels_dot_fp8.py:24
      int s_50 = 0;
      bool s_51;
      s_51 = (stage_1 == s_50);
      int s_52 = 2;
      int s_53 = 1;
      int s_54;
      s_54 = (int)((stage_1 - s_53));
      int s_55;
      s_55 = (s_51 ? s_52 : s_54);
      int s_56 = 2;
      int s_57;
      s_57 = (int)((s_13 * s_56));
      int s_58;
      s_58 = (int)((k_ + s_57));
      bool s_59;
      s_59 = (s_58 < s_11);
      long long s_60;
      s_60 = (long long)((long long)(s_58));
      // kernels_dot_fp8.py:25
      int s_61;
      s_61 = (int)((s_58 * s_44));
      int s_62;
      s_62 = (int)((K - s_61));
      // kernels_dot_fp8.py:24
      unsigned char* s_63 = dot0_a_smem + s_55 * 16384;
      long long t_52[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_52[i] = (long long)((long long)(t_50[i]));
      long long t_53[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_53[i] = s_60;
      long long t_54[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_54[i] = (long long)((t_52[i] * t_53[i]));
      unsigned char* a_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_4[i] = (tlx_opaque_pointer(a_ptrs[i]) + t_54[i]);
      // kernels_dot_fp8.py:25
      int t_55[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_55[i] = s_62;
      bool t_56[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_56[i] = (ks[i] < t_55[i]);
      const int map_8[64] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      bool t_57[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_57[i] = t_56[map_8[i]];
      // kernels_dot_fp8.py:24
      bool t_58[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_58[i] = s_59;
      bool t_59[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_59[i] = (t_57[i] & t_58[i]);
      // kernels_dot_fp8.py:25
      const int run_4[4] = {0, 4096, 8192, 12288};
      #pragma unroll
      for (int i = 0; i < 64; i += 16) {
        tlx_cp_async_16((reinterpret_cast<unsigned char*>(reinterpret_cast<unsigned char*>(s_63) + ((((tc2 + ((((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64))) * 128 + (tc3 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4) + (((0) >> 3 & 1) * 8))))) ^ ((((((tc2 + ((((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64))) * 128 + (tc3 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4) + (((0) >> 3 & 1) * 8))))) >> 7) & 7) << 4))) + run_4[(i) / 16]), a_ptrs_4[i], t_59[i]);
      }
      // kernels_dot_fp8.py:24
      long long s_64;
      s_64 = (long long)((long long)(s_58));
      // kernels_dot_fp8.py:26
      int s_65;
      s_65 = (int)((s_58 * s_45));
      int s_66;
      s_66 = (int)((K - s_65));
      // kernels_dot_fp8.py:24
      unsigned char* s_67 = dot0_b_smem + s_55 * 32768;
      long long t_60[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_60[i] = (long long)((long long)(t_51[i]));
      long long t_61[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_61[i] = s_64;
      long long t_62[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_62[i] = (long long)((t_60[i] * t_61[i]));
      unsigned char* b_ptrs_4[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_4[i] = (tlx_opaque_pointer(b_ptrs[i]) + t_62[i]);
      // kernels_dot_fp8.py:26
      int t_63[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_63[i] = s_66;
      bool t_64[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_64[i] = (ks[i] < t_63[i]);
      const int map_9[128] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      bool t_65[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_65[i] = t_64[map_9[i]];
      // kernels_dot_fp8.py:24
      bool t_66[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_66[i] = s_59;
      bool t_67[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_67[i] = (t_65[i] & t_66[i]);
      // kernels_dot_fp8.py:26
      const int run_5[8] = {0, 4096, 8192, 12288, 16384, 20480, 24576, 28672};
      #pragma unroll
      for (int i = 0; i < 128; i += 16) {
        tlx_cp_async_16((reinterpret_cast<unsigned char*>(reinterpret_cast<unsigned char*>(s_67) + ((((tc5 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4) + (((0) >> 3 & 1) * 8))) + (tc6 + ((((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64) + (((0) >> 6 & 1) * 128))) * 128)) ^ ((((((tc5 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4) + (((0) >> 3 & 1) * 8))) + (tc6 + ((((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64) + (((0) >> 6 & 1) * 128))) * 128)) >> 7) & 7) << 4))) + run_5[(i) / 16]), b_ptrs_4[i], t_67[i]);
      }
      // kernels_dot_fp8.py:24
      tlx_cp_async_commit_group();
      #pragma unroll
      for (int i = 0; i < 128; ++i) acc_1[i] = dacc[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_2[i] = a_ptrs_3[i];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_2[i] = b_ptrs_3[i];
      stage_1 = stage_2;
      if (k_ + s_13 >= s_11) {
        tlx_wgmma_wait_group<0, 128>(acc_1);  // the last iteration drains
        __syncthreads();  // sync: every warpgroup's retired wgmma reads, before shared memory is refilled
        break;
      }
    }
  }