/* The ops of an exported model that are not fused kernels (docs/export_c.md): GEMM, convolution,
 * transposed convolution, pooling, batch norm in eval mode, index_select and strided copies, as
 * portable C11 loops over float32 (copies: any dtype). export_c/op_calls.cpp writes their calls
 * with every shape and stride a constant. Scratch (packed panels, a transposed convolution's
 * columns) is a region at the end of the arena, sized at export time: nothing allocates.
 *
 * The GEMM packs B in panels of SMELT_GEMM_NR columns and A in panels of SMELT_GEMM_MR rows, in
 * blocks that stay in cache (KC x NC of B, MC x KC of A), and runs an MR x NR register tile over
 * them; a convolution packs its B straight from the image (an implicit im2col: no column buffer).
 * The tile loops are plain C that compilers vectorize at -O3; the target (--target) picks the
 * tile size that suits its vector registers. With FMA in the target the tile multiplies and adds
 * in one rounding (fmaf); without, in two. */
#ifndef SMELT_EXPORT_OPS_H
#define SMELT_EXPORT_OPS_H

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
          const float* restrict row = plane + ih * b->w + iw0 + lo * b->sw;  /* column lo's pixel */
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

/* The register tile: c[0:mr, 0:nr] (+)= a_panel (MR x kc) * b_panel (kc x NR). */
static inline void smelt_gemm_tile(int64_t kc, const float* restrict a, const float* restrict b, float* c,
                                   int64_t ldc, int64_t mr, int64_t nr, int accumulate) {
  float acc[SMELT_GEMM_MR][SMELT_GEMM_NR];
  for (int i = 0; i < SMELT_GEMM_MR; ++i) {
    for (int j = 0; j < SMELT_GEMM_NR; ++j) acc[i][j] = 0.0f;
  }
  for (int64_t p = 0; p < kc; ++p) {
    const float* ap = a + p * SMELT_GEMM_MR;
    const float* bp = b + p * SMELT_GEMM_NR;
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
                            nr, k0 > 0);
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

/* A depthwise convolution's output row in blocks of 16 columns whose sums stay in registers over
 * all the taps (one vector). A block whose window lies inside the image reads it in place; one at
 * an edge (or a row's last, shorter block) reads a copy of its window with zeros where the window
 * leaves the image (`window`: kh rows of SMELT_DW_WINDOW(kw, sw, dw) floats). Each output sums its
 * taps in window order from 0. */
#define SMELT_DW_BLOCK 16
#define SMELT_DW_WINDOW(kw, sw, dw) ((SMELT_DW_BLOCK - 1) * (sw) + ((kw) - 1) * (dw) + 1)
static inline void smelt_depthwise_block(const float* restrict in, const float* wk, float* restrict out,
                                         int64_t row_step, int64_t kh, int64_t kw, int64_t sw, int64_t dw) {
  float acc[SMELT_DW_BLOCK];
  for (int t = 0; t < SMELT_DW_BLOCK; ++t) acc[t] = 0.0f;
  if (sw == 1) {
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        const float wv = wk[i * kw + j];
        const float* restrict at = in + i * row_step + j * dw;
        for (int t = 0; t < SMELT_DW_BLOCK; ++t) acc[t] = SMELT_MADD(at[t], wv, acc[t]);
      }
    }
  } else {
    for (int64_t i = 0; i < kh; ++i) {
      for (int64_t j = 0; j < kw; ++j) {
        const float wv = wk[i * kw + j];
        const float* restrict at = in + i * row_step + j * dw;
        for (int t = 0; t < SMELT_DW_BLOCK; ++t) acc[t] = SMELT_MADD(at[t * sw], wv, acc[t]);
      }
    }
  }
  for (int t = 0; t < SMELT_DW_BLOCK; ++t) out[t] = acc[t];
}
static inline void smelt_depthwise_row(const float* plane, const float* wk, float* row, int64_t h, int64_t w,
                                       int64_t wo, int64_t oh, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                       int64_t ph, int64_t pw, int64_t dh, int64_t dw, float* window) {
  const int64_t ww = SMELT_DW_WINDOW(kw, sw, dw), r0 = oh * sh - ph;
  const int rows_inside = r0 >= 0 && r0 + (kh - 1) * dh < h;
  for (int64_t ow0 = 0; ow0 < wo; ow0 += SMELT_DW_BLOCK) {
    const int64_t len = wo - ow0 < SMELT_DW_BLOCK ? wo - ow0 : SMELT_DW_BLOCK, c0 = ow0 * sw - pw;
    if (rows_inside && len == SMELT_DW_BLOCK && c0 >= 0 && c0 + ww <= w) {
      smelt_depthwise_block(plane + r0 * w + c0, wk, row + ow0, dh * w, kh, kw, sw, dw);
      continue;
    }
    for (int64_t i = 0; i < kh; ++i) {
      const int64_t ih = r0 + i * dh;
      float* copy = window + i * ww;
      for (int64_t q = 0; q < ww; ++q) {
        const int64_t col = c0 + q;
        copy[q] = ih >= 0 && ih < h && col >= 0 && col < w ? plane[ih * w + col] : 0.0f;
      }
    }
    float out[SMELT_DW_BLOCK];
    smelt_depthwise_block(window, wk, out, ww, kh, kw, sw, dw);
    for (int64_t t = 0; t < len; ++t) row[ow0 + t] = out[t];
  }
}

