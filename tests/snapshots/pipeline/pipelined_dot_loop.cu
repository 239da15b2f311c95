for (int k_ = s_12; ; k_ += s_13) {
      __syncwarp();  // converged warps at the top of a loop that issues wgmma (ptxas C7519)
      tlx_cp_async_wait_group<1>();
      tlx_fence_proxy_async_shared_cta();  // fence: every thread's cp.async data, visible to all threads and the async proxy
      __syncthreads();  // sync: every thread's cp.async data, visible to all threads and the async proxy
      int s_40 = 1;
      int s_41;
      s_41 = (int)((stage_1 + s_40));
      int s_42 = 3;
      bool s_43;
      s_43 = (s_41 == s_42);
      int s_44 = 0;
      int stage_2;
      stage_2 = (s_43 ? s_44 : s_41);
      // kernels_dot_wgmma.py:23
      int s_45 = 64;
      // kernels_dot_wgmma.py:24
      int s_46 = 64;
      // kernels_dot_wgmma.py:25
      unsigned short* s_47 = dot0_a_smem + stage_1 * 8192;
      unsigned short* s_48 = dot0_b_smem + stage_1 * 8192;
      // wgmma: 2 tile(s) of m64n128k16 x 4 k-steps per warpgroup; A K-major, B N-major
      float dacc[128];
      #pragma unroll
      for (int i = 0; i < 128; ++i) dacc[i] = acc_1[i];
      tlx_wgmma_fence();
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n128k16_f32_f16<0, 1>(&dacc[0], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_47), (0) * 128 + (16 * kk) * 2, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_48), ((0) / 64) * 8192 + ((0) % 64) * 2 + (16 * kk) * 128, 0x4000004002000000ull), kk == 0 ? (int)(true) : 1);
      }
      #pragma unroll
      for (int kk = 0; kk < 4; ++kk) {
        tlx_wgmma_m64n128k16_f32_f16<0, 1>(&dacc[64], tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_47), (0 + 64) * 128 + (16 * kk) * 2, 0x4000004000010000ull), tlx_wgmma_desc(reinterpret_cast<unsigned char*>(s_48), ((0) / 64) * 8192 + ((0) % 64) * 2 + (16 * kk) * 128, 0x4000004002000000ull), kk == 0 ? (int)(true) : 1);
      }
      tlx_wgmma_commit_group();
      tlx_wgmma_wait_group<1, 128>(dacc);
      // kernels_dot_wgmma.py:26
      int s_49 = 64;
      int t_50[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_50[i] = s_49;
      unsigned short* a_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_3[i] = (a_ptrs_2[i] + t_50[i]);
      // kernels_dot_wgmma.py:27
      int s_50 = 64;
      int s_51;
      s_51 = (int)((s_50 * stride_bk));
      int t_51[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_51[i] = s_51;
      unsigned short* b_ptrs_3[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_3[i] = (b_ptrs_2[i] + t_51[i]);
      // kernels_dot_wgmma.py:22
      int s_52 = 0;
      bool s_53;
      s_53 = (stage_1 == s_52);
      int s_54 = 2;
      int s_55 = 1;
      int s_56;
      s_56 = (int)((stage_1 - s_55));
      int s_57;
      s_57 = (s_53 ? s_54 : s_56);
      int s_58 = 2;
      int s_59;
      s_59 = (int)((s_13 * s_58));
      int s_60;
      s_60 = (int)((k_ + s_59));
      bool s_61;
      s_61 = (s_60 < s_11);
      long long s_62;
      s_62 = (long long)((long long)(s_60));
      // kernels_dot_wgmma.py:23
      int s_63;
      s_63 = (int)((s_60 * s_45));
      int s_64;
      s_64 = (int)((K - s_63));
      // kernels_dot_wgmma.py:22
      unsigned short* s_65 = dot0_a_smem + s_57 * 8192;
      long long t_52[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_52[i] = (long long)((long long)(t_50[i]));
      long long t_53[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_53[i] = s_62;
      long long t_54[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_54[i] = (long long)((t_52[i] * t_53[i]));
      unsigned short* a_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_4[i] = (tlx_opaque_pointer(a_ptrs[i]) + t_54[i]);
      // kernels_dot_wgmma.py:23
      int t_55[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_55[i] = s_64;
      bool t_56[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_56[i] = (ks[i] < t_55[i]);
      const int map_8[64] = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7};
      bool t_57[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_57[i] = t_56[map_8[i]];
      // kernels_dot_wgmma.py:22
      bool t_58[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_58[i] = s_61;
      bool t_59[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_59[i] = (t_57[i] & t_58[i]);
      // kernels_dot_wgmma.py:23
      const int run_4[8] = {0, 1024, 2048, 3072, 4096, 5120, 6144, 7168};
      #pragma unroll
      for (int i = 0; i < 64; i += 8) {
        tlx_cp_async_16((reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(s_65) + ((((tc2 + ((((0) >> 3 & 1) * 16) + (((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64))) * 64 + (tc3 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) * 2) ^ ((((((tc2 + ((((0) >> 3 & 1) * 16) + (((0) >> 4 & 1) * 32) + (((0) >> 5 & 1) * 64))) * 64 + (tc3 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) * 2) >> 7) & 7) << 4))) + run_4[(i) / 8]), a_ptrs_4[i], t_59[i]);
      }
      // kernels_dot_wgmma.py:22
      long long s_66;
      s_66 = (long long)((long long)(s_60));
      // kernels_dot_wgmma.py:24
      int s_67;
      s_67 = (int)((s_60 * s_46));
      int s_68;
      s_68 = (int)((K - s_67));
      // kernels_dot_wgmma.py:22
      unsigned short* s_69 = dot0_b_smem + s_57 * 8192;
      long long t_60[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_60[i] = (long long)((long long)(t_51[i]));
      long long t_61[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_61[i] = s_66;
      long long t_62[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_62[i] = (long long)((t_60[i] * t_61[i]));
      unsigned short* b_ptrs_4[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_4[i] = (tlx_opaque_pointer(b_ptrs[i]) + t_62[i]);
      // kernels_dot_wgmma.py:24
      int t_63[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_63[i] = s_68;
      bool t_64[8];
      #pragma unroll
      for (int i = 0; i < 8; ++i) t_64[i] = (ks_1[i] < t_63[i]);
      const int map_9[64] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7};
      bool t_65[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_65[i] = t_64[map_9[i]];
      // kernels_dot_wgmma.py:22
      bool t_66[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_66[i] = s_61;
      bool t_67[64];
      #pragma unroll
      for (int i = 0; i < 64; ++i) t_67[i] = (t_65[i] & t_66[i]);
      // kernels_dot_wgmma.py:24
      const int run_5[64] = {0, 1, 2, 3, 4, 5, 6, 7, 512, 513, 514, 515, 516, 517, 518, 519, 1024, 1025, 1026, 1027, 1028, 1029, 1030, 1031, 1536, 1537, 1538, 1539, 1540, 1541, 1542, 1543, 2048, 2049, 2050, 2051, 2052, 2053, 2054, 2055, 2560, 2561, 2562, 2563, 2564, 2565, 2566, 2567, 3072, 3073, 3074, 3075, 3076, 3077, 3078, 3079, 3584, 3585, 3586, 3587, 3588, 3589, 3590, 3591};
      #pragma unroll
      for (int i = 0; i < 64; i += 1) {
        *((reinterpret_cast<unsigned short*>(reinterpret_cast<unsigned char*>(s_69) + ((((tc6 + ((((0) >> 3 & 1) * 8) + (((0) >> 4 & 1) * 16) + (((0) >> 5 & 1) * 32))) * 64 + (((tc7 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) / 64) * 4096 + (((tc7 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) % 64)) * 2) ^ ((((((tc6 + ((((0) >> 3 & 1) * 8) + (((0) >> 4 & 1) * 16) + (((0) >> 5 & 1) * 32))) * 64 + (((tc7 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) / 64) * 4096 + (((tc7 + ((((0) >> 0 & 1) * 1) + (((0) >> 1 & 1) * 2) + (((0) >> 2 & 1) * 4)))) % 64)) * 2) >> 7) & 7) << 4))) + run_5[(i) / 1])) = (t_67[i]) ? *b_ptrs_4[i] : (unsigned short)0x0;
      }
      // kernels_dot_wgmma.py:22
      tlx_cp_async_commit_group();
      #pragma unroll
      for (int i = 0; i < 128; ++i) acc_1[i] = dacc[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) a_ptrs_2[i] = a_ptrs_3[i];
      #pragma unroll
      for (int i = 0; i < 64; ++i) b_ptrs_2[i] = b_ptrs_3[i];
      stage_1 = stage_2;
      if (k_ + s_13 >= s_11) {
        tlx_wgmma_wait_group<0, 128>(acc_1);  // the last iteration drains
        break;
      }
    }
  }