/* Self-contact of the cloth inside the VBD solve (internal header): the geometry of a listed
 * pair with one vertex moved, its barrier terms, and the continuous test of one vertex's
 * move against the pairs it belongs to.
 *
 * Self detection (sinew_self_query, selfcontact.c) lists the pairs that may come within the
 * contact radius r before any of their vertices leaves its ball (self_anchor, self_bound):
 * vertex-face pairs (p; a, b, c) and edge-edge pairs (a, b; c, d) of features that share no
 * vertex. A pair's separation is sum_k w_k x_k with weights w (1, -bary) for a vertex-face
 * pair and (1 - s, s, -(1 - t), -t) for an edge-edge pair at its closest points; its
 * distance d the separation's length, n its direction. The barrier is the colliders' one,
 * E = k r (r ln(r/d) - (r - d)) for d < r: vertex k of the pair feels the force lam w_k n
 * (lam = k r (r - d)/d) and the Gauss-Newton stiffness w_k^2 E'' n n^T, once per constraint
 * between two features (self_key).
 *
 * In Gauss-Seidel one vertex moves at a time, the others held: a move of vertex i from a to
 * b is a straight path of i alone. Against a pair it belongs to, the signed volume of the
 * pair's four points is affine in i's position along the path, so the time the four become
 * coplanar is one division, and the pair crosses only if its features touch at that time
 * (Chen et al. 2025 bound each vertex's move instead: Offset Geometric Contact). Pairs not
 * listed cannot meet while every vertex stays within its ball. */
#ifndef SINEW_SELFCONTACT_H
#define SINEW_SELFCONTACT_H

#include "geometry.h"
#include "sinew_kernels.h"

/* A listed pair's four vertices and their geometry. */
typedef struct SelfPair {
    int64_t v[4];  /* the vertices: VF (p, a, b, c), EE (a, b, c, d) */
    double w[4];   /* weights of the separation */
    double n[3];   /* its direction (from the second feature to the first) */
    double d;      /* its length */
} SelfPair;

/* The pair's vertices (no geometry); 1 for a vertex-face pair. */
static inline int self_vertices(const SinewVbdProblem *pb, int64_t pair, int64_t *v) {
    const int64_t *pr = pb->pair + 2 * pair;
    if (pair < pb->self_vf) {
        const int64_t *f = pb->faces + 3 * pr[1];
        v[0] = pr[0]; v[1] = f[0]; v[2] = f[1]; v[3] = f[2];
        return 1;
    }
    const int64_t *e1 = pb->edges + 2 * pr[0], *e2 = pb->edges + 2 * pr[1];
    v[0] = e1[0]; v[1] = e1[1]; v[2] = e2[0]; v[3] = e2[1];
    return 0;
}

/* The pair's geometry at x, with vertex i at p instead (i may be -1: none). */
static inline void self_geometry(const SinewVbdProblem *pb, int64_t pair, const double *x,
                                 int64_t i, const double *p, SelfPair *g) {
    int vf = self_vertices(pb, pair, g->v);
    const double *P[4];
    for (int k = 0; k < 4; ++k) P[k] = g->v[k] == i ? p : x + 3 * g->v[k];
    double sep[3];
    if (vf) {
        double q[3], bary[3];
        closest_on_triangle(P[0], P[1], P[2], P[3], q, bary);
        sub3(P[0], q, sep);
        g->w[0] = 1.0; g->w[1] = -bary[0]; g->w[2] = -bary[1]; g->w[3] = -bary[2];
    } else {
        double s, t;
        closest_segments(P[0], P[1], P[2], P[3], &s, &t);
        g->w[0] = 1.0 - s; g->w[1] = s; g->w[2] = -(1.0 - t); g->w[3] = -t;
        for (int a = 0; a < 3; ++a)
            sep[a] = g->w[0] * P[0][a] + g->w[1] * P[1][a] + g->w[2] * P[2][a] + g->w[3] * P[3][a];
    }
    double d = sqrt(dot3(sep, sep));
    g->d = d;
    if (d > 0.0) { g->n[0] = sep[0] / d; g->n[1] = sep[1] / d; g->n[2] = sep[2] / d; }
    else { g->n[0] = g->n[1] = g->n[2] = 0.0; }
}

/* How much nearer the pair's two features may be than at detection: each feature's points
 * have moved at most as far as its farthest-moved vertex (self_moved; vertex i by mi
 * instead), so the pair's distance is at least pair_dist less the two features' moves. */
static inline double self_pair_slack(const SinewVbdProblem *pb, int64_t pair, int64_t i, double mi) {
    int64_t v[4];
    int split = self_vertices(pb, pair, v) ? 1 : 2; /* VF: (p | a, b, c), EE: (a, b | c, d) */
    double first = 0.0, second = 0.0;
    for (int k = 0; k < 4; ++k) {
        double m = v[k] == i ? mi : pb->self_moved[v[k]];
        if (k < split) { if (m > first) first = m; }
        else if (m > second) second = m;
    }
    return first + second;
}

