/* Small vector helpers and the one closest-point-on-triangle routine, shared by the
 * proximity query and the contact energy (internal header, not an entry point). */
#ifndef SINEW_GEOMETRY_H
#define SINEW_GEOMETRY_H

#include <math.h>
#include <stdint.h>

static inline double dot3(const double *a, const double *b) {
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}
static inline void sub3(const double *a, const double *b, double *out) {
    out[0] = a[0] - b[0]; out[1] = a[1] - b[1]; out[2] = a[2] - b[2];
}
static inline void cross3(const double *a, const double *b, double *out) {
    out[0] = a[1] * b[2] - a[2] * b[1];
    out[1] = a[2] * b[0] - a[0] * b[2];
    out[2] = a[0] * b[1] - a[1] * b[0];
}

/* Where on the triangle the closest point lies. */
enum { REGION_FACE = 0, REGION_EDGE = 1, REGION_VERTEX = 2 };

/* The point q of triangle (a, b, c) closest to p, its barycentric coordinates bary
 * (q = bary0 a + bary1 b + bary2 c) and its region. Voronoi regions of the corners, then
 * the edges, then the face (the barycentric tests of Ericson 2005, section 5.1.5); a
 * collapsed triangle falls through to its edges and corners, never divides by zero. */
static inline int closest_on_triangle(const double *p, const double *a, const double *b,
                                      const double *c, double *q, double *bary) {
    double ab[3], ac[3], ap[3], bp[3], cp[3];
    sub3(b, a, ab); sub3(c, a, ac); sub3(p, a, ap);
    double d1 = dot3(ab, ap), d2 = dot3(ac, ap);
    if (d1 <= 0.0 && d2 <= 0.0) {
        bary[0] = 1.0; bary[1] = 0.0; bary[2] = 0.0;
        q[0] = a[0]; q[1] = a[1]; q[2] = a[2];
        return REGION_VERTEX;
    }
    sub3(p, b, bp);
    double d3 = dot3(ab, bp), d4 = dot3(ac, bp);
    if (d3 >= 0.0 && d4 <= d3) {
        bary[0] = 0.0; bary[1] = 1.0; bary[2] = 0.0;
        q[0] = b[0]; q[1] = b[1]; q[2] = b[2];
        return REGION_VERTEX;
    }
    double vc = d1 * d4 - d3 * d2;
    if (vc <= 0.0 && d1 >= 0.0 && d3 <= 0.0 && d1 - d3 > 0.0) {
        double v = d1 / (d1 - d3);
        bary[0] = 1.0 - v; bary[1] = v; bary[2] = 0.0;
        for (int k = 0; k < 3; ++k) q[k] = a[k] + v * ab[k];
        return REGION_EDGE;
    }
    sub3(p, c, cp);
    double d5 = dot3(ab, cp), d6 = dot3(ac, cp);
    if (d6 >= 0.0 && d5 <= d6) {
        bary[0] = 0.0; bary[1] = 0.0; bary[2] = 1.0;
        q[0] = c[0]; q[1] = c[1]; q[2] = c[2];
        return REGION_VERTEX;
    }
    double vb = d5 * d2 - d1 * d6;
    if (vb <= 0.0 && d2 >= 0.0 && d6 <= 0.0 && d2 - d6 > 0.0) {
        double w = d2 / (d2 - d6);
        bary[0] = 1.0 - w; bary[1] = 0.0; bary[2] = w;
        for (int k = 0; k < 3; ++k) q[k] = a[k] + w * ac[k];
        return REGION_EDGE;
    }
    double va = d3 * d6 - d5 * d4;
    if (va <= 0.0 && (d4 - d3) >= 0.0 && (d5 - d6) >= 0.0 && (d4 - d3) + (d5 - d6) > 0.0) {
        double w = (d4 - d3) / ((d4 - d3) + (d5 - d6));
        bary[0] = 0.0; bary[1] = 1.0 - w; bary[2] = w;
        for (int k = 0; k < 3; ++k) q[k] = b[k] + w * (c[k] - b[k]);
        return REGION_EDGE;
    }
    double sum = va + vb + vc; /* |ab x ac|^2, to round-off */
    if (!(sum > 1e-12 * dot3(ab, ab) * dot3(ac, ac)) || !isfinite(sum)) {
        /* collapsed (or flatter than round-off can place a point inside): the nearest of
         * the three edges (each a segment) */
        const double *P[3] = {a, b, c};
        double best = INFINITY;
        q[0] = a[0]; q[1] = a[1]; q[2] = a[2];
        bary[0] = 1.0; bary[1] = 0.0; bary[2] = 0.0;
        for (int e = 0; e < 3; ++e) {
            const double *s0 = P[e], *s1 = P[(e + 1) % 3];
            double d[3], r[3];
            sub3(s1, s0, d); sub3(p, s0, r);
            double dd = dot3(d, d), t = dd > 0.0 ? dot3(r, d) / dd : 0.0;
            t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
            double cand[3] = {s0[0] + t * d[0], s0[1] + t * d[1], s0[2] + t * d[2]};
            double diff[3];
            sub3(p, cand, diff);
            double dist = dot3(diff, diff);
            if (dist < best) {
                best = dist;
                q[0] = cand[0]; q[1] = cand[1]; q[2] = cand[2];
                bary[0] = bary[1] = bary[2] = 0.0;
                bary[e] = 1.0 - t; bary[(e + 1) % 3] = t;
            }
        }
        return REGION_EDGE;
    }
    double v = vb / sum, w = vc / sum;
    bary[0] = 1.0 - v - w; bary[1] = v; bary[2] = w;
    for (int k = 0; k < 3; ++k) q[k] = a[k] + v * ab[k] + w * ac[k];
    return REGION_FACE;
}

