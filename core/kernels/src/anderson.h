/* Anderson acceleration of a fixed-point iteration x <- G(x) (Anderson 1965; "type II" as in
 * Walker & Ni 2011, "Anderson Acceleration for Fixed-Point Iterations"). With
 * f_k = G(x_k) - x_k and the last q <= memory differences dF_i = f_{i+1} - f_i,
 * dG_i = G(x_{i+1}) - G(x_i), the next iterate is
 *   x_{k+1} = G(x_k) - sum_i gamma_i dG_i,
 * gamma minimising |f_k - sum_i gamma_i dF_i|: the normal equations
 * (dF^T dF + eps I) gamma = dF^T f_k, eps = 1e-10 trace(dF^T dF) + 1e-300, by Cholesky. A
 * second vector (FAST's S G(x), which S x_{k+1} follows from without a product) may be
 * combined with the same weights.
 *
 * One implementation in three parts, so that VBD's iterations (vbd.c) can share the vectors'
 * work out among a team's threads and the standalone entry point (anderson.c) runs it whole:
 * anderson_record over blocks of entries, anderson_weights on the summed block partials, then
 * anderson_combine over the blocks again. The dot products are summed per block of
 * SINEW_ANDERSON_BLOCK entries and the blocks' partials in order, so the result does not
 * depend on how the blocks are shared out. */
#ifndef SINEW_ANDERSON_H
#define SINEW_ANDERSON_H

#include <math.h>
#include <string.h>

#include "sinew_kernels.h"

/* Values a block's partial holds: |f|^2, then dF_i . dF_k and dF_i . f for each i < memory. */
#define ANDERSON_PARTIAL (1 + 2 * SINEW_ANDERSON_MEMORY)

/* Blocks of the aa->size entries. */
static inline int64_t anderson_blocks(const SinewAnderson *aa) {
    return (aa->size + SINEW_ANDERSON_BLOCK - 1) / SINEW_ANDERSON_BLOCK;
}

/* The ring's slot the newest differences go to, and how many differences the weights use
 * once they are in. */
static inline void anderson_slot(const SinewAnderson *aa, int64_t *k, int64_t *q) {
    int64_t count = aa->state[0] ? aa->state[1] : 0;
    *k = count % aa->memory;
    *q = count + 1 < aa->memory ? count + 1 : aa->memory;
}

/* a . b over n entries, in four interleaved sums (no chain of dependent additions) added
 * in a fixed order. */
static inline double anderson_dot(const double *a, const double *b, int64_t n) {
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    int64_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += a[j] * b[j];
        s1 += a[j + 1] * b[j + 1];
        s2 += a[j + 2] * b[j + 2];
        s3 += a[j + 3] * b[j + 3];
    }
    for (; j < n; ++j) s0 += a[j] * b[j];
    return (s0 + s1) + (s2 + s3);
}

/* Records blocks b0 .. b1-1 of this iterate: g = G(x_k) (size), f_k = f, or g - before
 * where f is NULL, sg the second vector (or NULL). With the previous iterate held
 * (state[0]), the newest differences go to the ring's slot; the iterate's f, g and sg
 * replace the previous ones; each block's partial (ANDERSON_PARTIAL values) receives its
 * |f|^2 and, with the previous iterate held, dF_i . dF_k and dF_i . f for i < q. */
static inline void anderson_record(const SinewAnderson *aa, int64_t b0, int64_t b1, const double *g,
                                   const double *f, const double *before, const double *sg) {
    int64_t size = aa->size, k, q;
    anderson_slot(aa, &k, &q);
    int had = aa->state[0] != 0;
    double *f0 = aa->last, *g0 = aa->last + size, *s0 = aa->last + 2 * size;
    double *df = aa->hist_f + k * size, *dg = aa->hist_g + 2 * k * size, *ds = dg + size;
    for (int64_t b = b0; b < b1; ++b) {
        int64_t lo = b * SINEW_ANDERSON_BLOCK, hi = lo + SINEW_ANDERSON_BLOCK < size ? lo + SINEW_ANDERSON_BLOCK : size;
        double *part = aa->partial + b * ANDERSON_PARTIAL;
        for (int64_t j = lo; j < hi; ++j) { /* (then f0 holds f_k) */
            double fj = f ? f[j] : g[j] - before[j];
            if (had) {
                df[j] = fj - f0[j];
                dg[j] = g[j] - g0[j];
            }
            f0[j] = fj;
            g0[j] = g[j];
        }
        if (sg) {
            if (had)
                for (int64_t j = lo; j < hi; ++j) ds[j] = sg[j] - s0[j];
            memcpy(s0 + lo, sg + lo, (size_t)(hi - lo) * sizeof(double));
        }
        part[0] = anderson_dot(f0 + lo, f0 + lo, hi - lo);
        for (int64_t i = 0; had && i < q; ++i) {
            const double *di = aa->hist_f + i * size + lo;
            part[1 + i] = anderson_dot(di, df + lo, hi - lo);
            part[1 + SINEW_ANDERSON_MEMORY + i] = anderson_dot(di, f0 + lo, hi - lo);
        }
    }
}