/* y (n, o, ho, wo) = conv2d(x (n, c, h, w), weight (o, c / groups, kh, kw)), no bias (the
 * epilogue adds one). A depthwise convolution (one input channel per group) runs as direct loops;
 * the others as one GEMM per image and group, with `weight_packed` each group's (o / groups) x
 * (c / groups * kh * kw) matrix packed by the export (smelt_gemm_f32), one after the other. */
static inline void smelt_conv2d_f32(const float* x, const float* weight, float* y, int64_t n, int64_t c,
                                    int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw, int64_t sh,
                                    int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, int64_t groups,
                                    int64_t ho, int64_t wo, int weight_packed, float* scratch,
                                    const smelt_epilogue* epilogue) {
  const int64_t cg = c / groups, og = o / groups, taps = kh * kw, k = cg * taps;
  const int64_t group_weight = weight_packed ? (og + SMELT_GEMM_MR - 1) / SMELT_GEMM_MR * SMELT_GEMM_MR * k : og * k;
  if (cg == 1) {  /* depthwise: direct loops, see smelt_depthwise_row (scratch: its window) */
    for (int64_t img = 0; img < n; ++img) {
      for (int64_t oc = 0; oc < o; ++oc) {
        const float* plane = x + (img * c + oc / og) * h * w;
        float* out = y + (img * o + oc) * ho * wo;
        for (int64_t oh = 0; oh < ho; ++oh) {
          smelt_depthwise_row(plane, weight + oc * taps, out + oh * wo, h, w, wo, oh, kh, kw, sh, sw, ph, pw, dh, dw,
                              scratch);
        }
        if (epilogue) epilogue->tile(epilogue->args, img * o + oc, img * o + oc + 1, 0, ho * wo);
      }
    }
    return;
  }
  const int pointwise = kh == 1 && kw == 1 && sh == 1 && sw == 1 && ph == 0 && pw == 0;
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t g = 0; g < groups; ++g) {
      const float* image = x + (img * c + g * cg) * h * w;
      smelt_gemm_b b = smelt_matrix_b(image, h * w, 1);
      if (!pointwise) {
        b.conv = 1;
        b.h = h, b.w = w, b.kh = kh, b.kw = kw, b.sh = sh, b.sw = sw;
        b.ph = ph, b.pw = pw, b.dh = dh, b.dw = dw, b.wo = wo;
      }
      smelt_epilogue part;
      if (epilogue) part = *epilogue, part.row_base = img * o + g * og;
      smelt_gemm_f32(og, ho * wo, k, weight + g * group_weight, k, 1, weight_packed, &b,
                     y + (img * o + g * og) * ho * wo, ho * wo, scratch, epilogue ? &part : 0);
    }
  }
}

