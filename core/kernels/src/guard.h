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
#include "sinew_kernels.h"

/* Fraction of the way to a surface a stopped move goes. */
#define GUARD_STOP 0.9

/* Applies the guard to vertex i's new position nx in place; returns 1 when the ball bound
 * held it back (detection should run again), else 0. */
static inline int guard_move(const SinewVbdProblem *pb, int64_t i, double *nx) {
    double b = pb->bound[i];
    if (!isfinite(b)) return 0;
    const double *an = pb->anchor + 3 * i;
    int held = 0;
    double r[3];
    sub3(nx, an, r);
    double l = sqrt(dot3(r, r));
    if (l > b) {
        double s = b / l;
        nx[0] = an[0] + s * r[0]; nx[1] = an[1] + s * r[1]; nx[2] = an[2] + s * r[2];
        held = 1;
    }
    double s = 1.0;
    int64_t nc = pb->c_count ? pb->c_count[i] : 0;
    /* the move's length from the anchor: a slot triangle farther from the anchor than that
     * (its distance at detection) cannot be reached */
    double reach = held ? b : l;
    for (int64_t j = 0; j < nc; ++j) {
        if (pb->c_dist && pb->c_dist[pb->kslots * i + j] > reach) continue;
        const int64_t *tv = pb->tris + 3 * pb->c_id[pb->kslots * i + j];
        double t = segment_triangle(an, nx, pb->cv + 3 * tv[0], pb->cv + 3 * tv[1], pb->cv + 3 * tv[2]);
        if (t >= 0.0 && GUARD_STOP * t < s) s = GUARD_STOP * t;
    }
    for (int64_t p = 0; p < pb->np; ++p) {
        double t = segment_primitive(an, nx, pb->prim_type[p], pb->prim + 8 * p);
        if (t >= 0.0 && GUARD_STOP * t < s) s = GUARD_STOP * t;
    }
    if (s < 1.0) {
        sub3(nx, an, r);
        nx[0] = an[0] + s * r[0]; nx[1] = an[1] + s * r[1]; nx[2] = an[2] + s * r[2];
    }
    return held;
}

#endif
