/* The GEMM of an exported model (docs/export_c.md), portable C11: B packed in panels of
 * SMELT_GEMM_NR columns and A in panels of SMELT_GEMM_MR rows, in blocks that stay in cache (KC x NC
 * of B, MC x KC of A), an MR x NR register tile over them; a convolution packs its B straight from
 * the image (an implicit im2col: no column buffer); weights come packed by the export. The tile
 * loops are plain C that compilers vectorize at -O3; the target (--target) picks the blocking that
 * suits its vector registers. With FMA in the target the tile multiplies and adds in one rounding
 * (fmaf); without, in two. Scratch (the packed blocks) is a region at the end of the arena, sized
 * at export time (export_c/op_calls.cpp): nothing allocates. */
#ifndef SMELT_EXPORT_GEMM_H
#define SMELT_EXPORT_GEMM_H

/* The blocking: model.c defines it for its target before this text (export_c/op_calls.h
 * gemm_tile), and its weights are packed for it. */
#if !defined(SMELT_GEMM_MR) || !defined(SMELT_GEMM_NR) || !defined(SMELT_GEMM_KC) || !defined(SMELT_GEMM_MC) || \
    !defined(SMELT_GEMM_NC)
#error "SMELT_GEMM_MR, _NR, _KC, _MC and _NC are defined by the exported model.c"
#endif

#if defined(__FMA__) || defined(__ARM_FEATURE_FMA) || defined(FP_FAST_FMAF)
#define SMELT_MADD(a, b, c) fmaf(a, b, c)
#else
#define SMELT_MADD(a, b, c) ((a) * (b) + (c))
#endif

/* B of a GEMM: a strided matrix, B(k, n) = data[k * rs + n * cs], or the implicit im2col of one
 * image of `c` channels (data: (c, h, w) contiguous): rows k = (channel, ki, kj), columns
 * n = (oh, ow), zero where the tap falls in the padding. */
typedef struct {
  const float* data;
  int64_t rs, cs;
  int conv;
  int64_t h, w, kh, kw, sh, sw, ph, pw, dh, dw, wo;
  int packed; /* a constant B the export packed (smelt_gemm_f32) */
} smelt_gemm_b;

/* B's rows [k0, k0 + kc) and columns [n0, n0 + nc) as panels of NR columns (zero-padded). */
static inline void smelt_pack_b(const smelt_gemm_b* b, int64_t k0, int64_t kc, int64_t n0, int64_t nc,
                                float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += SMELT_GEMM_NR) {
    const int64_t nr = nc - j0 < SMELT_GEMM_NR ? nc - j0 : SMELT_GEMM_NR;
    float* panel = dst + j0 * kc;
    if (!b->conv) {
      for (int64_t k = 0; k < kc; ++k) {
        const float* row = b->data + (k0 + k) * b->rs + (n0 + j0) * b->cs;
        float* out = panel + k * SMELT_GEMM_NR;
        int64_t j = 0;
        if (b->cs == 1) {
          for (; j < nr; ++j) out[j] = row[j];
        } else {
          for (; j < nr; ++j) out[j] = row[j * b->cs];
        }
        for (; j < SMELT_GEMM_NR; ++j) out[j] = 0;
      }
      continue;
    }
    /* the implicit im2col. The panel's columns fall into runs along one output row each (found
     * once per panel); per row of B (a tap of a channel) each run is a strided (for stride 1,
     * contiguous) read of one input row, zero where the tap falls into the padding. */
    int64_t run_at[SMELT_GEMM_NR], run_len[SMELT_GEMM_NR], run_ih[SMELT_GEMM_NR], run_iw[SMELT_GEMM_NR];
    int runs = 0;
    for (int64_t j = 0; j < nr; ++runs) {
      const int64_t col = n0 + j0 + j, oh = col / b->wo, ow = col % b->wo;
      const int64_t len = nr - j < b->wo - ow ? nr - j : b->wo - ow;
      run_at[runs] = j, run_len[runs] = len;
      run_ih[runs] = oh * b->sh - b->ph, run_iw[runs] = ow * b->sw - b->pw;
      j += len;
    }
    const int64_t taps = b->kh * b->kw;
    int64_t c = k0 / taps, t = k0 % taps;
    for (int64_t k = 0; k < kc; ++k) {
      const int64_t di = (t / b->kw) * b->dh, dj = (t % b->kw) * b->dw;
      const float* plane = b->data + c * b->h * b->w;
      float* out = panel + k * SMELT_GEMM_NR;
      for (int r = 0; r < runs; ++r) {
        const int64_t run = run_len[r], ih = run_ih[r] + di, iw0 = run_iw[r] + dj;
        float* restrict o = out + run_at[r];
        int64_t lo = run, hi = run; /* columns [lo, hi) read the image */
        if (ih >= 0 && ih < b->h) {
          lo = iw0 >= 0 ? 0 : (-iw0 + b->sw - 1) / b->sw;
          hi = iw0 >= b->w ? 0 : (b->w - iw0 + b->sw - 1) / b->sw;
          lo = lo < run ? lo : run;
          hi = hi < run ? hi : run;
          hi = hi > lo ? hi : lo;
        }
        for (int64_t q = 0; q < lo; ++q) o[q] = 0.0f;
        if (hi > lo) {
          const float* restrict row = plane + (ih * b->w + iw0 + lo * b->sw);  /* column lo's pixel */
          if (b->sw == 1) {
            memcpy(o + lo, row, (size_t)(hi - lo) * sizeof(float));
          } else {
            for (int64_t q = 0; q < hi - lo; ++q) o[lo + q] = row[q * b->sw];
          }
        }
        for (int64_t q = hi; q < run; ++q) o[q] = 0.0f;
      }
      for (int64_t q = nr; q < SMELT_GEMM_NR; ++q) out[q] = 0;
      if (++t == taps) t = 0, ++c;
    }
  }
}

