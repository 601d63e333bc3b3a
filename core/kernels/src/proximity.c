/* Proximity: closest points on triangles, element boxes and a hashed uniform grid over them
 * (the broad phase) and the per-vertex collider query (the narrow phase) that fills the
 * contact slots and each vertex's distance to its nearest collider surface. */
#include "geometry.h"
#include "grid.h"
#include "sinew_kernels.h"

/* Closest points q (n,3) and barycentric coordinates bary (n,3) of points p on triangles
 * (a, b, c), all (n,3). */
int sinew_closest_points(int64_t n, const double *p, const double *a, const double *b,
                         const double *c, double *q, double *bary) {
    for (int64_t i = 0; i < n; ++i)
        closest_on_triangle(p + 3 * i, a + 3 * i, b + 3 * i, c + 3 * i, q + 3 * i, bary + 3 * i);
    return SINEW_OK;
}

/* The box l, u (3) of element j's k corners (elems (m,k) into x0 (nv,3)), and at x1 too
 * when it is not NULL (its sweep from x0 to x1). */
static inline void element_box(int64_t j, int64_t k, const int64_t *elems, const double *x0,
                               const double *x1, double *l, double *u) {
    const double *p = x0 + 3 * elems[k * j];
    for (int a = 0; a < 3; ++a) l[a] = u[a] = p[a];
    for (int64_t c = 1; c < (x1 ? 2 * k : k); ++c) {
        p = (c < k ? x0 : x1) + 3 * elems[k * j + c % k];
        for (int a = 0; a < 3; ++a) {
            if (p[a] < l[a]) l[a] = p[a];
            if (p[a] > u[a]) u[a] = p[a];
        }
    }
}

/* The boxes lo, hi (m,3) of m elements of k vertices each (elems (m,k) into x (nv,3)): a
 * triangle's (k 3) or an edge's (k 2); with x1 (nv,3), not NULL, the boxes of their sweeps
 * from x to x1. */
int sinew_element_boxes(int64_t m, int64_t k, const int64_t *elems, int64_t nv, const double *x,
                        const double *x1, double *lo, double *hi) {
    if (k < 1) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < m * k; ++j)
        if (elems[j] < 0 || elems[j] >= nv) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < m; ++j) element_box(j, k, elems, x, x1, lo + 3 * j, hi + 3 * j);
    return SINEW_OK;
}

/* Which of m elements of k vertices each (elems (m,k) into x0 and x1 (nv,3), the vertices at
 * the start and the end of a step) reach the box [lo, hi] at some time of the step: keep (m,)
 * receives 1 where the box of the element's corners at both times, grown by grow, meets it,
 * else 0 (the moving mesh's triangles cut to a step's region). Returns how many are kept. */
int64_t sinew_swept_elements_meet(int64_t m, int64_t k, const int64_t *elems, int64_t nv, const double *x0,
                                  const double *x1, double grow, const double *lo, const double *hi,
                                  uint8_t *keep) {
    if (k < 1 || !(grow >= 0.0)) return SINEW_E_ARGUMENT;
    for (int64_t j = 0; j < m * k; ++j)
        if (elems[j] < 0 || elems[j] >= nv) return SINEW_E_ARGUMENT;
    int64_t kept = 0;
    for (int64_t j = 0; j < m; ++j) {
        double l[3], u[3];
        element_box(j, k, elems, x0, x1, l, u);
        int meets = 1;
        for (int a = 0; a < 3; ++a) meets &= (l[a] - grow <= hi[a]) & (u[a] + grow >= lo[a]);
        keep[j] = (uint8_t)meets;
        kept += meets;
    }
    return kept;
}

/* The cells box j spans along each axis, as a product (at most big_cells + 1: counted no
 * further). */
static int64_t box_cells(const double *l, const double *u, double cell, int64_t big_cells) {
    int64_t cells = 1;
    for (int a = 0; a < 3; ++a) {
        double span = floor(u[a] / cell) - floor(l[a] / cell) + 1.0;
        if (!(span <= (double)(big_cells + 1))) return big_cells + 1;
        cells *= (int64_t)span;
        if (cells > big_cells) return big_cells + 1;
    }
    return cells;
}

/* A hashed uniform grid over m boxes lo, hi (m,3), cells of cell m, table buckets: offsets
 * (table+1) receives where each bucket's entries start in entries (cap,), the box ids. A box
 * over more than big_cells cells (big_cells < 0: none) is not filed but listed in big (m,),
 * their number in nbig[0]. Returns the number of entries, which may exceed cap (then entries
 * is left unwritten: call again with more room), or SINEW_E_ARGUMENT. */