/* The unit normal of triangle (a, b, c), zero for a collapsed one. */
static inline void triangle_normal(const double *a, const double *b, const double *c, double *n) {
    double ab[3], ac[3];
    sub3(b, a, ab); sub3(c, a, ac);
    cross3(ab, ac, n);
    double l = sqrt(dot3(n, n));
    if (l > 0.0 && isfinite(l)) { n[0] /= l; n[1] /= l; n[2] /= l; }
    else { n[0] = n[1] = n[2] = 0.0; }
}

/* Signed contact of point p with collider triangle (a, b, c), whose unit normal is normal (NULL:
 * computed here): the outward direction dir and
 * the signed distance (negative only behind the face of a closed mesh, with the nearest
 * point inside the face or on its border straight below p). Returns the region; bary as
 * closest_on_triangle. */
static inline int triangle_contact(const double *p, const double *a, const double *b,
                                   const double *c, const double *normal, int closed, double *dir,
                                   double *sd, double *bary) {
    double q[3], diff[3], n[3];
    int region = closest_on_triangle(p, a, b, c, q, bary);
    sub3(p, q, diff);
    double dist = sqrt(dot3(diff, diff));
    if (normal) { n[0] = normal[0]; n[1] = normal[1]; n[2] = normal[2]; }
    else triangle_normal(a, b, c, n);
    double along = dot3(diff, n);
    /* behind the face: the nearest point inside it, or on its border straight below p (a
     * point behind the shared edge of two coplanar triangles, as a box's face centre) */
    if (closed && along < 0.0 && (region == REGION_FACE || -along >= (1.0 - 1e-12) * dist)) {
        dir[0] = n[0]; dir[1] = n[1]; dir[2] = n[2];
        *sd = -dist;
    } else if (dist > 1e-14) {
        dir[0] = diff[0] / dist; dir[1] = diff[1] / dist; dir[2] = diff[2] / dist;
        *sd = dist;
    } else {
        dir[0] = n[0]; dir[1] = n[1]; dir[2] = n[2];
        *sd = 0.0;
    }
    return region;
}

/* Signed contact with an analytic primitive: type 0 plane (prim = point, normal), 1 sphere
 * (prim = centre, radius). */
static inline void primitive_contact(const double *p, int32_t type, const double *prim,
                                     double *dir, double *sd) {
    if (type == 0) {
        dir[0] = prim[3]; dir[1] = prim[4]; dir[2] = prim[5];
        double r[3];
        sub3(p, prim, r);
        *sd = dot3(r, dir);
    } else {
        double r[3];
        sub3(p, prim, r);
        double l = sqrt(dot3(r, r));
        if (l > 1e-14) { dir[0] = r[0] / l; dir[1] = r[1] / l; dir[2] = r[2] / l; }
        else { dir[0] = 0.0; dir[1] = 0.0; dir[2] = 1.0; }
        *sd = l - prim[3];
    }
}

