for (int k_ = s_12; ; k_ += s_13) {
      __syncwarp();  // converged warps at the top of a loop that issues wgmma (ptxas C7519)
      tlx_cp_async_wait_group<1>();
      tlx_fence_proxy_async_shared_cta();  // fence: every thread's cp.async data, visible to all threads and the async proxy
      __syncthreads();  // sync: every thread's cp.async data, visible to all threads and the async proxy
      int s_39 = 3;
      int s_40;
      s_40 = (int)((k_ % s_39));
      // kernels_dot_fp8.py:25
      int s_41 = 128;
      // kernels_dot_fp8.py:26
      int s_42 = 128;
      // kernels_dot_fp8.py:27
      unsigned char* s_43 = dot0_a_smem + s_40 * 16384;
      unsigned char* s_44 = dot0_b_smem + s_40 * 32768;
      // wgmma: 1 tile(s) of m64n256k32 x 4 k-steps per warpgroup; A K-major, B K-major
      float dacc[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) dacc[i] = acc_1[i];
      tlx_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n256k32_f32_f8e4m3(&dacc[0], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_43), ((((warp) >> 2) & 1) * 64) * 128 + (32 * kk) * 1, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_44), (0) * 128 + (32 * kk) * 1, 0x4000004000010000ull), kk == 0 ? (int)(true) : 1);
      }
      tlx_wgmma_commit_group();
      tlx_wgmma_wait_group<1, 128>(dacc);
      __syncthreads();  // sync: every warpgroup's retired wgmma reads, before shared memory is refilled
      // kernels_dot_fp8.py:28
      int s_45 = 128;
      int t_50[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_50[i] = s_45;
      unsigned char* a_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_3[i] = (a_ptrs_2[i] + t_50[i]);
      // kernels_dot_fp8.py:29
      int s_46 = 128;
      int t_51[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_51[i] = s_46;
      unsigned char* b_ptrs_3[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_3[i] = (b_ptrs_2[i] + t_51[i]);
      // kernels_dot_fp8.py:24
      int s_47 = 2;
      int s_48;
      s_48 = (int)((k_ + s_47));
      int s_49 = 3;
      int s_50;
      s_50 = (int)((s_48 % s_49));
      int s_51 = 2;
      int s_52;
      s_52 = (int)((s_13 * s_51));
      int s_53;
      s_53 = (int)((k_ + s_52));
      bool s_54;
      s_54 = (s_53 < s_11);
      int t_52[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_52[i] = 2;
      int t_53[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_53[i] = (int)((t_50[i] * t_52[i]));
      unsigned char* a_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_4[i] = (a_ptrs_2[i] + t_53[i]);
      // kernels_dot_fp8.py:25
      int s_55;
      s_55 = (int)((s_53 * s_41));
      int s_56;
      s_56 = (int)((K - s_55));
      // kernels_dot_fp8.py:24
      unsigned char* s_57 = dot0_a_smem + s_50 * 16384;
      // kernels_dot_fp8.py:25
      int t_54[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_54[i] = s_56;
      bool t_55[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_55[i] = (ks[i] < t_54[i]);
      const int map_8[64] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      bool t_56[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_56[i] = t_55[map_8[i]];
      // kernels_dot_fp8.py:24
      bool t_57[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_57[i] = s_54;
      bool t_58[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_58[i] = (t_56[i] & t_57[i]);
      // kernels_dot_fp8.py:25
      #pragma unroll
      for (int i = 0; i < 64; i += 16) {
        tlx_cp_async_16(reinterpret_cast<unsigned char*>(reinterpret_cast<unsigned char*>(s_57) + ((((tc2 + ((((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64))) * 128 + (tc3 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4) + (((i) >> 3 & 1) * 8))))) ^ ((((((tc2 + ((((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64))) * 128 + (tc3 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4) + (((i) >> 3 & 1) * 8))))) >> 7) & 7) << 4))), a_ptrs_4[i], t_58[i]);
      }
      // kernels_dot_fp8.py:24
      int t_59[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_59[i] = 2;
      int t_60[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_60[i] = (int)((t_51[i] * t_59[i]));
      unsigned char* b_ptrs_4[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_4[i] = (b_ptrs_2[i] + t_60[i]);
      // kernels_dot_fp8.py:26
      int s_58;
      s_58 = (int)((s_53 * s_42));
      int s_59;
      s_59 = (int)((K - s_58));
      // kernels_dot_fp8.py:24
      unsigned char* s_60 = dot0_b_smem + s_50 * 32768;
      // kernels_dot_fp8.py:26
      int t_61[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_61[i] = s_59;
      bool t_62[16];
      #pragma unroll
      for (int i = 0; i < 16; ++i) t_62[i] = (ks[i] < t_61[i]);
      const int map_9[128] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
      bool t_63[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_63[i] = t_62[map_9[i]];
      // kernels_dot_fp8.py:24
      bool t_64[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_64[i] = s_54;
      bool t_65[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) t_65[i] = (t_63[i] & t_64[i]);
      // kernels_dot_fp8.py:26
      #pragma unroll
      for (int i = 0; i < 128; i += 16) {
        tlx_cp_async_16(reinterpret_cast<unsigned char*>(reinterpret_cast<unsigned char*>(s_60) + ((((tc5 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4) + (((i) >> 3 & 1) * 8))) + (tc6 + ((((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64) + (((i) >> 6 & 1) * 128))) * 128)) ^ ((((((tc5 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4) + (((i) >> 3 & 1) * 8))) + (tc6 + ((((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64) + (((i) >> 6 & 1) * 128))) * 128)) >> 7) & 7) << 4))), b_ptrs_4[i], t_65[i]);
      }
      // kernels_dot_fp8.py:24
      tlx_cp_async_commit_group();
      #pragma unroll
      for (int i = 0; i < 128; ++i) acc_1[i] = dacc[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_2[i] = a_ptrs_3[i];
      #pragma unroll
      for (int i = 0; i < 128; ++i) b_ptrs_2[i] = b_ptrs_3[i];
      if (k_ + s_13 >= s_11) {
        tlx_wgmma_wait_group<0, 128>(acc_1);  // the last iteration drains
        __syncthreads();  // sync: every warpgroup's retired wgmma reads, before shared memory is refilled
        break;
      }
    }
  }