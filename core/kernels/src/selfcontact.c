/* Self detection: the vertex-face and edge-edge pairs of a cloth that may come within its
 * contact radius before one of their vertices leaves its ball (selfcontact.h). */
#include "grid.h"
#include "selfcontact.h"
#include "team.h"

/* The squared distance between boxes [alo, ahi] and [blo, bhi]. */
static inline double box_gap2(const double *alo, const double *ahi, const double *blo, const double *bhi) {
    double g2 = 0.0;
    for (int a = 0; a < 3; ++a) {
        double g = blo[a] - ahi[a], g1 = alo[a] - bhi[a];
        g = g > g1 ? g : g1;
        if (g > 0.0) g2 += g * g;
    }
    return g2;
}

/* Appends a pair when there is room; counts it either way. */
static inline void emit(int64_t a, int64_t b, double d, int64_t cap, int64_t *pairs, double *dist,
                        int64_t *count) {
    if (*count < cap) {
        pairs[2 * *count] = a;
        pairs[2 * *count + 1] = b;
        dist[*count] = d;
    }
    ++*count;
}

/* The self pairs of a cloth at x (n,3), each vertex within its ball bound (n,) of x until the
 * next detection: a vertex-face pair (vertex, face) when its distance is at most
 * r + bound[vertex] + the largest bound of the face's corners, an edge-edge pair (e1 < e2)
 * when at most r + the largest bound of each edge's ends; features that share a vertex never,
 * nor the pairs skipped (neighbours in the rest shape): the faces skip_vf[skip_vf_off[i] ..
 * skip_vf_off[i + 1]] of vertex i and the edges skip_ee[skip_ee_off[e] .. skip_ee_off[e + 1]]
 * of edge e (the walks pass them by unseen). The faces (nf,3) and edges
 * (ne,2) are gridded at x (cell, table; f_off/f_entries and e_off/e_entries as sinew_grid_build
 * writes them) with their boxes f_lo, f_hi (nf,3) and e_lo, e_hi (ne,3); bmax is the largest
 * bound. stamp (max(nf, ne),) is scratch. Part part of parts (0 <= part < parts) takes the
 * part-th block of the vertices (vertex-face pairs) and of the edges (first edge of an
 * edge-edge pair) in order, so parts on several threads, each with its own stamp and
 * output, give the pairs of one call when their outputs are joined in part order (the
 * vertex-face pairs of every part, then the edge-edge ones). Writes the
 * vertex-face pairs first, then the edge-edge ones, into pairs (cap,2) with their distances
 * dist (cap,), and their numbers into counts (2); returns the total, which may exceed cap
 * (then call again with more room), or SINEW_E_ARGUMENT. */
