/* Crossings: the pairs of a mesh's triangles that share no vertex and intersect, found
 * through the hashed grid over the triangles' boxes. */
#include "geometry.h"
#include "grid.h"
#include "sinew_kernels.h"

/* The sign of a volume, 0 when its magnitude is at most tol. */
static inline int volume_sign(double v, double tol) {
    return fabs(v) > tol ? (v > 0.0 ? 1 : -1) : 0;
}

/* Whether an edge of triangle (u0, u1, u2) passes through triangle (a, b, c): its ends p, q
 * strictly on opposite sides of the plane of (a, b, c) (su, the signs of u0, u1, u2 against
 * it) and pq turning the same way, not zero, around the three sides ab, bc, ca. */
static int edge_through(const double *const u[3], const int su[3], const double *a, const double *b,
                        const double *c, double tol) {
    for (int e = 0; e < 3; ++e) {
        int f = (e + 1) % 3;
        if (su[e] * su[f] >= 0) continue;
        const double *p = u[e], *q = u[f];
        int s1 = volume_sign(orient3(p, q, a, b), tol);
        if (s1 == 0) continue;
        if (volume_sign(orient3(p, q, b, c), tol) != s1) continue;
        if (volume_sign(orient3(p, q, c, a), tol) != s1) continue;
        return 1;
    }
    return 0;
}

/* Whether triangles (a0, a1, a2) and (b0, b1, b2) intersect: an edge of one passes through
 * the other, a volume of magnitude at most 1e-12 size^3 counting as zero (size: the largest
 * extent of the six corners along an axis). Coplanar overlaps and mere touching are not
 * intersections. */
static int triangles_cross(const double *a0, const double *a1, const double *a2, const double *b0,
                           const double *b1, const double *b2) {
    const double *A[3] = {a0, a1, a2}, *B[3] = {b0, b1, b2};
    double size = 0.0;
    for (int k = 0; k < 3; ++k) {
        double lo = a0[k], hi = a0[k];
        for (int m = 0; m < 3; ++m) {
            double u = A[m][k], v = B[m][k];
            lo = u < lo ? u : lo; lo = v < lo ? v : lo;
            hi = u > hi ? u : hi; hi = v > hi ? v : hi;
        }
        size = hi - lo > size ? hi - lo : size;
    }
    double tol = 1e-12 * (size * size * size);
    int sb[3], sa[3];
    for (int m = 0; m < 3; ++m) sb[m] = volume_sign(orient3(a0, a1, a2, B[m]), tol);
    /* B strictly on one side of A's plane: no edge of B passes through A, and an edge of A
     * through B would meet B at a point of A's plane */
    if (sb[0] == sb[1] && sb[1] == sb[2] && sb[0] != 0) return 0;
    if (edge_through(B, sb, a0, a1, a2, tol)) return 1;
    for (int m = 0; m < 3; ++m) sa[m] = volume_sign(orient3(b0, b1, b2, A[m]), tol);
    return edge_through(A, sa, b0, b1, b2, tol);
}

/* Whether the closed boxes [alo, ahi] and [blo, bhi] meet. */
static inline int boxes_meet(const double *alo, const double *ahi, const double *blo, const double *bhi) {
    return alo[0] <= bhi[0] && blo[0] <= ahi[0] && alo[1] <= bhi[1] && blo[1] <= ahi[1] &&
           alo[2] <= bhi[2] && blo[2] <= ahi[2];
}

/* Tests the pair (i, j) and appends it when its triangles share no vertex and cross;
 * counts it either way. */
static inline void test_pair(int64_t i, int64_t j, const double *x, const int64_t *tris, const double *lo,
                             const double *hi, int64_t cap, int64_t *pairs, int64_t *count) {
    if (!boxes_meet(lo + 3 * i, hi + 3 * i, lo + 3 * j, hi + 3 * j)) return;
    const int64_t *s = tris + 3 * i, *t = tris + 3 * j;
    for (int a = 0; a < 3; ++a)
        if (s[a] == t[0] || s[a] == t[1] || s[a] == t[2]) return;
    if (!triangles_cross(x + 3 * s[0], x + 3 * s[1], x + 3 * s[2], x + 3 * t[0], x + 3 * t[1], x + 3 * t[2]))
        return;
    if (*count < cap) {
        pairs[2 * *count] = i;
        pairs[2 * *count + 1] = j;
    }
    ++*count;
}

/* The pairs (i, j), i < j, of triangles tris (nt,3) of the mesh at x (n,3) that share no
 * vertex and intersect (triangles_cross). The triangles' boxes lo, hi (nt,3) are gridded
 * (cell, table; offsets (table+1) and entries as sinew_grid_build writes them) but for the
 * big ones (nbig,), which are met against every triangle. stamp (nt,) is scratch. Writes
 * the pairs in no particular order into pairs (cap,2) and returns their number, which may
 * exceed cap (then call again with more room), or SINEW_E_ARGUMENT. */
int64_t sinew_crossing_pairs(int64_t n, const double *x, int64_t nt, const int64_t *tris, double cell,
                             int64_t table, const int64_t *offsets, const int64_t *entries, int64_t nbig,
                             const int64_t *big, const double *lo, const double *hi, int64_t *stamp,
                             int64_t cap, int64_t *pairs) {
    if (n < 0 || nt < 0 || nbig < 0 || !(cell > 0.0) || table < 1 || cap < 0) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < 3 * nt; ++j)
        if (tris[j] < 0 || tris[j] >= n) return SINEW_E_ARGUMENT;
    if (offsets[0] != 0) return SINEW_E_ARGUMENT;
    for (int64_t b = 0; b < table; ++b)
        if (offsets[b + 1] < offsets[b]) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < offsets[table]; ++j)
        if (entries[j] < 0 || entries[j] >= nt) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < nbig; ++j)
        if (big[j] < 0 || big[j] >= nt) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < nt; ++j) stamp[j] = -1;
    int64_t count = 0;
    for (int64_t i = 0; i < nt; ++i) {
        GridWalk walk;
        walk_start(&walk, lo + 3 * i, hi + 3 * i, cell, table, offsets, entries, stamp, i);
        int64_t j;
        while (walk_next(&walk, &j))
            if (j > i) test_pair(i, j, x, tris, lo, hi, cap, pairs, &count);
        for (int64_t k = 0; k < nbig; ++k)
            if (big[k] > i) test_pair(i, big[k], x, tris, lo, hi, cap, pairs, &count);
    }
    return count;
}
