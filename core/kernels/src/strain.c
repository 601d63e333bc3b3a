/* The strain limit as Gauss-Seidel projections (Provot 1995's inverse dynamics, mass
 * weighted): a spring longer than its limit length has both ends moved along it until it is
 * no longer, in inverse proportion to their masses; pinned ends (inverse mass 0) stay. Each
 * move goes through the contact guard (guard.h) of the VBD problem, when one is given, so the
 * projection can never carry a vertex through a collider. */
#include "guard.h"
#include "team.h"

/* m: a pass that moves no vertex further than this has stalled (the guard holds it). */
#define STALL 1e-9
/* Passes without the largest excess shrinking by a hundredth that end the projection. */
#define STALL_PASSES 16
/* Over-relaxation of each projection (1 = plain Gauss-Seidel): on a sheet loaded past its
 * limit, 200 passes left 10.5 % at 1, 8.9 % at 1.5 for a 5 % limit; a 160² tablecloth's
 * landing took 8-10 % less time at 1.9 than at 1.5, and less again at 1.95 (docs/CONTACT.md).
 * A projection that stalls over-relaxed goes on at 1 (over-relaxed, a short chain with a
 * pinned end can cycle just past its limit) before it stops. */
#define OMEGA 1.95

/* What one pass found: springs longer than limit * (1 + tolerance) as it met them, the
 * largest coordinate move and the largest excess l / limit - 1. */
typedef struct {
    double over, moved, worst;
} PassSums;

/* One pass over springs lo .. hi-1 (backward when reverse), adding to *sums: counts those
 * longer than limit * (1 + tolerance) as it meets them and, when project, moves the ends of
 * every one longer than its limit (their indices checked by the caller). */
static void strain_pass(int64_t lo, int64_t hi, const int64_t *springs, const double *limit,
                        const double *inv_mass, double tolerance, const SinewVbdProblem *guard,
                        double *x, int reverse, int project, double omega, PassSums *sums) {
    for (int64_t jj = lo; jj < hi; ++jj) {
        int64_t j = reverse ? lo + hi - 1 - jj : jj;
        double lim = limit[j];
        if (!(lim > 0.0)) continue;
        int64_t a = springs[2 * j], b = springs[2 * j + 1];
        double *xa = x + 3 * a, *xb = x + 3 * b;
        double d[3];
        sub3(xa, xb, d);
        double dd = dot3(d, d);
        if (!(dd > lim * lim)) continue; /* (most springs: no square root) */
        double l = sqrt(dd);
        if (!(l > lim)) continue;
        if (l > lim * (1.0 + tolerance)) sums->over += 1.0;
        if (l / lim - 1.0 > sums->worst) sums->worst = l / lim - 1.0;
        if (!project) continue;
        double wa = inv_mass[a], wb = inv_mass[b], wsum = wa + wb;
        if (!(wsum > 0.0)) continue;
        double c = omega * (l - lim) / (l * wsum);
        /* one end after the other, each from where it is (the guard's self-contact test
         * holds the other vertices still); an end that does not move (a pin, which springs
         * of several slabs may share) is neither guarded nor written */
        double *ends[2] = {xa, xb};
        int64_t id[2] = {a, b};
        double w[2] = {wa, -wb};
        for (int e = 0; e < 2; ++e) {
            if (!(w[e] != 0.0)) continue;
            double *xe = ends[e], ne[3];
            for (int k = 0; k < 3; ++k) ne[k] = xe[k] - w[e] * c * d[k];
            if (guard) guard_move(guard, id[e], x, ne);
            for (int k = 0; k < 3; ++k) {
                double m = fabs(ne[k] - xe[k]);
                if (m > sums->moved) sums->moved = m;
                xe[k] = ne[k];
            }
        }
    }
}

/* Waits at the team's barrier (none for a team of one, or NULL); 0 or the code that stopped it. */
static int meet(SinewTeam *team) { return team ? team_wait(team) : 0; }

/* One pass over every slab by thread `thread` of T: the even slabs, then the odd ones (the odd
 * first, each backward, when reverse), a block of each parity's slabs per thread, a barrier
 * after each parity; then every thread adds up what each found (the same sums on all).
 * Returns SINEW_OK or an error code. */