int64_t sinew_grid_build(int64_t m, const double *lo, const double *hi, double cell, int64_t table,
                         int64_t big_cells, int64_t *offsets, int64_t cap, int64_t *entries,
                         int64_t *big, int64_t *nbig) {
    if (!(cell > 0.0) || table < 1) return SINEW_E_ARGUMENT;
    for (int64_t b = 0; b <= table; ++b) offsets[b] = 0;
    int64_t total = 0, nb = 0;
    for (int64_t j = 0; j < m; ++j) {
        const double *l = lo + 3 * j, *u = hi + 3 * j;
        if (big_cells >= 0 && box_cells(l, u, cell, big_cells) > big_cells) {
            big[nb++] = j;
            continue;
        }
        for (int64_t ix = cell_of(l[0], cell); ix <= cell_of(u[0], cell); ++ix)
            for (int64_t iy = cell_of(l[1], cell); iy <= cell_of(u[1], cell); ++iy)
                for (int64_t iz = cell_of(l[2], cell); iz <= cell_of(u[2], cell); ++iz) {
                    offsets[cell_hash(ix, iy, iz, table) + 1] += 1;
                    ++total;
                }
    }
    *nbig = nb;
    for (int64_t b = 0; b < table; ++b) offsets[b + 1] += offsets[b];
    if (total > cap) return total;
    /* fill from the last box back, each bucket's cursor starting at its end (offsets[b + 1])
     * and moving down to its start: a bucket lists its boxes in ascending order, and
     * offsets[b + 1] ends as bucket b's start, shifted back into place after */
    for (int64_t j = m - 1, k = nb - 1; j >= 0; --j) {
        if (k >= 0 && big[k] == j) { --k; continue; }
        const double *l = lo + 3 * j, *u = hi + 3 * j;
        for (int64_t ix = cell_of(u[0], cell); ix >= cell_of(l[0], cell); --ix)
            for (int64_t iy = cell_of(u[1], cell); iy >= cell_of(l[1], cell); --iy)
                for (int64_t iz = cell_of(u[2], cell); iz >= cell_of(l[2], cell); --iz)
                    entries[--offsets[cell_hash(ix, iy, iz, table) + 1]] = j;
    }
    for (int64_t b = 0; b < table; ++b) offsets[b] = offsets[b + 1];
    offsets[table] = total;
    return total;
}

/* Offers triangle t at distance d to vertex slot list (k nearest, ascending). */
static inline void offer(int64_t t, double d, int64_t k, int64_t *ids, double *dist, int64_t *count) {
    int64_t c = *count;
    for (int64_t j = 0; j < c; ++j)
        if (ids[j] == t) return;
    if (c == k && d >= dist[k - 1]) return;
    int64_t j = c < k ? c : k - 1;
    while (j > 0 && dist[j - 1] > d) {
        ids[j] = ids[j - 1];
        dist[j] = dist[j - 1];
        --j;
    }
    ids[j] = t;
    dist[j] = d;
    if (c < k) *count = c + 1;
}

/* Most cells per axis a query box scans before it tests every gridded triangle instead. */
#define QUERY_SPAN 24

/* What a scan of the collider triangles near p found (scan_triangles). */
typedef struct {
    int64_t count;  /* slots filled */
    double dmin;    /* the nearest surface within the radius, the primitives' included (the
                     * radius when none) */
    double nearest; /* the nearest triangle met, within the radius or not (INFINITY: none) */
    int inside;     /* p is behind the face of that triangle (of a closed mesh) */
} Scan;

/* Scans the triangles listed in the grid's cells over the box p +- r (every gridded
 * triangle when that box spans more than QUERY_SPAN cells on an axis) and the big ones:
 * those within r go to the k slots ids/dist (none when ids is NULL), and s tracks the
 * nearest met. Every triangle within r of p is met, so a nearest closer than r is the
 * nearest of all; one farther may not be. -1 on a bad triangle index. */
static int scan_triangles(const double *p, double r, const double *cv, int64_t nt, const int64_t *tris,
                          const uint8_t *closed_tri, double cell, int64_t table, const int64_t *offsets,
                          const int64_t *entries, int64_t nbig, const int64_t *big, const double *box_lo,
                          const double *box_hi, int64_t k, int64_t *ids, double *dist, Scan *s) {
    int64_t lo[3], hi[3], span = 1;
    for (int a = 0; a < 3; ++a) {
        lo[a] = cell_of(p[a] - r, cell);
        hi[a] = cell_of(p[a] + r, cell);
        span *= (hi[a] - lo[a] + 1 <= QUERY_SPAN) ? 1 : 0;
    }
    int64_t passes = span ? (hi[0] - lo[0] + 1) * (hi[1] - lo[1] + 1) * (hi[2] - lo[2] + 1) : 1;
    for (int64_t cidx = 0; cidx < passes + 1; ++cidx) {
        const int64_t *list;
        int64_t len;
        if (cidx == passes) {
            list = big; len = nbig;
        } else if (span) {
            int64_t ny = hi[1] - lo[1] + 1, nz = hi[2] - lo[2] + 1;
            int64_t ix = lo[0] + cidx / (ny * nz), iy = lo[1] + (cidx / nz) % ny, iz = lo[2] + cidx % nz;
            int64_t b = cell_hash(ix, iy, iz, table);
            list = entries + offsets[b];
            len = offsets[b + 1] - offsets[b];
        } else {
            list = entries; len = offsets[table];  /* every gridded triangle (repeats are harmless) */
        }
        for (int64_t e = 0; e < len; ++e) {
            int64_t t = list[e];
            if (t < 0 || t >= nt) return SINEW_E_ARGUMENT;
            if (box_lo && box_hi) {
                /* a triangle whose box is farther than the radius and than the nearest
                 * surface met so far (with a margin for round-off) can change neither:
                 * not tested */
                double box2 = 0.0;
                for (int a = 0; a < 3; ++a) {
                    double g = box_lo[3 * t + a] - p[a], g2 = p[a] - box_hi[3 * t + a];
                    g = g > g2 ? g : g2;
                    if (g > 0.0) box2 += g * g;
                }
                if (box2 > (1.0 + 1e-9) * r * r && box2 > (1.0 + 1e-9) * s->nearest * s->nearest) continue;
            }
            const int64_t *tv = tris + 3 * t;
            double dir[3], sd, bary[3];
            triangle_contact(p, cv + 3 * tv[0], cv + 3 * tv[1], cv + 3 * tv[2], NULL, closed_tri[t],
                             dir, &sd, bary);
            double d = fabs(sd);
            if (d < s->nearest) {
                s->nearest = d;
                s->inside = sd < 0.0;
            }
            if (d < r) {
                if (ids) offer(t, d, k, ids, dist, &s->count);
                if (d < s->dmin) s->dmin = d;
            }
        }
    }
    return SINEW_OK;
}