/* A 3x3 stride-1 convolution (groups 1, dilation 1) by Winograd's F(2x2, 3x3): each 2x2 block of
 * outputs (a tile) from its 4x4 input patch d as A^T [(G g G^T) . (B^T d B)] A, so that the
 * products over channels are 16 GEMMs with 4 / 9 of the direct method's multiplications. The
 * weights come transformed by the export (u: the 16 matrices G g G^T of o x c, packed as a GEMM's
 * A, one after the other). Tiles are processed `rows` rows of tiles at a time; scratch: the
 * transformed inputs (16 x c x tiles of those rows), the products (16 x o x the same), then the
 * GEMM's panels. The transforms run along a row of tiles, so that the loads and stores of
 * neighbouring tiles are neighbours (vectorized); tiles at the image's edge take the checked path.
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1] */
static inline void smelt_winograd_in(float d[4][4], float* v, int64_t xi_stride) {
  float e[4][4];
  for (int j = 0; j < 4; ++j) {
    e[0][j] = d[0][j] - d[2][j];
    e[1][j] = d[1][j] + d[2][j];
    e[2][j] = d[2][j] - d[1][j];
    e[3][j] = d[1][j] - d[3][j];
  }
  for (int i = 0; i < 4; ++i) {
    v[(i * 4 + 0) * xi_stride] = e[i][0] - e[i][2];
    v[(i * 4 + 1) * xi_stride] = e[i][1] + e[i][2];
    v[(i * 4 + 2) * xi_stride] = e[i][2] - e[i][1];
    v[(i * 4 + 3) * xi_stride] = e[i][1] - e[i][3];
  }
}
static inline void smelt_winograd_out(const float* m, int64_t xi_stride, float y[2][2]) {
  float s[2][4];
  for (int j = 0; j < 4; ++j) {
    const float m0 = m[j * xi_stride], m1 = m[(4 + j) * xi_stride];
    const float m2 = m[(8 + j) * xi_stride], m3 = m[(12 + j) * xi_stride];
    s[0][j] = m0 + m1 + m2;
    s[1][j] = m1 - m2 - m3;
  }
  for (int i = 0; i < 2; ++i) {
    y[i][0] = s[i][0] + s[i][1] + s[i][2];
    y[i][1] = s[i][1] - s[i][2] - s[i][3];
  }
}
static inline void smelt_conv2d_winograd_f32(const float* x, const float* u, float* y, int64_t n, int64_t c,
                                             int64_t h, int64_t w, int64_t o, int64_t ph, int64_t pw, int64_t ho,
                                             int64_t wo, int64_t rows, float* scratch,
                                             const smelt_epilogue* epilogue) {
  const int64_t th = (ho + 1) / 2, tw = (wo + 1) / 2;
  const int64_t u_size = (o + SMELT_GEMM_MR - 1) / SMELT_GEMM_MR * SMELT_GEMM_MR * c;
  /* tiles whose patch lies inside the image along x: tx in [tx_lo, tx_hi) */
  const int64_t tx_lo = (pw + 1) / 2, tx_hi_raw = (w + pw - 4) / 2 + 1;
  const int64_t tx_hi = tx_hi_raw < tx_lo ? tx_lo : tx_hi_raw > tw ? tw : tx_hi_raw;
  float* v = scratch;
  float* m = v + 16 * c * rows * tw;
  float* panels = m + 16 * o * rows * tw;
  for (int64_t img = 0; img < n; ++img) {
    const float* image = x + img * c * h * w;
    float* out = y + img * o * ho * wo;
    for (int64_t ty0 = 0; ty0 < th; ty0 += rows) {
      const int64_t nty = th - ty0 < rows ? th - ty0 : rows, nt = nty * tw;
      /* the inputs: v[xi][ch][t] = (B^T d B)[xi] of tile t's patch of channel ch */
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = image + ch * h * w;
        for (int64_t ty = ty0; ty < ty0 + nty; ++ty) {
          const int64_t r0 = 2 * ty - ph;
          float* vrow = v + ch * nt + (ty - ty0) * tw;
          const int inside = r0 >= 0 && r0 + 3 < h;
          for (int64_t tx = 0; tx < tw; ++tx) {
            if (inside && tx == tx_lo) {  /* the interior run */
              const float* p0 = plane + r0 * w - pw;
              for (int64_t q = tx_lo; q < tx_hi; ++q) {
                float d[4][4];
                for (int i = 0; i < 4; ++i) {
                  for (int j = 0; j < 4; ++j) d[i][j] = p0[i * w + 2 * q + j];
                }
                smelt_winograd_in(d, vrow + q, c * nt);
              }
              tx = tx_hi - 1;
              continue;
            }
            const int64_t c0 = 2 * tx - pw;
            float d[4][4];
            for (int i = 0; i < 4; ++i) {
              for (int j = 0; j < 4; ++j) {
                const int64_t r = r0 + i, q = c0 + j;
                d[i][j] = r >= 0 && r < h && q >= 0 && q < w ? plane[r * w + q] : 0.0f;
              }
            }
            smelt_winograd_in(d, vrow + tx, c * nt);
          }
        }
      }
      /* the products: m[xi] (o x nt) = u[xi] (o x c) v[xi] (c x nt) */
      for (int xi = 0; xi < 16; ++xi) {
        const smelt_gemm_b b = smelt_matrix_b(v + xi * c * nt, nt, 1);
        smelt_gemm_f32(o, nt, c, u + xi * u_size, 0, 0, 1, &b, m + xi * o * nt, nt, panels, 0);
      }
      /* the outputs: A^T m A, each tile's 2x2 block (cut at the image's edge) */
      for (int64_t oc = 0; oc < o; ++oc) {
        float* plane = out + oc * ho * wo;
        for (int64_t ty = ty0; ty < ty0 + nty; ++ty) {
          const float* mrow = m + oc * nt + (ty - ty0) * tw;
          float* y0 = plane + 2 * ty * wo;
          if (2 * ty + 1 < ho) {  /* both output rows, the whole tiles along x */
            float* y1 = y0 + wo;
            const int64_t full = wo / 2;
            for (int64_t tx = 0; tx < full; ++tx) {
              float t2[2][2];
              smelt_winograd_out(mrow + tx, o * nt, t2);
              y0[2 * tx] = t2[0][0], y0[2 * tx + 1] = t2[0][1];
              y1[2 * tx] = t2[1][0], y1[2 * tx + 1] = t2[1][1];
            }
            if (full < tw) {
              float t2[2][2];
              smelt_winograd_out(mrow + full, o * nt, t2);
              y0[2 * full] = t2[0][0], y1[2 * full] = t2[1][0];
            }
            continue;
          }
          for (int64_t tx = 0; tx < tw; ++tx) {
            float t2[2][2];
            smelt_winograd_out(mrow + tx, o * nt, t2);
            y0[2 * tx] = t2[0][0];
            if (2 * tx + 1 < wo) y0[2 * tx + 1] = t2[0][1];
          }
        }
      }
    }
    if (epilogue) epilogue->tile(epilogue->args, img * o, img * o + o, 0, ho * wo);
  }
}