static int team_pass(SinewTeam *team, int64_t thread, int64_t T, int64_t nslabs, const int64_t *slab_off,
                     const int64_t *springs, const double *limit, const double *inv_mass,
                     double tolerance, const SinewVbdProblem *guard, double *x, int reverse, int project,
                     double omega, int64_t pass, PassSums *total) {
    PassSums mine = {0.0, 0.0, 0.0};
    for (int phase = 0; phase < 2; ++phase) {
        int parity = reverse ? 1 - phase : phase;
        int64_t count = (nslabs - parity + 1) / 2, lo, hi;
        team_share(count, thread, T, &lo, &hi);
        for (int64_t q = lo; q < hi; ++q) {
            int64_t k = parity + 2 * (reverse ? lo + hi - 1 - q : q);
            strain_pass(slab_off[k], slab_off[k + 1], springs, limit, inv_mass, tolerance, guard, x, reverse,
                        project, omega, &mine);
        }
        int status = meet(team);
        if (status != 0) return status;
    }
    if (!team || T == 1) {
        *total = mine;
        return SINEW_OK;
    }
    double row[3] = {mine.over, mine.moved, mine.worst};
    int status = team_exchange(team, thread, pass, row, 3);
    if (status != 0) return status;
    *total = (PassSums){0.0, 0.0, 0.0};
    for (int64_t t = 0; t < T; ++t) {
        const double *o = team->rows[pass & 1][t];
        total->over += o[0];
        if (o[1] > total->moved) total->moved = o[1];
        if (o[2] > total->worst) total->worst = o[2];
    }
    return SINEW_OK;
}

/* Up to rounds passes over the springs, alternately forward and backward, (s,2) with limit
 * lengths limit (s,) (0 = none) on the n vertices of x, over-relaxed by OMEGA; stops after
 * a pass that moved nothing, or after STALL_PASSES passes that did not shrink the largest
 * excess (the guard holds the ends that would move) twice, over-relaxed and then not, or
 * once a pass finds no spring longer than limit * (1 + tolerance) and a count after it (the
 * pass's own moves within the tolerance can stretch a spring it had passed) confirms it.
 * guard (may be NULL): the VBD problem whose contacts guard the moves.
 *
 * The springs come in nslabs slabs (slab_off (nslabs+1) into them) such that the springs of
 * two slabs of the same parity share no vertex that moves (a pinned end, inverse mass 0, is
 * only read): each pass visits the even slabs, then the odd ones, and thread `thread` of the
 * team (team.h; NULL: a team of one) takes a block of each parity's slabs. The order is the
 * slabs', so the result is the same bit for bit at any number of threads; every thread makes
 * the same call with its own index. With a guard that has self-contact pairs, one thread: a
 * move's test reads the other vertices. Returns the springs still longer than that after the
 * last pass (every thread the same), or an error code. */
int64_t sinew_strain_project(SinewTeam *team, int64_t thread, int64_t n, int64_t s, const int64_t *springs,
                             const double *limit, const double *inv_mass, int64_t nslabs,
                             const int64_t *slab_off, int64_t rounds, double tolerance,
                             const SinewVbdProblem *guard, double *x) {
    int64_t T = team ? team->threads : 1;
    int bad = thread < 0 || thread >= T || nslabs < 1 || slab_off[0] != 0 || slab_off[nslabs] != s;
    for (int64_t k = 0; k < nslabs && !bad; ++k) bad = slab_off[k + 1] < slab_off[k];
    /* (every thread checks every spring: a bad one is refused before any vertex moves) */
    for (int64_t j = 0; j < 2 * s && !bad; ++j) bad = springs[j] < 0 || springs[j] >= n;
    if (!bad && T > 1 && guard && guard->self_r > 0.0 && guard->inc_off) bad = 1;
    if (bad) {
        if (team) team_fail(team, SINEW_E_ARGUMENT);
        return SINEW_E_ARGUMENT;
    }
    PassSums sums = {0.0, 0.0, 0.0};
    double best = INFINITY, omega = OMEGA;
    int64_t idle = 0, pass = 0;
    for (int64_t round = 0; round <= rounds; ++round) {
        int project = round < rounds;
        int status = team_pass(team, thread, T, nslabs, slab_off, springs, limit, inv_mass, tolerance, guard,
                               x, (int)(round & 1), project, omega, pass++, &sums);
        if (status != SINEW_OK) return status;
        if (!project || !(sums.moved > STALL)) break;
        if (sums.over == 0.0) {
            status = team_pass(team, thread, T, nslabs, slab_off, springs, limit, inv_mass, tolerance, guard,
                               x, 0, 0, omega, pass++, &sums);
            if (status != SINEW_OK) return status;
            if (sums.over == 0.0) break;
        }
        /* stalled: the largest excess has not shrunk by a hundredth in STALL_PASSES passes
         * (the guard holds the ends it would move against a collider) */
        if (sums.worst < 0.99 * best) {
            best = sums.worst;
            idle = 0;
        } else if (++idle >= STALL_PASSES) {
            if (omega == 1.0) break;
            omega = 1.0;
            idle = 0;
        }
    }
    return (int64_t)sums.over;
}