/* A's rows [m0, m0 + mc) and columns [k0, k0 + kc) as panels of MR rows (zero-padded). A
 * constant A (a weight) comes packed by the export instead, in the same panels for the whole
 * matrix: per block of KC columns starting at k0 (kc wide), the panel of rows [i0, i0 + MR) at
 * k0 * mp + i0 * kc (mp: the rows rounded up to whole panels), element (i, k) at
 * (k - k0) * MR + (i - i0) in it. */
static inline void smelt_pack_a(const float* a, int64_t rs, int64_t cs, int64_t m0, int64_t mc, int64_t k0,
                                int64_t kc, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += SMELT_GEMM_MR) {
    const int64_t mr = mc - i0 < SMELT_GEMM_MR ? mc - i0 : SMELT_GEMM_MR;
    float* panel = dst + i0 * kc;
    for (int64_t k = 0; k < kc; ++k) {
      float* out = panel + k * SMELT_GEMM_MR;
      int64_t i = 0;
      for (; i < mr; ++i) out[i] = a[(m0 + i0 + i) * rs + (k0 + k) * cs];
      for (; i < SMELT_GEMM_MR; ++i) out[i] = 0;
    }
  }
}

/* The register tile: c[0:mr, 0:nr] (+)= a_panel (MR x kc) * b_panel (kc x NR). With `stream`
 * (a B the export packed: weights that come from memory, not from a block packed into cache) it
 * asks for B's panel SMELT_GEMM_PREFETCH bytes ahead of the row it reads: ResNet-18's 7x7 Winograd
 * products, 16 MiB of weights per layer used by 16 tiles, ran 1.8x faster so (the hardware's own
 * prefetching keeps too few lines in flight). */
#define SMELT_GEMM_PREFETCH 8192
static inline void smelt_gemm_tile(int64_t kc, const float* restrict a, const float* restrict b, float* c,
                                   int64_t ldc, int64_t mr, int64_t nr, int accumulate, int stream) {
  float acc[SMELT_GEMM_MR][SMELT_GEMM_NR];
  for (int i = 0; i < SMELT_GEMM_MR; ++i) {
    for (int j = 0; j < SMELT_GEMM_NR; ++j) acc[i][j] = 0.0f;
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * SMELT_GEMM_MR;
    const float* bp = b + p * SMELT_GEMM_NR;
    if (stream) {
      for (int64_t line = 0; line < SMELT_GEMM_NR * (int64_t)sizeof(float); line += 64) {
        SMELT_PREFETCH(bp, SMELT_GEMM_PREFETCH + line);
      }
    }
    for (int i = 0; i < SMELT_GEMM_MR; ++i) {
      const float av = ap[i];
      for (int j = 0; j < SMELT_GEMM_NR; ++j) acc[i][j] = SMELT_MADD(av, bp[j], acc[i][j]);
    }
  }
  if (mr == SMELT_GEMM_MR && nr == SMELT_GEMM_NR) {  /* a whole tile: fixed trip counts, vector stores */
    for (int i = 0; i < SMELT_GEMM_MR; ++i) {
      float* row = c + i * ldc;
      if (accumulate) {
        for (int j = 0; j < SMELT_GEMM_NR; ++j) row[j] += acc[i][j];
      } else {
        for (int j = 0; j < SMELT_GEMM_NR; ++j) row[j] = acc[i][j];
      }
    }
    return;
  }
  for (int64_t i = 0; i < mr; ++i) {
    float* row = c + i * ldc;
    if (accumulate) {
      for (int64_t j = 0; j < nr; ++j) row[j] += acc[i][j];
    } else {
      for (int64_t j = 0; j < nr; ++j) row[j] = acc[i][j];
    }
  }
}