/* The transposed convolution (conv2d's gradient with respect to its input): dx (n, c, h, w) from
 * dy (n, o, ho, wo) and weight (o, c / groups, kh, kw). Per image and group the columns
 * weight^T dy (c / groups * kh * kw rows, ho * wo columns) are computed into scratch, then added
 * into dx at the taps they came from. scratch: the columns, then the GEMM's panels. */
static inline void smelt_conv2d_transpose_f32(const float* dy, const float* weight, float* dx, int64_t n,
                                              int64_t c, int64_t h, int64_t w, int64_t o, int64_t kh, int64_t kw,
                                              int64_t sh, int64_t sw, int64_t ph, int64_t pw, int64_t dh,
                                              int64_t dw, int64_t groups, int64_t ho, int64_t wo, float* scratch) {
  const int64_t cg = c / groups, og = o / groups, taps = kh * kw, k = cg * taps, p = ho * wo;
  float* cols = scratch;
  float* panels = scratch + (k * p + 15) / 16 * 16;
  for (int64_t i = 0; i < n * c * h * w; ++i) dx[i] = 0.0f;
  for (int64_t img = 0; img < n; ++img) {
    for (int64_t g = 0; g < groups; ++g) {
      const smelt_gemm_b b = smelt_matrix_b(dy + (img * o + g * og) * p, p, 1);
      smelt_gemm_f32(k, p, og, weight + g * og * k, 1, k, 0, &b, cols, p, panels, 0);
      for (int64_t r = 0; r < k; ++r) {
        const int64_t ch = r / taps, i = (r % taps) / kw, j = r % kw;
        float* plane = dx + (img * c + g * cg + ch) * h * w;
        const float* col = cols + r * p;
        for (int64_t oh = 0; oh < ho; ++oh) {
          const int64_t ih = oh * sh - ph + i * dh;
          if (ih < 0 || ih >= h) continue;
          for (int64_t ow = 0; ow < wo; ++ow) {
            const int64_t iw = ow * sw - pw + j * dw;
            if (iw >= 0 && iw < w) plane[ih * w + iw] += col[oh * wo + ow];
          }
        }
      }
    }
  }
}

