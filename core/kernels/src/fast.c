/* FAST's local step (Liu, Bargteil, O'Brien & Kavan 2013, "Fast Simulation of Mass-Spring
 * Systems", section 4): each spring's vector d = x_a - x_b projected to its rest length,
 * weighted by its stiffness, plus the damping's part along the step's start direction, and
 * summed onto the free vertices: the right-hand side's spring part A_f per(x) of the global
 * step. */
#include <math.h>

#include "sinew_kernels.h"

/* m: a spring shorter than this has no direction of its own: it pushes along its rest
 * direction (forces.spring_geometry's fallback). */
#define TINY 1e-12

/* For each of the s springs, ends (s,2) gives each end's column in the free vertices' order,
 * or -1 for a pinned end, whose part of d is in dpin (3,s) (NULL: no pinned end). xf (3,f):
 * the free vertices' coordinates, one row per axis. With d = x_a - x_b and l = |d|:
 *   per = k L d / l + kd_h (d - (d . u0) u0)
 * (k L rest_dir instead of k L d / l where l <= TINY; the damping part only with kd_h,
 * u0 (3,s) and proj0 (s,) = u0 . d at the step's start, else all three NULL). out (3,f)
 * receives sum per at each spring's first end minus at its second. energy (may be NULL)
 * receives sum 1/2 k (l - L)^2 + 1/2 kd_h (u0 . d - proj0)^2. rest_dir is (s,3). */
int sinew_fast_local(int64_t s, int64_t f, const int64_t *ends, const double *xf, const double *dpin,
                     const double *k, const double *rest, const double *kd_h, const double *u0,
                     const double *proj0, const double *rest_dir, double *out, double *energy) {
    if (s < 0 || f < 0 || (kd_h && (!u0 || !proj0))) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < 2 * s; ++j)
        if (ends[j] < -1 || ends[j] >= f) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < 3 * f; ++j) out[j] = 0.0;
    double e = 0.0;
    for (int64_t j = 0; j < s; ++j) {
        int64_t a = ends[2 * j], b = ends[2 * j + 1];
        double d[3];
        for (int c = 0; c < 3; ++c) {
            double v = dpin ? dpin[c * s + j] : 0.0;
            if (a >= 0) v += xf[c * f + a];
            if (b >= 0) v -= xf[c * f + b];
            d[c] = v;
        }
        double l = sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
        double kl = k[j] * rest[j], per[3];
        e += 0.5 * k[j] * (l - rest[j]) * (l - rest[j]);
        if (l > TINY) {
            double scale = kl / l;
            for (int c = 0; c < 3; ++c) per[c] = scale * d[c];
        } else {
            for (int c = 0; c < 3; ++c) per[c] = kl * rest_dir[3 * j + c];
        }
        if (kd_h) {
            double proj = d[0] * u0[j] + d[1] * u0[s + j] + d[2] * u0[2 * s + j];
            for (int c = 0; c < 3; ++c) per[c] += kd_h[j] * (d[c] - proj * u0[c * s + j]);
            e += 0.5 * kd_h[j] * (proj - proj0[j]) * (proj - proj0[j]);
        }
        for (int c = 0; c < 3; ++c) {
            if (a >= 0) out[c * f + a] += per[c];
            if (b >= 0) out[c * f + b] -= per[c];
        }
    }
    if (energy) *energy = e;
    return SINEW_OK;
}