/* An epilogue run on each tile of the product as soon as it is final, while it is in cache: a
 * fused kernel's tile entry (rows [r0, r1) of its flattened outer dims, columns [c0, c1)) and
 * its arguments. The product's row i is the epilogue's row row_base + i. */
typedef struct {
  void (*tile)(void* const* args, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
  void* const* args;
  int64_t row_base;
} smelt_epilogue;

/* C (m x n, rows ldc apart, columns contiguous) = A (m x k; A(i, p) = a[i * rs + p * cs]) * B.
 * scratch: B's packed block (at most KC x NC, its columns rounded up to whole panels), then A's
 * (at most MC x KC, its rows rounded up), as large as this call's sizes need. */
/* A: a strided matrix, A(i, p) = a[i * rs + p * cs], or with `a_packed` a weight the export
 * packed (above; rs and cs unused). A B with `packed` (a weight) comes as smelt_pack_b's blocks,
 * in the order the loops below visit them: the block of columns [n0, n0 + nc) and rows
 * [k0, k0 + kc) at n0 * k + k0 * ncp (ncp: nc rounded up to whole panels). */
static inline void smelt_gemm_f32(int64_t m, int64_t n, int64_t k, const float* a, int64_t rs, int64_t cs,
                                  int a_packed, const smelt_gemm_b* b, float* c, int64_t ldc, float* scratch,
                                  const smelt_epilogue* epilogue) {
  const int64_t mp = (m + SMELT_GEMM_MR - 1) / SMELT_GEMM_MR * SMELT_GEMM_MR;
  const int64_t kb = k < SMELT_GEMM_KC ? k : SMELT_GEMM_KC, nb = n < SMELT_GEMM_NC ? n : SMELT_GEMM_NC;
  float* packed_b = scratch;
  float* packed_a = scratch + kb * ((nb + SMELT_GEMM_NR - 1) / SMELT_GEMM_NR * SMELT_GEMM_NR);
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = 0.0f;
    }
    if (epilogue) epilogue->tile(epilogue->args, epilogue->row_base, epilogue->row_base + m, 0, n);
    return;
  }
  for (int64_t n0 = 0; n0 < n; n0 += SMELT_GEMM_NC) {
    const int64_t nc = n - n0 < SMELT_GEMM_NC ? n - n0 : SMELT_GEMM_NC;
    for (int64_t k0 = 0; k0 < k; k0 += SMELT_GEMM_KC) {
      const int64_t kc = k - k0 < SMELT_GEMM_KC ? k - k0 : SMELT_GEMM_KC;
      const int64_t ncp = (nc + SMELT_GEMM_NR - 1) / SMELT_GEMM_NR * SMELT_GEMM_NR;
      const float* panels_b = b->packed ? b->data + n0 * k + k0 * ncp : packed_b;
      if (!b->packed) smelt_pack_b(b, k0, kc, n0, nc, packed_b);
      for (int64_t m0 = 0; m0 < m; m0 += SMELT_GEMM_MC) {
        const int64_t mc = m - m0 < SMELT_GEMM_MC ? m - m0 : SMELT_GEMM_MC;
        const float* panels_a = a_packed ? a + k0 * mp + m0 * kc : packed_a;
        if (!a_packed) smelt_pack_a(a, rs, cs, m0, mc, k0, kc, packed_a);
        for (int64_t j0 = 0; j0 < nc; j0 += SMELT_GEMM_NR) {
          const int64_t nr = nc - j0 < SMELT_GEMM_NR ? nc - j0 : SMELT_GEMM_NR;
          for (int64_t i0 = 0; i0 < mc; i0 += SMELT_GEMM_MR) {
            const int64_t mr = mc - i0 < SMELT_GEMM_MR ? mc - i0 : SMELT_GEMM_MR;
            smelt_gemm_tile(kc, panels_a + i0 * kc, panels_b + j0 * kc, c + (m0 + i0) * ldc + n0 + j0, ldc, mr,
                            nr, k0 > 0, b->packed);
            if (epilogue && k0 + kc == k) {
              const int64_t r0 = epilogue->row_base + m0 + i0;
              epilogue->tile(epilogue->args, r0, r0 + mr, n0 + j0, n0 + j0 + nr);
            }
          }
        }
      }
    }
  }
}

/* A strided matrix as B. */
static inline smelt_gemm_b smelt_matrix_b(const float* data, int64_t rs, int64_t cs) {
  smelt_gemm_b b;
  memset(&b, 0, sizeof b);
  b.data = data;
  b.rs = rs;
  b.cs = cs;
  return b;
}

#endif /* SMELT_EXPORT_GEMM_H */