/* Max pooling over `planes` images of h x w: the first largest tap of each window (a NaN wins and
 * stays), taps outside the image skipped; index (optional): the tap's offset in its plane, -1 for
 * a window with none. Without indices, the outputs whose windows lie inside the image go in
 * blocks of 16 kept in registers over the taps (the same rule, vectorized). */
static inline void smelt_max_pool2d_f32(const float* x, float* y, int64_t* index, int64_t planes, int64_t h,
                                        int64_t w, int64_t ho, int64_t wo, int64_t kh, int64_t kw, int64_t sh,
                                        int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw) {
  /* columns [lo, hi) and rows [top, bottom) whose windows lie inside the image */
  int64_t lo = (pw + sw - 1) / sw, hi = (w - (kw - 1) * dw + pw + sw - 1) / sw;
  int64_t top = (ph + sh - 1) / sh, bottom = (h - (kh - 1) * dh + ph + sh - 1) / sh;
  hi = hi < wo ? (hi > 0 ? hi : 0) : wo;
  bottom = bottom < ho ? (bottom > 0 ? bottom : 0) : ho;
  lo = lo < hi ? lo : hi;
  top = top < bottom ? top : bottom;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x + pl * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      int64_t ow = 0;
      if (!index && oh >= top && oh < bottom) {
        for (ow = lo; ow + 16 <= hi; ow += 16) {
          float best[16];
          const float* first = plane + (oh * sh - ph) * w + ow * sw - pw;
          for (int t = 0; t < 16; ++t) best[t] = first[t * sw];  /* the first tap is taken */
          for (int64_t i = 0; i < kh; ++i) {
            const float* in = plane + (oh * sh - ph + i * dh) * w + ow * sw - pw;
            for (int64_t j = i == 0; j < kw; ++j) {
              for (int t = 0; t < 16; ++t) {
                const float v = in[t * sw + j * dw], b = best[t];
                best[t] = ((v > b) | ((v != v) & (b == b))) ? v : b;
              }
            }
          }
          for (int t = 0; t < 16; ++t) y[(pl * ho + oh) * wo + ow + t] = best[t];
        }
      }
      /* the rest of the row window by window: [0, lo) (or the whole row) and what the blocks left */
      for (int64_t q = 0; q < wo; ++q) {
        if (!index && oh >= top && oh < bottom && q >= lo && q < ow) continue;
        float best = -INFINITY;
        int64_t at = -1;
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t ih = oh * sh - ph + i * dh;
          if (ih < 0 || ih >= h) continue;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t iw = q * sw - pw + j * dw;
            if (iw < 0 || iw >= w) continue;
            const float v = plane[ih * w + iw];
            if (at < 0 || v > best || (v != v && best == best)) best = v, at = ih * w + iw;
          }
        }
        y[(pl * ho + oh) * wo + q] = best;
        if (index) index[(pl * ho + oh) * wo + q] = at;
      }
    }
  }
}

/* Average pooling: the taps inside the image summed, divided by their number, or with
 * count_include_pad by the taps inside the padded extent [-pad, size + pad) (as PyTorch). */
static inline int64_t smelt_taps_below(int64_t limit, int64_t origin, int64_t kernel, int64_t dil) {
  if (limit <= origin) return 0;
  const int64_t t = (limit - origin + dil - 1) / dil;
  return t < kernel ? t : kernel;
}
static inline void smelt_avg_pool2d_f32(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                        int64_t ho, int64_t wo, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                                        int64_t ph, int64_t pw, int64_t dh, int64_t dw, int include_pad) {
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x + pl * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      const int64_t oi = oh * sh - ph;
      int64_t bi = oi >= 0 ? 0 : (-oi + dh - 1) / dh;
      bi = bi < kh ? bi : kh;
      int64_t ei = smelt_taps_below(h, oi, kh, dh);
      ei = ei > bi ? ei : bi;
      const int64_t padded_i = smelt_taps_below(h + ph, oi, kh, dh);
      for (int64_t ow = 0; ow < wo; ++ow) {
        const int64_t oj = ow * sw - pw;
        int64_t bj = oj >= 0 ? 0 : (-oj + dw - 1) / dw;
        bj = bj < kw ? bj : kw;
        int64_t ej = smelt_taps_below(w, oj, kw, dw);
        ej = ej > bj ? ej : bj;
        const int64_t padded_j = smelt_taps_below(w + pw, oj, kw, dw);
        float acc = 0.0f;
        for (int64_t i = bi; i < ei; ++i) {
          const float* row = plane + (oi + i * dh) * w + oj;
          for (int64_t j = bj; j < ej; ++j) acc += row[j * dw];
        }
        const int64_t count = include_pad ? padded_i * padded_j : (ei - bi) * (ej - bj);
        y[(pl * ho + oh) * wo + ow] = count > 0 ? acc / (float)count : 0.0f;
      }
    }
  }
}