/* How far p is from vertex i's self anchor. */
static inline double self_move_of(const SinewVbdProblem *pb, int64_t i, const double *p) {
    double d[3];
    sub3(p, pb->self_anchor + 3 * i, d);
    return sqrt(dot3(d, d));
}

/* The weight of vertex i in the pair (0 when it is not one of its vertices). */
static inline double self_weight(const SelfPair *g, int64_t i) {
    double w = 0.0;
    for (int k = 0; k < 4; ++k)
        if (g->v[k] == i) w += g->w[k];
    return w;
}

/* The closest features of a pair in force, as a constraint between two sets of vertices
 * (those of nonzero weight: a point, an edge's two ends or a face's three corners), ordered
 * so that the same two features give the same key from any pair: a point above the edge two
 * faces share is one point-edge constraint, whether its pairs with either face or an
 * edge-edge pair of one of its edges found it. */
typedef struct SelfKey {
    int64_t v[5];
    int na, nb;
} SelfKey;

static inline void self_key(const SelfPair *g, int vf, SelfKey *key) {
    int64_t a[3], b[3];
    int na = 0, nb = 0, split = vf ? 1 : 2;
    for (int k = 0; k < 4; ++k) {
        if (g->w[k] == 0.0) continue;
        if (k < split) a[na++] = g->v[k];
        else b[nb++] = g->v[k];
    }
    /* each side ascending, then the smaller side first (ties: the lower first vertex) */
    for (int x = 1; x < na; ++x)
        for (int y = x; y > 0 && a[y] < a[y - 1]; --y) { int64_t t = a[y]; a[y] = a[y - 1]; a[y - 1] = t; }
    for (int x = 1; x < nb; ++x)
        for (int y = x; y > 0 && b[y] < b[y - 1]; --y) { int64_t t = b[y]; b[y] = b[y - 1]; b[y - 1] = t; }
    int swap = na > nb || (na == nb && na > 0 && a[0] > b[0]);
    const int64_t *first = swap ? b : a, *second = swap ? a : b;
    key->na = swap ? nb : na;
    key->nb = swap ? na : nb;
    for (int k = 0; k < key->na; ++k) key->v[k] = first[k];
    for (int k = 0; k < key->nb; ++k) key->v[key->na + k] = second[k];
}

static inline int self_key_equal(const SelfKey *p, const SelfKey *q) {
    if (p->na != q->na || p->nb != q->nb) return 0;
    for (int k = 0; k < p->na + p->nb; ++k)
        if (p->v[k] != q->v[k]) return 0;
    return 1;
}

/* Constraints a vertex's terms keep apart from one another, at most (beyond: counted again). */
#define SELF_KEYS 64

/* Adds vertex i's self-contact terms at x (i at xi) to f and H; returns the pairs in force.
 * Each constraint between two features counts once (self_key), however many listed pairs
 * find it: summed per pair, a point sliding over the cloth met the barrier twice over every
 * edge and more over every vertex (IPC's constraints are its features' pairs, each once).
 * gap receives the smaller of itself and the pairs' least d - r (a lower bound when positive).
 * With cluster (n,), a pair whose vertices are all in i's cluster is left out (a cluster's
 * translation does not change it), and a pair within r of the edge of the radius adds the
 * barrier's stiffness there, k, along n (the clusters' band, as for colliders). */
static inline int self_terms(const SinewVbdProblem *pb, int64_t i, const double *x, const double *xi,
                             double *f, double *H, const int64_t *cluster, double *gap) {
    if (!(pb->self_r > 0.0) || !pb->inc_off) return 0;
    double r = pb->self_r, k = pb->self_k;
    double reach = (cluster ? 2.0 : 1.0) * r, mi = self_move_of(pb, i, xi);
    int active = 0, kept = 0;
    SelfKey keys[SELF_KEYS];
    for (int64_t e = pb->inc_off[i]; e < pb->inc_off[i + 1]; ++e) {
        int64_t pair = pb->inc[e];
        double floor_d = pb->pair_dist[pair] - self_pair_slack(pb, pair, i, mi);
        if (floor_d >= reach) {
            if (floor_d - r < *gap) *gap = floor_d - r;
            continue;
        }
        SelfPair g;
        self_geometry(pb, pair, x, i, xi, &g);
        if (g.d - r < *gap) *gap = g.d - r;
        if (cluster) {
            int apart = 0;
            for (int a = 0; a < 4; ++a) apart |= cluster[g.v[a]] != cluster[i];
            if (!apart) continue;
        }
        double w = self_weight(&g, i);
        if (!(g.d > 0.0) || w == 0.0) continue;
        if (g.d >= r) {
            if (cluster && g.d < 2.0 * r) {
                double s = k * w * w;
                H[0] += s * g.n[0] * g.n[0]; H[1] += s * g.n[1] * g.n[1]; H[2] += s * g.n[2] * g.n[2];
                H[3] += s * g.n[0] * g.n[1]; H[4] += s * g.n[0] * g.n[2]; H[5] += s * g.n[1] * g.n[2];
            }
            continue;
        }
        SelfKey key;
        self_key(&g, pair < pb->self_vf, &key);
        int seen = 0;
        for (int q = 0; q < kept && !seen; ++q) seen = self_key_equal(&keys[q], &key);
        if (seen) continue;
        if (kept < SELF_KEYS) keys[kept++] = key;
        double d = g.d > 0.01 * r ? g.d : 0.01 * r;
        double lam = k * r * (r - g.d) / d;
        double stiff = k * r * r / (d * d) * w * w;
        for (int a = 0; a < 3; ++a) f[a] += lam * w * g.n[a];
        H[0] += stiff * g.n[0] * g.n[0]; H[1] += stiff * g.n[1] * g.n[1]; H[2] += stiff * g.n[2] * g.n[2];
        H[3] += stiff * g.n[0] * g.n[1]; H[4] += stiff * g.n[0] * g.n[2]; H[5] += stiff * g.n[1] * g.n[2];
        ++active;
    }
    return active;
}