/* For every vertex i: the k nearest collider triangles whose surface is within radius[i]
 * of x[i] (out_id (n,k), out_dist (n,k) unsigned distances, out_count (n,)), and out_dmin[i],
 * the distance from x[i] to the nearest collider surface found within radius[i] (triangles
 * and primitives; radius[i] when there is none), or minus its depth when x[i] is inside a
 * closed collider (behind the face of its nearest triangle, or inside a primitive).
 * Triangles are found through the grid (offsets (table+1), entries) and the list big
 * (triangles too large to grid, tested for every vertex). box_lo and box_hi (nt,3), may be
 * NULL: the triangles' boxes, which skip the triangles that cannot change the result. */
int sinew_collider_query(
    int64_t n, const double *x, const double *radius,
    int64_t nv, const double *cv, int64_t nt, const int64_t *tris, const uint8_t *closed_tri,
    double cell, int64_t table, const int64_t *offsets, const int64_t *entries,
    int64_t nbig, const int64_t *big, const double *box_lo, const double *box_hi,
    int64_t np, const int32_t *prim_type, const double *prim,
    int64_t k, int64_t *out_id, double *out_dist, int64_t *out_count, double *out_dmin) {
    if (k < 1 || table < 1 || !(cell > 0.0)) return SINEW_E_ARGUMENT;
    for (int64_t t = 0; t < nt; ++t)
        for (int c = 0; c < 3; ++c)
            if (tris[3 * t + c] < 0 || tris[3 * t + c] >= nv) return SINEW_E_ARGUMENT;
    for (int64_t i = 0; i < n; ++i) {
        const double *p = x + 3 * i;
        double r = radius[i];
        int prim_inside = 0;
        double prim_depth = 0.0;
        Scan s = {0, r, INFINITY, 0};
        for (int64_t pr = 0; pr < np; ++pr) {
            double dir[3], sd;
            primitive_contact(p, prim_type[pr], prim + 8 * pr, dir, &sd);
            if (sd < 0.0) {
                prim_inside = 1;
                if (-sd > prim_depth) prim_depth = -sd;
            }
            else if (sd < s.dmin) s.dmin = sd;
        }
        int status = scan_triangles(p, r, cv, nt, tris, closed_tri, cell, table, offsets, entries, nbig, big,
                                    box_lo, box_hi, k, out_id + k * i, out_dist + k * i, &s);
        if (status != SINEW_OK) return status;
        /* Behind the face of the nearest triangle met, which is farther than the radius:
         * nearer ones may not have been met, and behind a triangle that is not the nearest
         * says nothing (a point beside a closed body is behind the faces of its far side).
         * Scanned again at twice the reach, and again, up to that triangle: once the nearest
         * met is within the reach, it is the nearest, and its side is the point's. */
        double reach = r;
        while (s.inside && !(s.nearest < reach)) {
            double far = s.nearest * (1.0 + 1e-9);
            reach = 2.0 * reach < far ? 2.0 * reach : far;
            Scan wider = {0, reach, INFINITY, 0};
            status = scan_triangles(p, reach, cv, nt, tris, closed_tri, cell, table, offsets, entries, nbig, big,
                                    box_lo, box_hi, k, NULL, NULL, &wider);
            if (status != SINEW_OK) return status;
            if (wider.nearest < reach || wider.nearest < s.nearest) {
                s.nearest = wider.nearest;
                s.inside = wider.inside;
            }
        }
        out_count[i] = s.count;
        out_dmin[i] = (prim_inside || s.inside) ? -(prim_inside ? prim_depth : s.nearest) : s.dmin;
    }
    return SINEW_OK;
}