/* Batch norm with running statistics (eval mode) over (n, c, spatial), in double as smelt's
 * kernel computes it; mean, invstd and the running statistics' copies are written when given. */
static inline void smelt_batch_norm_f32(const float* x, const float* weight, const float* bias,
                                        const float* running_mean, const float* running_var, float* y,
                                        float* mean, float* invstd, float* new_mean, float* new_var, int64_t n,
                                        int64_t c, int64_t spatial, double eps) {
  for (int64_t ch = 0; ch < c; ++ch) {
    const double mu = running_mean[ch], inv = 1.0 / sqrt((double)running_var[ch] + eps);
    const double scale = inv * (double)weight[ch], shift = bias[ch];
    for (int64_t img = 0; img < n; ++img) {
      const float* xr = x + (img * c + ch) * spatial;
      float* yr = y + (img * c + ch) * spatial;
      for (int64_t s = 0; s < spatial; ++s) yr[s] = (float)(((double)xr[s] - mu) * scale + shift);
    }
    if (mean) mean[ch] = (float)mu;
    if (invstd) invstd[ch] = (float)inv;
    if (new_mean) new_mean[ch] = running_mean[ch];
    if (new_var) new_var[ch] = running_var[ch];
  }
}

/* dst = src for a tensor of `ndim` dims (at most 8) of `elem`-byte elements, strides in bytes. */
static inline void smelt_copy_strided(unsigned char* dst, const int64_t* dst_strides, const unsigned char* src,
                                      const int64_t* src_strides, const int64_t* shape, int ndim, int64_t elem) {
  int64_t index[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t total = 1;
  for (int d = 0; d < ndim; ++d) total *= shape[d];
  if (total == 0) return;
  const int64_t inner = ndim > 0 ? shape[ndim - 1] : 1;
  const int64_t ds = ndim > 0 ? dst_strides[ndim - 1] : elem, ss = ndim > 0 ? src_strides[ndim - 1] : elem;
  for (int64_t done = 0; done < total; done += inner) {
    int64_t doff = 0, soff = 0;
    for (int d = 0; d + 1 < ndim; ++d) doff += index[d] * dst_strides[d], soff += index[d] * src_strides[d];
    if (ds == elem && ss == elem) {
      memcpy(dst + doff, src + soff, (size_t)(inner * elem));
    } else {
      for (int64_t i = 0; i < inner; ++i) memcpy(dst + doff + i * ds, src + soff + i * ss, (size_t)elem);
    }
    for (int d = ndim - 2; d >= 0; --d) {
      if (++index[d] < shape[d]) break;
      index[d] = 0;
    }
  }
}

/* y = x.index_select(dim, index) over x seen as (outer, size, inner) of `elem`-byte elements.
 * Returns 0, or 1 for an index outside [0, size) (nothing is read out of range). */
static inline int smelt_index_select(const unsigned char* x, const int64_t* index, unsigned char* y,
                                     int64_t outer, int64_t size, int64_t inner, int64_t count, int64_t elem) {
  for (int64_t t = 0; t < count; ++t) {
    if (index[t] < 0 || index[t] >= size) return 1;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t t = 0; t < count; ++t) {
      memcpy(y + ((o * count + t) * inner) * elem, x + ((o * size + index[t]) * inner) * elem, (size_t)(inner * elem));
    }
  }
  return 0;
}

#endif /* SMELT_EXPORT_OPS_H */