int64_t sinew_self_query(int64_t n, const double *x, const double *bound, double r, double bmax,
                         int64_t nf, const int64_t *faces, int64_t ne, const int64_t *edges,
                         double cell, int64_t table, const int64_t *f_off, const int64_t *f_entries,
                         const int64_t *e_off, const int64_t *e_entries, const double *f_lo,
                         const double *f_hi, const double *e_lo, const double *e_hi,
                         const int64_t *skip_vf_off, const int64_t *skip_vf,
                         const int64_t *skip_ee_off, const int64_t *skip_ee,
                         int64_t *stamp, int64_t part, int64_t parts, int64_t cap, int64_t *pairs,
                         double *dist, int64_t *counts) {
    if (!(cell > 0.0) || table < 1 || !(r >= 0.0) || !(bmax >= 0.0) || cap < 0) return SINEW_E_ARGUMENT;
    if (parts < 1 || part < 0 || part >= parts) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < 3 * nf; ++j)
        if (faces[j] < 0 || faces[j] >= n) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < 2 * ne; ++j)
        if (edges[j] < 0 || edges[j] >= n) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < f_off[table]; ++j)
        if (f_entries[j] < 0 || f_entries[j] >= nf) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < e_off[table]; ++j)
        if (e_entries[j] < 0 || e_entries[j] >= ne) return SINEW_E_ARGUMENT;
    if (skip_vf_off[0] < 0 || skip_ee_off[0] < 0) return SINEW_E_ARGUMENT;
    for (int64_t i = 0; i < n; ++i)
        if (skip_vf_off[i + 1] < skip_vf_off[i]) return SINEW_E_ARGUMENT;
    for (int64_t e = 0; e < ne; ++e)
        if (skip_ee_off[e + 1] < skip_ee_off[e]) return SINEW_E_ARGUMENT;
    for (int64_t j = skip_vf_off[0]; j < skip_vf_off[n]; ++j)
        if (skip_vf[j] < 0 || skip_vf[j] >= nf) return SINEW_E_ARGUMENT;
    for (int64_t j = skip_ee_off[0]; j < skip_ee_off[ne]; ++j)
        if (skip_ee[j] < 0 || skip_ee[j] >= ne) return SINEW_E_ARGUMENT;
    int64_t most = nf > ne ? nf : ne;
    for (int64_t j = 0; j < most; ++j) stamp[j] = -1;
    int64_t count = 0, first, last;
    team_share(n, part, parts, &first, &last);
    for (int64_t i = first; i < last; ++i) {
        const double *p = x + 3 * i;
        double reach = r + bound[i] + bmax;
        double lo[3] = {p[0] - reach, p[1] - reach, p[2] - reach};
        double hi[3] = {p[0] + reach, p[1] + reach, p[2] + reach};
        GridWalk walk;
        walk_start(&walk, lo, hi, cell, table, f_off, f_entries, stamp, i);
        /* the faces skipped, stamped as given already: the walk passes them by */
        for (int64_t j = skip_vf_off[i]; j < skip_vf_off[i + 1]; ++j) stamp[skip_vf[j]] = i;
        int64_t t;
        while (walk_next(&walk, &t)) {
            const int64_t *f = faces + 3 * t;
            if (f[0] == i || f[1] == i || f[2] == i) continue;
            if (box_gap2(p, p, f_lo + 3 * t, f_hi + 3 * t) > reach * reach) continue;
            double q[3], bary[3], diff[3];
            const double *a = x + 3 * f[0], *b = x + 3 * f[1], *c = x + 3 * f[2];
            closest_on_triangle(p, a, b, c, q, bary);
            sub3(p, q, diff);
            double d = sqrt(dot3(diff, diff));
            double bf = bound[f[0]];
            if (bound[f[1]] > bf) bf = bound[f[1]];
            if (bound[f[2]] > bf) bf = bound[f[2]];
            if (!(d <= r + bound[i] + bf)) continue;
            emit(i, t, d, cap, pairs, dist, &count);
        }
    }
    counts[0] = count;
    for (int64_t j = 0; j < most; ++j) stamp[j] = -1;
    team_share(ne, part, parts, &first, &last);
    for (int64_t e = first; e < last; ++e) {
        const int64_t *ea = edges + 2 * e;
        const double *p0 = x + 3 * ea[0], *p1 = x + 3 * ea[1];
        double be = bound[ea[0]] > bound[ea[1]] ? bound[ea[0]] : bound[ea[1]];
        double reach = r + be + bmax, lo[3], hi[3];
        for (int ax = 0; ax < 3; ++ax) {
            lo[ax] = (p0[ax] < p1[ax] ? p0[ax] : p1[ax]) - reach;
            hi[ax] = (p0[ax] > p1[ax] ? p0[ax] : p1[ax]) + reach;
        }
        GridWalk walk;
        walk_start(&walk, lo, hi, cell, table, e_off, e_entries, stamp, e);
        for (int64_t j = skip_ee_off[e]; j < skip_ee_off[e + 1]; ++j) stamp[skip_ee[j]] = e;
        int64_t o;
        while (walk_next(&walk, &o)) {
            if (o <= e) continue;
            const int64_t *eb = edges + 2 * o;
            if (eb[0] == ea[0] || eb[0] == ea[1] || eb[1] == ea[0] || eb[1] == ea[1]) continue;
            if (box_gap2(e_lo + 3 * e, e_hi + 3 * e, e_lo + 3 * o, e_hi + 3 * o) > reach * reach) continue;
            double s, t;
            double d = sqrt(closest_segments(p0, p1, x + 3 * eb[0], x + 3 * eb[1], &s, &t));
            double bo = bound[eb[0]] > bound[eb[1]] ? bound[eb[0]] : bound[eb[1]];
            if (!(d <= r + be + bo)) continue;
            emit(e, o, d, cap, pairs, dist, &count);
        }
    }
    counts[1] = count - counts[0];
    return count;
}
