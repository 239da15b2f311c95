for (int k_ = s_12; ; k_ += s_13) {
      __syncwarp();  // converged warps at the top of a loop that issues wgmma (ptxas C7519)
      tlx_cp_async_wait_group<1>();
      tlx_fence_proxy_async_shared_cta();  // fence: every thread's cp.async data, visible to all threads and the async proxy
      __syncthreads();  // sync: every thread's cp.async data, visible to all threads and the async proxy
      int s_40 = 3;
      int s_41;
      s_41 = (int)((k_ % s_40));
      // kernels_dot_wgmma.py:23
      int s_42 = 64;
      // kernels_dot_wgmma.py:24
      int s_43 = 64;
      // kernels_dot_wgmma.py:25
      unsigned short* s_44 = dot0_a_smem + s_41 * 8192;
      unsigned short* s_45 = dot0_b_smem + s_41 * 8192;
      // wgmma: 2 tile(s) of m64n128k16 x 4 k-steps per warpgroup; A K-major, B N-major
      float dacc[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) dacc[i] = acc_1[i];
      tlx_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n128k16_f32_f16<0, 1>(&dacc[0], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_44), (0) * 128 + (16 * kk) * 2, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_45), ((0) / 64) * 8192 + ((0) % 64) * 2 + (16 * kk) * 128, 0x4000004002000000ull), kk == 0 ? (int)(true) : 1);
      }
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n128k16_f32_f16<0, 1>(&dacc[64], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_44), (0 + 64) * 128 + (16 * kk) * 2, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_45), ((0) / 64) * 8192 + ((0) % 64) * 2 + (16 * kk) * 128, 0x4000004002000000ull), kk == 0 ? (int)(true) : 1);
      }
      tlx_wgmma_commit_group();
      tlx_wgmma_wait_group<1, 128>(dacc);
      // kernels_dot_wgmma.py:26
      int s_46 = 64;
      int t_50[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_50[i] = s_46;
      unsigned short* a_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_3[i] = (a_ptrs_2[i] + t_50[i]);
      // kernels_dot_wgmma.py:27
      int s_47 = 64;
      int s_48;
      s_48 = (int)((s_47 * stride_bk));
      int t_51[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_51[i] = s_48;
      unsigned short* b_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_3[i] = (b_ptrs_2[i] + t_51[i]);
      // kernels_dot_wgmma.py:22
      int s_49 = 2;
      int s_50;
      s_50 = (int)((k_ + s_49));
      int s_51 = 3;
      int s_52;
      s_52 = (int)((s_50 % s_51));
      int s_53 = 2;
      int s_54;
      s_54 = (int)((s_13 * s_53));
      int s_55;
      s_55 = (int)((k_ + s_54));
      bool s_56;
      s_56 = (s_55 < s_11);
      int t_52[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_52[i] = 2;
      int t_53[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_53[i] = (int)((t_50[i] * t_52[i]));
      unsigned short* a_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_4[i] = (a_ptrs_2[i] + t_53[i]);
      // kernels_dot_wgmma.py:23
      int s_57;
      s_57 = (int)((s_55 * s_42));
      int s_58;
      s_58 = (int)((K - s_57));
      // kernels_dot_wgmma.py:22
      unsigned short* s_59 = dot0_a_smem + s_52 * 8192;
      // kernels_dot_wgmma.py:23
      int t_54[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_54[i] = s_58;
      bool t_55[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_55[i] = (ks[i] < t_54[i]);
      const int map_8[64] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
      bool t_56[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_56[i] = t_55[map_8[i]];
      // kernels_dot_wgmma.py:22
      bool t_57[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_57[i] = s_56;
      bool t_58[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_58[i] = (t_56[i] & t_57[i]);
      // kernels_dot_wgmma.py:23
      #pragma unroll
      for (int i = 0; i < 64; i += 8) {
        tlx_cp_async_16(reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(s_59) + ((((tc2 + ((((i) >> 3 & 1) * 16) + (((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64))) * 64 + (tc3 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) * 2) ^ ((((((tc2 + ((((i) >> 3 & 1) * 16) + (((i) >> 4 & 1) * 32) + (((i) >> 5 & 1) * 64))) * 64 + (tc3 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) * 2) >> 7) & 7) << 4))), a_ptrs_4[i], t_58[i]);
      }
      // kernels_dot_wgmma.py:22
      int t_59[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_59[i] = 2;
      int t_60[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_60[i] = (int)((t_51[i] * t_59[i]));
      unsigned short* b_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_4[i] = (b_ptrs_2[i] + t_60[i]);
      // kernels_dot_wgmma.py:24
      int s_60;
      s_60 = (int)((s_55 * s_43));
      int s_61;
      s_61 = (int)((K - s_60));
      // kernels_dot_wgmma.py:22
      unsigned short* s_62 = dot0_b_smem + s_52 * 8192;
      // kernels_dot_wgmma.py:24
      int t_61[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_61[i] = s_61;
      bool t_62[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_62[i] = (ks_1[i] < t_61[i]);
      const int map_9[64] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7};
      bool t_63[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_63[i] = t_62[map_9[i]];
      // kernels_dot_wgmma.py:22
      bool t_64[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_64[i] = s_56;
      bool t_65[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_65[i] = (t_63[i] & t_64[i]);
      // kernels_dot_wgmma.py:24
      #pragma unroll
      for (int i = 0; i < 64; i += 1) {
        *(reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(s_62) + ((((tc6 + ((((i) >> 3 & 1) * 8) + (((i) >> 4 & 1) * 16) + (((i) >> 5 & 1) * 32))) * 64 + (((tc7 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) / 64) * 4096 + (((tc7 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) % 64)) * 2) ^ ((((((tc6 + ((((i) >> 3 & 1) * 8) + (((i) >> 4 & 1) * 16) + (((i) >> 5 & 1) * 32))) * 64 + (((tc7 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) / 64) * 4096 + (((tc7 + ((((i) >> 0 & 1) * 1) + (((i) >> 1 & 1) * 2) + (((i) >> 2 & 1) * 4)))) % 64)) * 2) >> 7) & 7) << 4)))) = (t_65[i]) ? *b_ptrs_4[i] : (unsigned short)0x0;
      }
      // kernels_dot_wgmma.py:22
      tlx_cp_async_commit_group();
      #pragma unroll
      for (int i = 0; i < 128; ++i) acc_1[i] = dacc[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_2[i] = a_ptrs_3[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_2[i] = b_ptrs_3[i];
      if (k_ + s_13 >= s_11) {
        tlx_wgmma_wait_group<0, 128>(acc_1);  // the last iteration drains
        break;
      }
    }
  }