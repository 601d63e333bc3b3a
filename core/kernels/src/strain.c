/* The strain limit as Gauss-Seidel projections (Provot 1995's inverse dynamics, mass
 * weighted): a spring longer than its limit length has both ends moved along it until it is
 * no longer, in inverse proportion to their masses; pinned ends (inverse mass 0) stay. Each
 * move goes through the contact guard (guard.h) of the VBD problem, when one is given, so the
 * projection can never carry a vertex through a collider. */
#include "guard.h"

/* m: a pass that moves no vertex further than this has stalled (the guard holds it). */
#define STALL 1e-9
/* Passes without the largest excess shrinking by a hundredth that end the projection. */
#define STALL_PASSES 16
/* Over-relaxation of each projection (1 = plain Gauss-Seidel): on a sheet loaded past its
 * limit, 200 passes left 10.5 % at 1, 8.9 % at 1.5 for a 5 % limit; a 160² tablecloth's
 * landing took 8-10 % less time at 1.9 than at 1.5 (docs/CONTACT.md). */
#define OMEGA 1.9

/* One pass over the springs (backward when reverse): counts those longer than
 * limit * (1 + tolerance) as it meets them and, when project, moves the ends of every one
 * longer than its limit; *moved receives the largest coordinate move. Returns the count, or
 * SINEW_E_ARGUMENT. */
static int64_t strain_pass(int64_t s, const int64_t *springs, const double *limit,
                           const double *inv_mass, double tolerance, const SinewVbdProblem *guard,
                           double *x, int reverse, int project, double *moved, double *worst) {
    int64_t over = 0;
    *moved = 0.0;
    *worst = 0.0;
    for (int64_t jj = 0; jj < s; ++jj) {
        int64_t j = reverse ? s - 1 - jj : jj;
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
        if (l / lim - 1.0 > *worst) *worst = l / lim - 1.0;
        if (!project) continue;
        double wa = inv_mass[a], wb = inv_mass[b], wsum = wa + wb;
        if (!(wsum > 0.0)) continue;
        double c = OMEGA * (l - lim) / (l * wsum);
        double pa[3] = {xa[0], xa[1], xa[2]}, pb[3] = {xb[0], xb[1], xb[2]};
        double na[3], nb[3];
        for (int k = 0; k < 3; ++k) { na[k] = xa[k] - wa * c * d[k]; nb[k] = xb[k] + wb * c * d[k]; }
        /* one end after the other, each from where it is (the guard's self-contact test
         * holds the other vertices still); an end that does not move (a pin) is not guarded */
        if (guard && wa > 0.0) guard_move(guard, a, x, na);
        xa[0] = na[0]; xa[1] = na[1]; xa[2] = na[2];
        if (guard && wb > 0.0) guard_move(guard, b, x, nb);
        xb[0] = nb[0]; xb[1] = nb[1]; xb[2] = nb[2];
        for (int k = 0; k < 3; ++k) {
            double ma = fabs(xa[k] - pa[k]), mb = fabs(xb[k] - pb[k]);
            if (ma > *moved) *moved = ma;
            if (mb > *moved) *moved = mb;
        }
    }
    return over;
}

/* Up to rounds passes over the springs, alternately forward and backward, (s,2) with limit
 * lengths limit (s,) (0 = none); stops after a pass that moved nothing, or after STALL_PASSES
 * passes that did not shrink the largest excess (the guard holds the ends that would move), or
 * once a pass finds no spring longer than limit * (1 + tolerance)
 * and a count after it (the pass's own moves within the tolerance can stretch a spring it
 * had passed) confirms it. guard (may be NULL): the VBD problem whose contacts guard the
 * moves. Returns the springs still longer than that after the last pass, or
 * SINEW_E_ARGUMENT. */
int64_t sinew_strain_project(int64_t s, const int64_t *springs, const double *limit,
                             const double *inv_mass, int64_t rounds, double tolerance,
                             const SinewVbdProblem *guard, double *x) {
    int64_t over = 0;
    double best = INFINITY, worst = 0.0;
    int64_t idle = 0;
    for (int64_t round = 0; round <= rounds; ++round) {
        double moved = 0.0;
        int project = round < rounds;
        over = strain_pass(s, springs, limit, inv_mass, tolerance, guard, x, (int)(round & 1),
                           project, &moved, &worst);
        if (over < 0 || !project) break;
        if (!(moved > STALL)) break;
        if (over == 0) {
            over = strain_pass(s, springs, limit, inv_mass, tolerance, guard, x, 0, 0, &moved, &worst);
            if (over <= 0) break;
        }
        /* stalled: the largest excess has not shrunk by a hundredth in STALL_PASSES passes
         * (the guard holds the ends it would move against a collider) */
        if (worst < 0.99 * best) {
            best = worst;
            idle = 0;
        } else if (++idle >= STALL_PASSES) {
            break;
        }
    }
    return over;
}
