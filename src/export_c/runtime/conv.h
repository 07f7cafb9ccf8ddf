/* The convolutions of an exported model (docs/export_c.md), over runtime/gemm.h: by GEMM per image
 * and group, depthwise by direct loops, 3x3 stride-1 by Winograd's F(2x2, 3x3), and the transposed
 * convolution. float32, NCHW, contiguous. */
#ifndef SMELT_EXPORT_CONV_H
#define SMELT_EXPORT_CONV_H

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
 * A, one after the other; with `transposed`, their transposes packed as a GEMM's B). Tiles are
 * processed `rows` rows of tiles at a time; scratch: the transformed inputs (16 matrices of c x
 * the tiles of those rows, smelt_winograd_stride apart), the products (16 of o x the same, or
 * transposed), then the GEMM's panels. The transforms run along a row of tiles, so that the loads
 * and stores of neighbouring tiles are neighbours (vectorized); tiles at the image's edge take the
 * checked path. The export transposes the products where the tiles of a chunk fill the GEMM's
 * MR-row panels better than its NR-column ones (export_c/op_calls.cpp winograd): ResNet's 7x7
 * stage has 16 tiles, half an NR = 32 panel but two whole MR = 8 ones.
 *   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]   A^T = [1 1 1 0; 0 1 -1 -1] */
/* The distance between two of the 16 matrices of a chunk (transformed inputs or products) for n
 * floats each: n rounded up to whole 64-byte lines, plus one line if that is an even number of
 * lines. A tile's 16 values then fall into 16 different cache sets; at a multiple of 4 KiB apart
 * (ResNet's 7x7 stage: 512 channels x 16 tiles) they all map to one set of the L1 cache, which
 * holds 8, and the transforms ran 1.2x (7x7) to 2.6x (56x56 in chunks of 4 tile rows) slower.
 * The export sizes the scratch by the same rule (export_c/op_calls.cpp winograd). */
static inline int64_t smelt_winograd_stride(int64_t n) {
  const int64_t lines = (n + 15) / 16;
  return (lines % 2 ? lines : lines + 1) * 16;
}
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
                                             int64_t wo, int64_t rows, int transposed, float* scratch,
                                             const smelt_epilogue* epilogue) {
  const int64_t th = (ho + 1) / 2, tw = (wo + 1) / 2;
  const int64_t u_size = transposed ? (o + SMELT_GEMM_NR - 1) / SMELT_GEMM_NR * SMELT_GEMM_NR * c
                                    : (o + SMELT_GEMM_MR - 1) / SMELT_GEMM_MR * SMELT_GEMM_MR * c;
  /* tiles whose patch lies inside the image along x: tx in [tx_lo, tx_hi) */
  const int64_t tx_lo = (pw + 1) / 2, tx_hi_raw = w + pw >= 4 ? (w + pw - 4) / 2 + 1 : 0;
  const int64_t tx_hi = tx_hi_raw < tx_lo ? tx_lo : tx_hi_raw > tw ? tw : tx_hi_raw;
  float* v = scratch;
  float* m = v + 16 * smelt_winograd_stride(c * rows * tw);
  float* panels = m + 16 * smelt_winograd_stride(o * rows * tw);
  for (int64_t img = 0; img < n; ++img) {
    const float* image = x + img * c * h * w;
    float* out = y + img * o * ho * wo;
    for (int64_t ty0 = 0; ty0 < th; ty0 += rows) {
      const int64_t nty = th - ty0 < rows ? th - ty0 : rows, nt = nty * tw;
      const int64_t vs = smelt_winograd_stride(c * nt), ms = smelt_winograd_stride(o * nt);
      /* the inputs: v[xi * vs + ch * nt + t] = (B^T d B)[xi] of tile t's patch of channel ch */
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* plane = image + ch * h * w;
        for (int64_t ty = ty0; ty < ty0 + nty; ++ty) {
          const int64_t r0 = 2 * ty - ph;
          float* vrow = v + ch * nt + (ty - ty0) * tw;
          const int inside = r0 >= 0 && r0 + 3 < h;
          for (int64_t tx = 0; tx < tw; ++tx) {
            if (inside && tx == tx_lo && tx_hi > tx_lo) {  /* the interior run */
              for (int64_t q = tx_lo; q < tx_hi; ++q) {
                const float* p0 = plane + (r0 * w + 2 * q - pw);  /* the patch's first pixel */
                float d[4][4];
                for (int i = 0; i < 4; ++i) {
                  for (int j = 0; j < 4; ++j) d[i][j] = p0[i * w + j];
                }
                smelt_winograd_in(d, vrow + q, vs);
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
            smelt_winograd_in(d, vrow + tx, vs);
          }
        }
      }
      /* the products, at m + xi * ms: m[xi] (o x nt) = u[xi] (o x c) v[xi] (c x nt), or transposed
       * m[xi]^T (nt x o) = v[xi]^T u[xi]^T with u^T packed as the GEMM's B */
      for (int xi = 0; xi < 16; ++xi) {
        if (transposed) {
          smelt_gemm_b b = smelt_matrix_b(u + xi * u_size, 0, 0);
          b.packed = 1;
          smelt_gemm_f32(nt, o, c, v + xi * vs, 1, nt, 0, &b, m + xi * ms, o, panels, 0);
        } else {
          const smelt_gemm_b b = smelt_matrix_b(v + xi * vs, nt, 1);
          smelt_gemm_f32(o, nt, c, u + xi * u_size, 0, 0, 1, &b, m + xi * ms, nt, panels, 0);
        }
      }
      /* product (oc, t) of a matrix at oc * m_oc + t * m_t */
      const int64_t m_oc = transposed ? 1 : nt, m_t = transposed ? o : 1;
      /* the outputs: A^T m A, each tile's 2x2 block (cut at the image's edge) */
      for (int64_t oc = 0; oc < o; ++oc) {
        float* plane = out + oc * ho * wo;
        for (int64_t ty = ty0; ty < ty0 + nty; ++ty) {
          const float* mrow = m + oc * m_oc + (ty - ty0) * tw * m_t;
          float* y0 = plane + 2 * ty * wo;
          if (2 * ty + 1 < ho) {  /* both output rows, the whole tiles along x */
            float* y1 = y0 + wo;
            const int64_t full = wo / 2;
            for (int64_t tx = 0; tx < full; ++tx) {
              float t2[2][2];
              smelt_winograd_out(mrow + tx * m_t, ms, t2);
              y0[2 * tx] = t2[0][0], y0[2 * tx + 1] = t2[0][1];
              y1[2 * tx] = t2[1][0], y1[2 * tx + 1] = t2[1][1];
            }
            if (full < tw) {
              float t2[2][2];
              smelt_winograd_out(mrow + full * m_t, ms, t2);
              y0[2 * full] = t2[0][0], y1[2 * full] = t2[1][0];
            }
            continue;
          }
          for (int64_t tx = 0; tx < tw; ++tx) {
            float t2[2][2];
            smelt_winograd_out(mrow + tx * m_t, ms, t2);
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

#endif /* SMELT_EXPORT_CONV_H */