/* The smallest d - r over vertex i's pairs at x with i at p (INFINITY: none); without exact,
 * a positive value may be a lower bound (from the pairs' distances at detection and the
 * moves since). */
static inline double self_gap(const SinewVbdProblem *pb, int64_t i, const double *x, const double *p,
                              int exact) {
    double gap = INFINITY;
    if (!(pb->self_r > 0.0) || !pb->inc_off) return gap;
    double mi = self_move_of(pb, i, p);
    for (int64_t e = pb->inc_off[i]; e < pb->inc_off[i + 1]; ++e) {
        if (!exact) {
            double floor_gap = pb->pair_dist[pb->inc[e]] - self_pair_slack(pb, pb->inc[e], i, mi) - pb->self_r;
            if (floor_gap >= 0.0) {
                if (floor_gap < gap) gap = floor_gap;
                continue;
            }
        }
        SelfPair g;
        self_geometry(pb, pb->inc[e], x, i, p, &g);
        if (g.d - pb->self_r < gap) gap = g.d - pb->self_r;
    }
    return gap;
}

/* m: features closer than this when their four points are coplanar touch (a crossing). */
#define SELF_TOUCH 1e-9

/* The first fraction of vertex i's straight move a -> b (others at x) at which one of its
 * pairs crosses, or -1. */
static inline double self_crossing(const SinewVbdProblem *pb, int64_t i, const double *x,
                                   const double *a, const double *b) {
    double first = -1.0;
    /* the farthest i gets from its anchor on the way (the norm is convex) */
    double ma = self_move_of(pb, i, a), mb = self_move_of(pb, i, b), mi = ma > mb ? ma : mb;
    for (int64_t e = pb->inc_off[i]; e < pb->inc_off[i + 1]; ++e) {
        int64_t pair = pb->inc[e], v[4];
        if (pb->pair_dist[pair] - self_pair_slack(pb, pair, i, mi) > 0.0) continue;
        int vf = self_vertices(pb, pair, v);
        const double *P0[4], *P1[4];
        for (int k = 0; k < 4; ++k) {
            P0[k] = v[k] == i ? a : x + 3 * v[k];
            P1[k] = v[k] == i ? b : x + 3 * v[k];
        }
        double t;
        if (vf && v[0] == i) {
            t = segment_triangle(a, b, P0[1], P0[2], P0[3]);
        } else {
            /* the signed volume is affine along the path: coplanar once, at most */
            double V0 = orient3(P0[1], P0[2], P0[3], P0[0]), V1 = orient3(P1[1], P1[2], P1[3], P1[0]);
            /* (a move ending exactly coplanar counts as reaching the plane) */
            if (V0 == 0.0 || (V1 != 0.0 && (V0 > 0.0) == (V1 > 0.0))) continue;
            t = V0 / (V0 - V1);
            double m[3] = {a[0] + t * (b[0] - a[0]), a[1] + t * (b[1] - a[1]), a[2] + t * (b[2] - a[2])};
            const double *Q[4];
            for (int k = 0; k < 4; ++k) Q[k] = v[k] == i ? m : x + 3 * v[k];
            double d2;
            if (vf) {
                double q[3], bary[3], diff[3];
                closest_on_triangle(Q[0], Q[1], Q[2], Q[3], q, bary);
                sub3(Q[0], q, diff);
                d2 = dot3(diff, diff);
            } else {
                double s, u;
                d2 = closest_segments(Q[0], Q[1], Q[2], Q[3], &s, &u);
            }
            if (d2 > SELF_TOUCH * SELF_TOUCH) continue;
        }
        if (t >= 0.0 && (first < 0.0 || t < first)) first = t;
    }
    return first;
}

#endif
