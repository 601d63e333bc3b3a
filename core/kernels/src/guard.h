/* The displacement guard shared by the VBD sweep and the strain-limit projection (internal
 * header): no move may carry a vertex through a collider surface.
 *
 * Detection (sinew_collider_query) found, for every vertex at its anchor position, every
 * collider triangle within its query radius, or the nearest kslots of them; bound[i] is a
 * radius within which no other triangle lies (the query radius, or the distance to the
 * farthest slot when the slots are full). A move is first clipped to that ball (Offset
 * Geometric Contact's conservative bound, Chen et al. 2025: the caller detects again), then
 * stopped short of the first triangle or primitive its straight path from the anchor
 * crosses (the colliders hold still within a step: their end-of-step positions). A vertex
 * that started inside a closed collider has an infinite bound: it is free to get out. */
#ifndef SINEW_GUARD_H
#define SINEW_GUARD_H

#include "geometry.h"
#include "selfcontact.h"
#include "sinew_kernels.h"

/* Fraction of the way to a surface a stopped move goes. */
#define GUARD_STOP 0.9

/* m: a path whose ends are both farther than this on one side of a triangle's plane does
 * not meet the triangle (tested before the segment test). */
#define GUARD_SIDE 1e-12

/* The first fraction of the straight path from vertex i's anchor to p at which it meets a
 * listed collider triangle or a primitive, or -1 when it meets none. Slots farther from the
 * anchor than reach (their distance at detection) cannot be met and are skipped, and so are
 * triangles whose plane (with the precomputed normals) has both ends on one side. */
static inline double collider_first(const SinewVbdProblem *pb, int64_t i, const double *p, double reach) {
    const double *an = pb->anchor + 3 * i;
    double first = -1.0;
    int64_t nc = pb->c_count ? pb->c_count[i] : 0;
    for (int64_t j = 0; j < nc; ++j) {
        if (pb->c_dist && pb->c_dist[pb->kslots * i + j] > reach) continue;
        int64_t tri = pb->c_id[pb->kslots * i + j];
        const int64_t *tv = pb->tris + 3 * tri;
        if (pb->tri_normal) {
            const double *nrm = pb->tri_normal + 3 * tri, *a = pb->cv + 3 * tv[0];
            double ra[3], rb[3];
            sub3(an, a, ra);
            sub3(p, a, rb);
            double sa = dot3(ra, nrm), sb = dot3(rb, nrm);
            if ((sa > GUARD_SIDE && sb > GUARD_SIDE) || (sa < -GUARD_SIDE && sb < -GUARD_SIDE)) continue;
        }
        double t = segment_triangle(an, p, pb->cv + 3 * tv[0], pb->cv + 3 * tv[1], pb->cv + 3 * tv[2]);
        if (t >= 0.0 && (first < 0.0 || t < first)) first = t;
    }
    for (int64_t q = 0; q < pb->np; ++q) {
        double t = segment_primitive(an, p, pb->prim_type[q], pb->prim + 8 * q);
        if (t >= 0.0 && (first < 0.0 || t < first)) first = t;
    }
    return first;
}

/* Clips p to the ball of radius b about an (along the line to an); returns 1 when it did.
 * length (may be NULL) receives p's distance from an, after the clip. */
static inline int clip_to_ball(const double *an, double b, double *p, double *length) {
    double r[3];
    sub3(p, an, r);
    double l = sqrt(dot3(r, r));
    if (!(l > b)) {
        if (length) *length = l;
        return 0;
    }
    double s = b / l;
    p[0] = an[0] + s * r[0]; p[1] = an[1] + s * r[1]; p[2] = an[2] + s * r[2];
    if (length) {
        sub3(p, an, r);
        *length = sqrt(dot3(r, r));
    }
    return 1;
}

/* Applies the guard to vertex i's move from its position at (x + 3 i) to nx, in place on nx;
 * returns 1 when a ball bound held it back (detection should run again), else 0.
 *
 * Colliders: as above. Self-contact (selfcontact.h): the move is clipped to the ball
 * (self_anchor, self_bound) and stopped short of the first listed pair of i's that its
 * straight path from where i is crosses, the other vertices held at x; when that stop would
 * put i behind a collider (its path from the anchor crossing a listed triangle), i stays. */
static inline int guard_move(const SinewVbdProblem *pb, int64_t i, const double *x, double *nx) {
    int held = 0;
    int selfish = pb->self_r > 0.0 && pb->inc_off && pb->self_bound;
    if (selfish) held |= clip_to_ball(pb->self_anchor + 3 * i, pb->self_bound[i], nx, NULL);
    double b = pb->bound[i];
    if (isfinite(b)) {
        const double *an = pb->anchor + 3 * i;
        double r[3], l;
        held |= clip_to_ball(an, b, nx, &l);
        /* the move's length from the anchor: a slot triangle farther from the anchor than
         * that (its distance at detection) cannot be reached */
        double t = collider_first(pb, i, nx, l);
        double s = t >= 0.0 ? GUARD_STOP * t : 1.0;
        if (s < 1.0) {
            sub3(nx, an, r);
            nx[0] = an[0] + s * r[0]; nx[1] = an[1] + s * r[1]; nx[2] = an[2] + s * r[2];
        }
    }
    if (selfish && pb->inc_off[i + 1] > pb->inc_off[i]) {
        const double *from = x + 3 * i;
        double t = self_crossing(pb, i, x, from, nx);
        if (t >= 0.0) {
            double s = GUARD_STOP * t;
            double p[3] = {from[0] + s * (nx[0] - from[0]), from[1] + s * (nx[1] - from[1]),
                           from[2] + s * (nx[2] - from[2])};
            if (isfinite(b) && collider_first(pb, i, p, INFINITY) >= 0.0) {
                p[0] = from[0]; p[1] = from[1]; p[2] = from[2];
            }
            nx[0] = p[0]; nx[1] = p[1]; nx[2] = p[2];
        }
    }
    if (selfish) {
        /* the collider's clips move toward its anchor, which may lie outside the self ball:
         * a move that ends outside stays where it started (inside, by this same rule) */
        if (self_move_of(pb, i, nx) > pb->self_bound[i] * (1.0 + 1e-9)) {
            const double *from = x + 3 * i;
            nx[0] = from[0]; nx[1] = from[1]; nx[2] = from[2];
            held = 1;
        }
        pb->self_moved[i] = self_move_of(pb, i, nx);
    }
    return held;
}

#endif
