/* The strain limit as Gauss-Seidel projections (Provot 1995's inverse dynamics, mass
 * weighted): a spring longer than its limit length has both ends moved along it until it is
 * no longer, in inverse proportion to their masses; pinned ends (inverse mass 0) stay. Each
 * move is clipped to the vertex's contact displacement bound, so the projection can never
 * carry a vertex through a collider. */
#include "geometry.h"
#include "sinew_kernels.h"

static inline void clip(double *p, const double *anchor, double bound) {
    if (!isfinite(bound)) return;
    double r[3];
    sub3(p, anchor, r);
    double l = sqrt(dot3(r, r));
    if (l > bound) {
        double s = bound / l;
        p[0] = anchor[0] + s * r[0]; p[1] = anchor[1] + s * r[1]; p[2] = anchor[2] + s * r[2];
    }
}

/* Up to rounds passes over the springs (s,2) with limit lengths limit (s,) (0 = none);
 * stops after a pass that found no spring longer than limit * (1 + tolerance). anchor and
 * bound (may be NULL) as for the VBD sweep. Returns the springs still longer than that
 * after the last pass, or SINEW_E_ARGUMENT. */
int64_t sinew_strain_project(int64_t s, const int64_t *springs, const double *limit,
                             const double *inv_mass, int64_t rounds, double tolerance,
                             const double *anchor, const double *bound, double *x) {
    int64_t over = 0;
    for (int64_t round = 0; round <= rounds; ++round) {
        over = 0;
        int project = round < rounds;
        for (int64_t j = 0; j < s; ++j) {
            double lim = limit[j];
            if (!(lim > 0.0)) continue;
            int64_t a = springs[2 * j], b = springs[2 * j + 1];
            if (a < 0 || b < 0) return SINEW_E_ARGUMENT;
            double *xa = x + 3 * a, *xb = x + 3 * b;
            double d[3];
            sub3(xa, xb, d);
            double l = sqrt(dot3(d, d));
            if (!(l > lim)) continue;
            if (l > lim * (1.0 + tolerance)) ++over;
            if (!project) continue;
            double wa = inv_mass[a], wb = inv_mass[b], wsum = wa + wb;
            if (!(wsum > 0.0)) continue;
            double c = (l - lim) / (l * wsum);
            for (int k = 0; k < 3; ++k) { xa[k] -= wa * c * d[k]; xb[k] += wb * c * d[k]; }
            if (anchor && bound) {
                clip(xa, anchor + 3 * a, bound[a]);
                clip(xb, anchor + 3 * b, bound[b]);
            }
        }
        if (over == 0) break;
    }
    return over;
}
