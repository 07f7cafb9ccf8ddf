/* The other ops of an exported model that are not fused kernels (docs/export_c.md): pooling, batch
 * norm in eval mode, strided copies (any dtype) and index_select, as portable C11 loops that
 * export_c/op_calls.cpp calls with every shape and stride a constant. */
#ifndef SMELT_EXPORT_OPS_H
#define SMELT_EXPORT_OPS_H

/* The max pooling rule: the tap v replaces the best so far when larger, or when it is the first
 * NaN (a NaN wins and stays). Taken in row-major tap order it keeps the first largest tap. */
static inline float smelt_max_tap(float best, float v) { return (v > best || (v != v && best == best)) ? v : best; }

/* Max pooling without indices, an output row at a time as whole vectors. Each input row the
 * window reads is copied between -inf columns (a -inf tap never replaces the best so far, and one
 * always is replaced unless the other tap is also -inf: the same as skipping the columns outside
 * the image) and split by stride phase (phase r: columns r, r + sw, ...), so that tap j of output
 * o is element o + j * dw / sw of phase j * dw % sw: each tap is then a contiguous pass over the
 * output row, 16-aligned in length, that compilers vectorize without gathers or a scalar tail
 * (an edge- and tail-free loop ran ResNet-18's 3x3 stride-2 pooling 1.7x faster than
 * window-at-a-time code, whose mispredicted branches depend on the data). The taps combine in
 * row-major window order, so the values (signed zeros and NaN payloads included) are the tap
 * loop's. scratch: smelt_max_pool2d_scratch(wo, kw, sw, dw) floats. */
static inline int64_t smelt_max_pool2d_scratch(int64_t wo, int64_t kw, int64_t sw, int64_t dw) {
  const int64_t wp = (wo + 15) / 16 * 16, phase_len = wp + (kw - 1) * dw / sw + 1;
  return 2 * phase_len * sw + wp;
}
static inline void smelt_max_taps(float* restrict best, const float* restrict tap, int64_t n) {
  for (int64_t o = 0; o < n; ++o) best[o] = smelt_max_tap(best[o], tap[o]);
}
static inline void smelt_max_pool2d_rows_f32(const float* x, float* y, int64_t planes, int64_t h, int64_t w,
                                             int64_t ho, int64_t wo, int64_t kh, int64_t kw, int64_t sh,
                                             int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw,
                                             float* scratch) {
  const int64_t wp = (wo + 15) / 16 * 16, phase_len = wp + (kw - 1) * dw / sw + 1, padded_len = phase_len * sw;
  float* padded = scratch;                                  /* padded[q]: input column q - pw */
  float* phases = sw == 1 ? padded : padded + padded_len;   /* phase r at r * phase_len */
  float* best = padded + 2 * padded_len;                    /* the output row, wp long */
  /* the columns of padded that come from the image: [left, right) */
  const int64_t left = pw < padded_len ? pw : padded_len;
  const int64_t right = w + pw < padded_len ? (w + pw > left ? w + pw : left) : padded_len;
  for (int64_t q = 0; q < left; ++q) padded[q] = -INFINITY;
  for (int64_t q = right; q < padded_len; ++q) padded[q] = -INFINITY;
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x + pl * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      for (int64_t o = 0; o < wp; ++o) best[o] = -INFINITY;
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t ih = oh * sh - ph + i * dh;
        if (ih < 0 || ih >= h) continue;
        const float* row = plane + ih * w;
        for (int64_t q = left; q < right; ++q) padded[q] = row[q - pw];
        if (sw == 2) { /* the common stride, with a constant step the compiler shuffles */
          for (int64_t k = 0; k < phase_len; ++k) phases[k] = padded[2 * k], phases[phase_len + k] = padded[2 * k + 1];
        } else if (sw > 2) {
          for (int64_t r = 0; r < sw; ++r) {
            for (int64_t k = 0; k < phase_len; ++k) phases[r * phase_len + k] = padded[k * sw + r];
          }
        }
        for (int64_t j = 0; j < kw; ++j) smelt_max_taps(best, phases + (j * dw % sw) * phase_len + j * dw / sw, wp);
      }
      memcpy(y + (pl * ho + oh) * wo, best, (size_t)wo * sizeof(float));
    }
  }
}

/* Max pooling over `planes` images of h x w: the first largest tap of each window (a NaN wins and
 * stays), taps outside the image skipped; index (optional): the tap's offset in its plane, -1 for
 * a window with none. Without indices and given scratch, row by row (smelt_max_pool2d_rows_f32). */
static inline void smelt_max_pool2d_f32(const float* x, float* y, int64_t* index, int64_t planes, int64_t h,
                                        int64_t w, int64_t ho, int64_t wo, int64_t kh, int64_t kw, int64_t sh,
                                        int64_t sw, int64_t ph, int64_t pw, int64_t dh, int64_t dw, float* scratch) {
  if (!index && scratch) {
    smelt_max_pool2d_rows_f32(x, y, planes, h, w, ho, wo, kh, kw, sh, sw, ph, pw, dh, dw, scratch);
    return;
  }
  for (int64_t pl = 0; pl < planes; ++pl) {
    const float* plane = x + pl * h * w;
    for (int64_t oh = 0; oh < ho; ++oh) {
      for (int64_t ow = 0; ow < wo; ++ow) {
        float best = -INFINITY;
        int64_t at = -1;
        for (int64_t i = 0; i < kh; ++i) {
          const int64_t ih = oh * sh - ph + i * dh;
          if (ih < 0 || ih >= h) continue;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t iw = ow * sw - pw + j * dw;
            if (iw < 0 || iw >= w) continue;
            const float v = plane[ih * w + iw];
            if (at < 0 || v > best || (v != v && best == best)) best = v, at = ih * w + iw;
          }
        }
        y[(pl * ho + oh) * wo + ow] = best;
        if (index) index[(pl * ho + oh) * wo + ow] = at;
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
          const int64_t row = (oi + i * dh) * w + oj;  /* the window's first column, maybe left of the image */
          for (int64_t j = bj; j < ej; ++j) acc += plane[row + j * dw];
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