/* The blocks' partials summed in order into sums (ANDERSON_PARTIAL values). */
static inline void anderson_sums(const SinewAnderson *aa, double *sums) {
    int64_t nb = anderson_blocks(aa);
    for (int a = 0; a < ANDERSON_PARTIAL; ++a) sums[a] = 0.0;
    for (int64_t b = 0; b < nb; ++b)
        for (int a = 0; a < ANDERSON_PARTIAL; ++a) sums[a] += aa->partial[b * ANDERSON_PARTIAL + a];
}

/* Solves the q x q symmetric positive definite system a (row-major, overwritten) y = b in
 * place by Cholesky; 0 where a pivot is not positive or y is not finite. */
static inline int anderson_cholesky(int64_t q, double *a, double *b) {
    for (int64_t j = 0; j < q; ++j) {
        double d = a[j * q + j];
        for (int64_t m = 0; m < j; ++m) d -= a[j * q + m] * a[j * q + m];
        if (!(d > 0.0)) return 0;
        d = sqrt(d);
        a[j * q + j] = d;
        for (int64_t i = j + 1; i < q; ++i) {
            double s = a[i * q + j];
            for (int64_t m = 0; m < j; ++m) s -= a[i * q + m] * a[j * q + m];
            a[i * q + j] = s / d;
        }
    }
    for (int64_t i = 0; i < q; ++i) { /* L z = b */
        double s = b[i];
        for (int64_t m = 0; m < i; ++m) s -= a[i * q + m] * b[m];
        b[i] = s / a[i * q + i];
    }
    for (int64_t i = q - 1; i >= 0; --i) { /* L^T y = z */
        double s = b[i];
        for (int64_t m = i + 1; m < q; ++m) s -= a[m * q + i] * b[m];
        b[i] = s / a[i * q + i];
    }
    for (int64_t i = 0; i < q; ++i)
        if (!isfinite(b[i])) return 0;
    return 1;
}

/* The weights gamma from the summed partials, with the Gram matrix's row k taken from them
 * (the stored matrix is not written: anderson_advance does that); returns their count q,
 * or 0 where there are none (no previous iterate, or a system that is singular or not
 * finite). Every thread of a team may call it: it reads shared state only. */
static inline int64_t anderson_weights(const SinewAnderson *aa, const double *sums, double *gamma) {
    if (!aa->state[0]) return 0;
    int64_t k, q, m = aa->memory;
    anderson_slot(aa, &k, &q);
    double a[SINEW_ANDERSON_MEMORY * SINEW_ANDERSON_MEMORY];
    for (int64_t i = 0; i < q; ++i)
        for (int64_t j = 0; j < q; ++j)
            a[i * q + j] = i == k ? sums[1 + j] : j == k ? sums[1 + i] : aa->gram[i * m + j];
    double trace = 0.0;
    for (int64_t i = 0; i < q; ++i) trace += a[i * q + i];
    for (int64_t i = 0; i < q; ++i) {
        a[i * q + i] += 1e-10 * trace + 1e-300;
        gamma[i] = sums[1 + SINEW_ANDERSON_MEMORY + i];
    }
    return anderson_cholesky(q, a, gamma) ? q : 0;
}

/* Commits the iterate recorded (one thread, after every thread's anderson_weights): the
 * Gram matrix's row k from the sums, and the count of differences; with restart, the
 * differences are dropped and the iterate starts a new history. */
static inline void anderson_advance(const SinewAnderson *aa, const double *sums, int restart) {
    int64_t k, q, m = aa->memory;
    anderson_slot(aa, &k, &q);
    if (aa->state[0] && !restart) {
        for (int64_t i = 0; i < q; ++i) aa->gram[k * m + i] = aa->gram[i * m + k] = sums[1 + i];
        aa->state[1] += 1;
    } else {
        aa->state[0] = 1;
        aa->state[1] = 0;
    }
}

/* Entries lo .. hi-1 of x_{k+1} = G(x_k) - sum_i gamma_i dG_i into out (and of the second
 * vector into sout, when given), q the weights' count; block by block, each block's
 * entries staying in cache over the q terms. */
static inline void anderson_combine(const SinewAnderson *aa, int64_t lo, int64_t hi, int64_t q,
                                    const double *gamma, const double *g, const double *sg,
                                    double *out, double *sout) {
    int64_t size = aa->size;
    for (int64_t a = lo; a < hi; a += SINEW_ANDERSON_BLOCK) {
        int64_t e = a + SINEW_ANDERSON_BLOCK < hi ? a + SINEW_ANDERSON_BLOCK : hi;
        memcpy(out + a, g + a, (size_t)(e - a) * sizeof(double));
        for (int64_t i = 0; i < q; ++i) {
            const double *gi = aa->hist_g + 2 * i * size;
            double c = gamma[i];
            for (int64_t j = a; j < e; ++j) out[j] -= c * gi[j];
        }
        if (!sout) continue;
        memcpy(sout + a, sg + a, (size_t)(e - a) * sizeof(double));
        for (int64_t i = 0; i < q; ++i) {
            const double *si = aa->hist_g + (2 * i + 1) * size;
            double c = gamma[i];
            for (int64_t j = a; j < e; ++j) sout[j] -= c * si[j];
        }
    }
}

#endif