/* Where along the segment p0 -> p1 it first meets triangle (a, b, c), as a fraction in
 * [0, 1], or -1 when it does not (Moller & Trumbore 1997, both sides; a segment in the
 * triangle's plane or a collapsed triangle never meets it). */
static inline double segment_triangle(const double *p0, const double *p1, const double *a,
                                      const double *b, const double *c) {
    double d[3], e1[3], e2[3], pv[3], tv[3], qv[3];
    sub3(p1, p0, d); sub3(b, a, e1); sub3(c, a, e2);
    cross3(d, e2, pv);
    double det = dot3(e1, pv);
    double scale = sqrt(dot3(d, d) * dot3(e1, e1) * dot3(e2, e2));
    if (!(fabs(det) > 1e-14 * scale)) return -1.0;
    double inv = 1.0 / det;
    sub3(p0, a, tv);
    double u = dot3(tv, pv) * inv;
    if (u < 0.0 || u > 1.0) return -1.0;
    cross3(tv, e1, qv);
    double v = dot3(d, qv) * inv;
    if (v < 0.0 || u + v > 1.0) return -1.0;
    double t = dot3(e2, qv) * inv;
    return (t >= 0.0 && t <= 1.0) ? t : -1.0;
}

/* Where along p0 -> p1 it first enters primitive (type 0 plane: point, normal; 1 sphere:
 * centre, radius) from outside, as a fraction in [0, 1], or -1. */
static inline double segment_primitive(const double *p0, const double *p1, int32_t type,
                                       const double *prim) {
    double r0[3], d[3];
    sub3(p0, prim, r0);
    sub3(p1, p0, d);
    if (type == 0) {
        double s0 = dot3(r0, prim + 3), s1 = s0 + dot3(d, prim + 3);
        if (s0 >= 0.0 && s1 < 0.0) return s0 / (s0 - s1);
        return -1.0;
    }
    double R = prim[3];
    double c = dot3(r0, r0) - R * R;
    if (c < 0.0) return -1.0; /* starts inside: not entering */
    double a = dot3(d, d), b = dot3(r0, d);
    if (!(a > 0.0) || b >= 0.0) return -1.0;
    double disc = b * b - a * c;
    if (disc < 0.0) return -1.0;
    double t = (-b - sqrt(disc)) / a;
    return (t >= 0.0 && t <= 1.0) ? t : -1.0;
}

/* The closest points of segments p0-p1 and q0-q1: parameters s (on p) and t (on q) in [0, 1]
 * (Ericson 2005, section 5.1.9; a collapsed segment is its point). Returns the squared
 * distance. */
static inline double closest_segments(const double *p0, const double *p1, const double *q0,
                                      const double *q1, double *s_out, double *t_out) {
    double d1[3], d2[3], r[3];
    sub3(p1, p0, d1); sub3(q1, q0, d2); sub3(p0, q0, r);
    double a = dot3(d1, d1), e = dot3(d2, d2), f = dot3(d2, r);
    double s, t;
    double tiny = 1e-300;
    if (a <= tiny && e <= tiny) {
        s = t = 0.0;
    } else if (a <= tiny) {
        s = 0.0;
        t = f / e;
        t = t < 0.0 ? 0.0 : (t > 1.0 ? 1.0 : t);
    } else {
        double c = dot3(d1, r);
        if (e <= tiny) {
            t = 0.0;
            s = -c / a;
            s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
        } else {
            double b = dot3(d1, d2), denom = a * e - b * b;
            s = denom > 1e-14 * a * e ? (b * f - c * e) / denom : 0.0;
            s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
            t = (b * s + f) / e;
            if (t < 0.0) {
                t = 0.0;
                s = -c / a;
                s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
            } else if (t > 1.0) {
                t = 1.0;
                s = (b - c) / a;
                s = s < 0.0 ? 0.0 : (s > 1.0 ? 1.0 : s);
            }
        }
    }
    double dp[3];
    for (int k = 0; k < 3; ++k) dp[k] = (p0[k] + s * d1[k]) - (q0[k] + t * d2[k]);
    *s_out = s;
    *t_out = t;
    return dot3(dp, dp);
}

/* Six times the signed volume of tetrahedron (a, b, c, d). */
static inline double orient3(const double *a, const double *b, const double *c, const double *d) {
    double ab[3], ac[3], ad[3], n[3];
    sub3(b, a, ab); sub3(c, a, ac); sub3(d, a, ad);
    cross3(ab, ac, n);
    return dot3(n, ad);
}

#endif
