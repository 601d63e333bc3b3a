/* Vertex Block Descent (Chen, Liu & Yang, SIGGRAPH 2024) for the backward-Euler objective
 * of a mass-spring cloth with contact inside the solve.
 *
 * Each vertex i, in turn (colour by colour), takes one Newton step on its own local energy
 *   1/2 w_i |x_i - y_i|^2                      inertia, gravity, drag, fields, soft pins
 * + sum_s 1/2 k_s (|x_i - x_o| - L_s)^2         springs at i (Hessian projected: the
 *                                               compressive term dropped, seed 004)
 * + sum_s 1/2 k_lim (|x_i - x_o| - l_s)^2_+     the strain limit past l_s = (1 + max_stretch) L_s
 * + sum_s 1/(2h) kd_s (u_s . (dx_i - dx_o))^2  spring damping along the start directions u_s
 * + sum_c kc_i r (r ln(r/d) - (r - d))         contact (a barrier within the collider's thickness r)
 * + friction                                    lagged Coulomb (IPC's smoothed f1, Li et al.
 *                                               2020), relative to the collider's motion
 * + sum_p the same barrier on the cloth's own      self-contact (selfcontact.h)
 *   vertex-face and edge-edge pairs at i
 * holding its neighbours fixed: H dx = f with the 3x3 Hessian H and force f. The step then
 * goes through the displacement guard (guard.h), so no vertex can cross a collider surface
 * or the cloth itself. */
#include <string.h>

#include "anderson.h"
#include "guard.h"
#include "team.h"

/* The precomputed unit normal of collider triangle t, or NULL when the problem has none. */
#define TRI_NORMAL(pb, t) ((pb)->tri_normal ? (pb)->tri_normal + 3 * (t) : NULL)

/* Symmetric 3x3 stored as xx, yy, zz, xy, xz, yz. */
static inline void add_outer(double *H, const double *u, double s) {
    H[0] += s * u[0] * u[0]; H[1] += s * u[1] * u[1]; H[2] += s * u[2] * u[2];
    H[3] += s * u[0] * u[1]; H[4] += s * u[0] * u[2]; H[5] += s * u[1] * u[2];
}
static inline void add_identity(double *H, double s) { H[0] += s; H[1] += s; H[2] += s; }

/* Contact of normal direction dir at signed distance sd against radius r, with Coulomb
 * coefficient mu and the collider's displacement over the step at the contact point (disp,
 * may be NULL). Adds to f and H; the normal force to cf (may be NULL). */
static inline int contact_term(const SinewVbdProblem *pb, int64_t i, const double *xi,
                               const double *dir, double sd, double r, double mu,
                               const double *disp, double band, double *f, double *H, double *cf) {
    if (!(r > 0.0)) return 0;
    if (sd >= r) {
        /* within band beyond the thickness: the barrier's stiffness at its edge, kc, along
         * the normal, no force (see assemble) */
        if (sd < r + band) add_outer(H, dir, pb->kc[i]);
        return 0;
    }
    /* E = kc r (r ln(r/d) - (r - d)) for d < r: the normal force lam = kc r (r - d)/d grows
     * without bound as the surface nears (a barrier, as IPC's), so a vertex pressed into the
     * thickness stays near its outer side; stiffness kc r^2/d^2. Depths below r/100 (a
     * vertex that started inside) count as r/100. */
    double kc = pb->kc[i];
    double d = sd > 0.01 * r ? sd : 0.01 * r;
    double lam = kc * r * (r - sd) / d;
    f[0] += lam * dir[0]; f[1] += lam * dir[1]; f[2] += lam * dir[2];
    add_outer(H, dir, kc * r * r / (d * d));
    if (cf) { cf[0] += lam * dir[0]; cf[1] += lam * dir[1]; cf[2] += lam * dir[2]; }
    if (mu <= 0.0) return 1;
    const double *xp = pb->x_prev + 3 * i;
    double u[3] = {xi[0] - xp[0], xi[1] - xp[1], xi[2] - xp[2]};
    if (disp) { u[0] -= disp[0]; u[1] -= disp[1]; u[2] -= disp[2]; }
    double un = dot3(u, dir);
    double ut[3] = {u[0] - un * dir[0], u[1] - un * dir[1], u[2] - un * dir[2]};
    double y = sqrt(dot3(ut, ut)), eps = pb->eps_u;
    double f1_over_y = y >= eps ? 1.0 / y : (2.0 / eps - y / (eps * eps));
    double s = mu * lam * f1_over_y;
    f[0] -= s * ut[0]; f[1] -= s * ut[1]; f[2] -= s * ut[2];
    add_identity(H, s);
    add_outer(H, dir, -s);
    return 1;
}

/* Entries a spring pass takes at a time: gathered first, then their terms worked out in a
 * loop with no branch and no gather (which the compiler turns into paired SIMD arithmetic:
 * the square roots and divisions, one each per spring, bound the pass), then summed. */
#define SPRING_CHUNK 16

/* Adds the terms of the springs of entries first .. last-1 of sp at vertex i (at xi, xpi at
 * the step's start; the other ends at x) to f and H: per spring of length l along u = d/l
 * (d = x_i - x_o), stiffness k and rest length L, the force -k (l - L) u and the projected
 * Hessian k [u u^T + max(0, 1 - L/l)(I - u u^T)] (the compressive term dropped, seed 004),
 * taken as -c d with c = k (1 - L/l) and (k - t)/l^2 d d^T + t I with t = max(c, 0); the
 * same with k_limit past the strain-limit length; and the damping kd/h (u0 . rel) u0 along
 * the spring's direction at the step's start u0 = d0/|d0| (rel = d - d0: the two ends'
 * relative move over the step), taken as
 * kd/h (d0 . rel) d0/|d0|^2 and kd/h d0 d0^T/|d0|^2 (no square root), u0 the entry's rest
 * direction where the ends met there (the term is the same for either sign). Without
 * pb->elastic only the strain-limit terms. */
static inline void spring_sums(const SinewVbdProblem *pb, const SinewVbdSprings *sp, int64_t first,
                               int64_t last, const double *xi, const double *xpi, const double *x,
                               double *f, double *H) {
    double elastic = pb->elastic ? 1.0 : 0.0, kd_h = elastic / pb->h, kl = pb->k_limit;
    double dx[SPRING_CHUNK], dy[SPRING_CHUNK], dz[SPRING_CHUNK], ex[SPRING_CHUNK], ey[SPRING_CHUNK],
        ez[SPRING_CHUNK], ll0[SPRING_CHUNK], rx[SPRING_CHUNK], ry[SPRING_CHUNK], rz[SPRING_CHUNK],
        c[SPRING_CHUNK], a[SPRING_CHUNK], t[SPRING_CHUNK], s[SPRING_CHUNK], sd[SPRING_CHUNK];
    for (int64_t base = first; base < last; base += SPRING_CHUNK) {
        int m = last - base < SPRING_CHUNK ? (int)(last - base) : SPRING_CHUNK;
        const double *k = sp->k + base, *L = sp->rest + base, *lim = sp->limit + base, *kd = sp->kd + base;
        for (int j = 0; j < m; ++j) {
            int64_t o = sp->other[base + j];
            const double *xo = x + 3 * o, *xpo = pb->x_prev + 3 * o;
            dx[j] = xi[0] - xo[0]; dy[j] = xi[1] - xo[1]; dz[j] = xi[2] - xo[2];
            ex[j] = xpi[0] - xpo[0]; ey[j] = xpi[1] - xpo[1]; ez[j] = xpi[2] - xpo[2];
            rx[j] = dx[j] - ex[j]; ry[j] = dy[j] - ey[j]; rz[j] = dz[j] - ez[j];
            ll0[j] = ex[j] * ex[j] + ey[j] * ey[j] + ez[j] * ez[j];
            if (!(ll0[j] > 1e-24)) { /* the ends met at the step's start */
                const double *r = sp->rest_dir + 3 * (base + j);
                ex[j] = r[0]; ey[j] = r[1]; ez[j] = r[2];
                ll0[j] = 1.0;
            }
        }
        for (int j = 0; j < m; ++j) {
            double ll = dx[j] * dx[j] + dy[j] * dy[j] + dz[j] * dz[j];
            double l = sqrt(ll);
            int on = l > 1e-300;
            double inv = 1.0 / (on ? l : 1.0);
            double kj = elastic * k[j];
            double cj = on ? kj * (1.0 - L[j] * inv) : 0.0;
            double tj = l > L[j] ? cj : 0.0;
            double aj = on ? (kj - tj) * inv * inv : 0.0;
            int past = on && lim[j] > 0.0 && l > lim[j];
            double c2 = past ? kl * (1.0 - lim[j] * inv) : 0.0;
            c[j] = cj + c2;
            t[j] = tj + c2;
            a[j] = aj + (past ? (kl - c2) * inv * inv : 0.0);
            s[j] = kd_h * kd[j] / ll0[j];
            sd[j] = s[j] * (rx[j] * ex[j] + ry[j] * ey[j] + rz[j] * ez[j]);
        }
        for (int j = 0; j < m; ++j) {
            f[0] -= c[j] * dx[j] + sd[j] * ex[j];
            f[1] -= c[j] * dy[j] + sd[j] * ey[j];
            f[2] -= c[j] * dz[j] + sd[j] * ez[j];
            H[0] += a[j] * dx[j] * dx[j] + s[j] * ex[j] * ex[j] + t[j];
            H[1] += a[j] * dy[j] * dy[j] + s[j] * ey[j] * ey[j] + t[j];
            H[2] += a[j] * dz[j] * dz[j] + s[j] * ez[j] * ez[j] + t[j];
            H[3] += a[j] * dx[j] * dy[j] + s[j] * ex[j] * ey[j];
            H[4] += a[j] * dx[j] * dz[j] + s[j] * ex[j] * ez[j];
            H[5] += a[j] * dy[j] * dz[j] + s[j] * ey[j] * ez[j];
        }
    }
}

/* A lower bound of slot j's (sd - r) for vertex i at p, from the slot's distance at detection
 * and how far i has moved from its anchor since (moved, computed on first use; negative until
 * then), or -1 when there is none to give (no slot distances, or i was inside a collider at
 * detection: its signed distance is not bounded by the unsigned one). A vertex outside at
 * detection cannot get behind a face without crossing it, which the guard forbids, so its
 * signed distance to a slot is the unsigned one, at least the detected one less the move. */
static inline double slot_floor(const SinewVbdProblem *pb, int64_t i, int64_t j, const double *p,
                                double r, double *moved) {
    if (!pb->c_dist || !isfinite(pb->bound[i])) return -1.0;
    if (*moved < 0.0) {
        double d[3];
        sub3(p, pb->anchor + 3 * i, d);
        *moved = sqrt(dot3(d, d));
    }
    return pb->c_dist[pb->kslots * i + j] - *moved - r;
}

/* The local force f and Hessian H of vertex i at positions x; the collider normal force
 * summed into cf (may be NULL). Returns the number of contacts in force. Slots out of reach
 * for sure are skipped (slot_floor). The springs are the row of i in sp: every spring at i
 * (pb->springs), or with cluster (n,) the springs leaving i's cluster, for what i feels when
 * its whole cluster translates (inertia, pins, contact, friction, the springs leaving the
 * cluster). gap (may be NULL) receives thickness_gap's value at x[i], computed on the way. */
static int assemble(const SinewVbdProblem *pb, const SinewVbdSprings *sp, int64_t i, const double *x,
                    double *f_out, double *H_out, double *cf, const int64_t *cluster, double *gap) {
    /* (summed in locals and written out at the end: through the pointers, which may alias
     * the problem's arrays for all the compiler knows, every term was a store and a reload) */
    double f[3], H[6];
    const double *xi = x + 3 * i, *yi = pb->y + 3 * i, *xpi = pb->x_prev + 3 * i;
    double w = pb->w[i];
    f[0] = -w * (xi[0] - yi[0]); f[1] = -w * (xi[1] - yi[1]); f[2] = -w * (xi[2] - yi[2]);
    H[0] = H[1] = H[2] = w;
    H[3] = H[4] = H[5] = 0.0;
    int64_t row = sp->row[i];
    spring_sums(pb, sp, sp->off[row], sp->off[row + 1], xi, xpi, x, f, H);
    /* A cluster's translation moves every vertex of it by the same step, which may carry a
     * vertex just outside a thickness deep into it (no contact term in the sums stops it:
     * the sweep's cut at the edge is per vertex), and the next sweep out again: a
     * period-two cycle of a resting cloth. For the cluster sums, a contact within a
     * thickness beyond the edge adds the barrier's stiffness there along its normal. */
    int active = 0;
    double least = INFINITY, moved = -1.0;
    int64_t nc = pb->c_count ? pb->c_count[i] : 0;
    /* The slots within reach of a force, then their contacts: one per feature of the
     * surface. A slot whose nearest point is on a border (an edge or a corner of its
     * triangle) counts only when no other slot is as near with its nearest point inside its
     * face, and once per point: the neighbour of a face the vertex stands over (its shared
     * edge, nearer than its thickness when the vertex is pressed in) would push the vertex
     * along the surface, away from the edge, and a rim or corner shared by several slots
     * would push as many times. */
    int64_t near_t[SINEW_MAX_SLOTS];
    double near_sd[SINEW_MAX_SLOTS], near_dir[SINEW_MAX_SLOTS][3], near_q[SINEW_MAX_SLOTS][3],
        near_bary[SINEW_MAX_SLOTS][3];
    int near_region[SINEW_MAX_SLOTS], k = 0;
    double face_sd = INFINITY;
    for (int64_t j = 0; j < nc && k < SINEW_MAX_SLOTS; ++j) {
        int64_t t = pb->c_id[pb->kslots * i + j];
        double band = cluster ? pb->tri_radius[t] : 0.0;
        double floor_gap = slot_floor(pb, i, j, xi, pb->tri_radius[t], &moved);
        if (floor_gap >= band) { /* out of this triangle's thickness (and band) for sure */
            if (floor_gap < least) least = floor_gap;
            continue;
        }
        const int64_t *tv = pb->tris + 3 * t;
        double sd;
        int region = triangle_contact(xi, pb->cv + 3 * tv[0], pb->cv + 3 * tv[1], pb->cv + 3 * tv[2],
                                      TRI_NORMAL(pb, t), pb->closed_tri[t], near_dir[k], &sd, near_bary[k]);
        if (sd - pb->tri_radius[t] < least) least = sd - pb->tri_radius[t];
        if (sd - pb->tri_radius[t] >= band) continue;
        for (int a = 0; a < 3; ++a)
            near_q[k][a] = near_bary[k][0] * pb->cv[3 * tv[0] + a] + near_bary[k][1] * pb->cv[3 * tv[1] + a]
                           + near_bary[k][2] * pb->cv[3 * tv[2] + a];
        if (region == REGION_FACE && sd < face_sd) face_sd = sd;
        near_t[k] = t; near_sd[k] = sd; near_region[k] = region;
        ++k;
    }
    for (int a = 0; a < k; ++a) {
        if (near_region[a] != REGION_FACE) {
            if (face_sd <= near_sd[a]) continue;
            int seen = 0;
            for (int b = 0; b < a && !seen; ++b) {
                double d[3];
                sub3(near_q[a], near_q[b], d);
                seen = near_region[b] != REGION_FACE && dot3(d, d) <= 1e-18;
            }
            if (seen) continue;
        }
        int64_t t = near_t[a];
        const int64_t *tv = pb->tris + 3 * t;
        double disp[3] = {0.0, 0.0, 0.0};
        if (pb->cdisp)
            for (int c = 0; c < 3; ++c)
                for (int b = 0; b < 3; ++b) disp[b] += near_bary[a][c] * pb->cdisp[3 * tv[c] + b];
        double band = cluster ? pb->tri_radius[t] : 0.0;
        active += contact_term(pb, i, xi, near_dir[a], near_sd[a], pb->tri_radius[t], pb->tri_mu[t],
                               disp, band, f, H, cf);
    }
    for (int64_t p = 0; p < pb->np; ++p) {
        const double *pr = pb->prim + 8 * p;
        double dir[3], sd;
        primitive_contact(xi, pb->prim_type[p], pr, dir, &sd);
        if (sd - pr[6] < least) least = sd - pr[6];
        active += contact_term(pb, i, xi, dir, sd, pr[6], pr[7], NULL, cluster ? pr[6] : 0.0, f, H, cf);
    }
    active += self_terms(pb, i, x, xi, f, H, cluster, &least);
    if (gap) *gap = least;
    for (int a = 0; a < 3; ++a) f_out[a] = f[a];
    for (int a = 0; a < 6; ++a) H_out[a] = H[a];
    return active;
}

/* Solves the symmetric 3x3 H dx = f by its adjugate; 0 when H is not positive definite
 * enough to trust (dx left zero). */
static inline int solve3(const double *H, const double *f, double *dx) {
    double a = H[0], b = H[1], c = H[2], d = H[3], e = H[4], g = H[5];
    double c00 = b * c - g * g, c01 = e * g - d * c, c02 = d * g - b * e;
    double det = a * c00 + d * c01 + e * c02;
    double scale = a * b * c;
    if (!(det > 1e-12 * scale) || !isfinite(det)) { dx[0] = dx[1] = dx[2] = 0.0; return 0; }
    double c11 = a * c - e * e, c12 = d * e - a * g, c22 = a * b - d * d;
    double inv = 1.0 / det;
    dx[0] = (c00 * f[0] + c01 * f[1] + c02 * f[2]) * inv;
    dx[1] = (c01 * f[0] + c11 * f[1] + c12 * f[2]) * inv;
    dx[2] = (c02 * f[0] + c12 * f[1] + c22 * f[2]) * inv;
    return 1;
}

/* The smallest signed distance of p beyond the thickness of the colliders vertex i is tested
 * against, and of its self-contact pairs beyond their radius, the other vertices at x
 * (negative inside a thickness), m; without exact, a positive value may be a lower
 * bound (slot_floor; its sign, and any negative value, is exact). */
static double thickness_gap(const SinewVbdProblem *pb, int64_t i, const double *x, const double *p,
                            int exact) {
    double gap = self_gap(pb, i, x, p, exact), moved = -1.0;
    int64_t nc = pb->c_count ? pb->c_count[i] : 0;
    for (int64_t j = 0; j < nc; ++j) {
        int64_t t = pb->c_id[pb->kslots * i + j];
        if (!exact) {
            double floor_gap = slot_floor(pb, i, j, p, pb->tri_radius[t], &moved);
            if (floor_gap >= 0.0) {
                if (floor_gap < gap) gap = floor_gap;
                continue;
            }
        }
        const int64_t *tv = pb->tris + 3 * t;
        double dir[3], sd, bary[3];
        triangle_contact(p, pb->cv + 3 * tv[0], pb->cv + 3 * tv[1], pb->cv + 3 * tv[2],
                         TRI_NORMAL(pb, t), pb->closed_tri[t], dir, &sd, bary);
        if (sd - pb->tri_radius[t] < gap) gap = sd - pb->tri_radius[t];
    }
    for (int64_t q = 0; q < pb->np; ++q) {
        double dir[3], sd;
        primitive_contact(p, pb->prim_type[q], pb->prim + 8 * q, dir, &sd);
        if (sd - pb->prim[8 * q + 6] < gap) gap = sd - pb->prim[8 * q + 6];
    }
    return gap;
}

/* One sweep: every vertex of every colour (color_off (ncolors+1) into color_vertices) takes
 * its local Newton step in place on x, through the guard. A step from outside every collider's
 * thickness into one stops where it enters (an active-set step: the contact's stiffness is
 * not in a Hessian taken outside it). A vertex that ends a step inside a collider's
 * thickness takes more Newton steps from there (up to LOCAL_NEWTON in all, until a
 * step is shorter than LOCAL_STEP): the barrier's stiffness changes fast across the
 * thickness, and one step from its edge would stop on the surface, deep in the barrier, or
 * leave the contact's pull on the sliding motion half done.
 * clipped receives the number of vertices the guard's ball bound held back. */
#define LOCAL_NEWTON 4
/* m: a local step shorter than this ends the local Newton iterations. */
#define LOCAL_STEP 1e-4
int sinew_vbd_sweep(const SinewVbdProblem *pb, int64_t ncolors, const int64_t *color_off,
                    const int64_t *color_vertices, double *x, int64_t *clipped) {
    int64_t held = 0;
    for (int64_t c = 0; c < ncolors; ++c) {
        for (int64_t j = color_off[c]; j < color_off[c + 1]; ++j) {
            int64_t i = color_vertices[j];
            if (i < 0 || i >= pb->n) return SINEW_E_ARGUMENT;
            double *xi = x + 3 * i;
            int stopped = 0;
            double f[3], H[6], dx[3], gap;
            assemble(pb, &pb->springs, i, x, f, H, NULL, NULL, &gap);
            int touchable = pb->np > 0 || (pb->c_count && pb->c_count[i] > 0)
                            || (pb->inc_off && pb->inc_off[i + 1] > pb->inc_off[i]);
            for (int it = 0; it < LOCAL_NEWTON; ++it) {
                if (!solve3(H, f, dx)) break;
                double nx[3] = {xi[0] + dx[0], xi[1] + dx[1], xi[2] + dx[2]};
                stopped |= guard_move(pb, i, x, nx);
                double gap1 = NAN;
                if (touchable && it == 0 && gap >= 0.0) {
                    /* a free step into a thickness stops where it enters it: the next Newton
                     * step has the contact's stiffness */
                    gap1 = thickness_gap(pb, i, x, nx, 0);
                    if (gap1 < 0.0) {
                        /* (a millionth of the step further: inside, not on the edge) */
                        gap = thickness_gap(pb, i, x, xi, 1);
                        double s = gap / (gap - gap1) + 1e-6;
                        if (s < 1.0)
                            for (int a = 0; a < 3; ++a) nx[a] = xi[a] + s * (nx[a] - xi[a]);
                        gap1 = -1.0;
                    }
                }
                double moved = (nx[0] - xi[0]) * (nx[0] - xi[0]) + (nx[1] - xi[1]) * (nx[1] - xi[1])
                               + (nx[2] - xi[2]) * (nx[2] - xi[2]);
                xi[0] = nx[0]; xi[1] = nx[1]; xi[2] = nx[2];
                /* (a step cut short at a thickness's edge goes on with the contact's
                 * stiffness however short it was: cut from an edge it hardly moves, and the
                 * vertex would stay there with its slide along the surface undone) */
                if (!touchable || it + 1 == LOCAL_NEWTON
                    || (!(moved > LOCAL_STEP * LOCAL_STEP) && gap1 != -1.0)) break;
                /* clear of every thickness: the step was a free one (checked on the contacts
                 * alone, before assembling the springs again) */
                if (isnan(gap1)) gap1 = thickness_gap(pb, i, x, xi, 0);
                if (gap1 >= 0.0) break;
                assemble(pb, &pb->springs, i, x, f, H, NULL, NULL, &gap);
            }
            held += stopped;
        }
    }
    *clipped = held;
    return SINEW_OK;
}

/* A moving collider's push over the step on each of the n vertices at x0 (n,3)
 * (VertexBlockDescent._carry): against each of its count[i] slot triangles of ids (n,k), as
 * detected with the colliders where they were at the step's start (cv0 (nv,3); the slot's
 * distance there distance[i], signed, for slot 0 and slot_distance (n,k) for the others),
 * the triangle's point q nearest the vertex and that point's displacement D over the step
 * (cdisp (nv,3) at q's barycentric weights). Outward u: from q to the vertex where it is
 * clear of the surface (farther than 1e-9 m, and outside), else the triangle's unit normal at
 * the start (turned to the vertex's side of an open mesh; closed_tri (nt,)); the push
 * advance = D . u - max(distance - radius[t], 0), the surface's approach beyond the gap to
 * its thickness. out (n,3) receives the largest advance times its u where positive (the
 * first slot of equal ones), else zero. */
int sinew_vbd_carry(int64_t n, const double *x0, int64_t k, const int64_t *ids, const int64_t *count,
                    const double *distance, const double *slot_distance, int64_t nv, const double *cv0,
                    const double *cdisp, int64_t nt, const int64_t *tris, const uint8_t *closed_tri,
                    const double *radius, double *out) {
    for (int64_t t = 0; t < 3 * nt; ++t)
        if (tris[t] < 0 || tris[t] >= nv) return SINEW_E_ARGUMENT;
    for (int64_t i = 0; i < n; ++i) {
        if (count[i] < 0 || count[i] > k) return SINEW_E_ARGUMENT;
        const double *p = x0 + 3 * i;
        double best = 0.0, push[3] = {0.0, 0.0, 0.0};
        int found = 0;
        for (int64_t j = 0; j < count[i]; ++j) {
            int64_t t = ids[k * i + j];
            if (t < 0 || t >= nt) return SINEW_E_ARGUMENT;
            const int64_t *tv = tris + 3 * t;
            const double *a = cv0 + 3 * tv[0], *b = cv0 + 3 * tv[1], *c = cv0 + 3 * tv[2];
            double q[3], bary[3], away[3], u[3], disp[3];
            closest_on_triangle(p, a, b, c, q, bary);
            for (int ax = 0; ax < 3; ++ax)
                disp[ax] = bary[0] * cdisp[3 * tv[0] + ax] + bary[1] * cdisp[3 * tv[1] + ax]
                           + bary[2] * cdisp[3 * tv[2] + ax];
            double gap = j == 0 ? distance[i] : slot_distance[k * i + j];
            sub3(p, q, away);
            double length = sqrt(dot3(away, away));
            if (length > 1e-9 && gap > 0.0) {
                for (int ax = 0; ax < 3; ++ax) u[ax] = away[ax] / length;
            } else {
                double nrm[3];
                triangle_normal(a, b, c, nrm);
                double side = (!closed_tri[t] && dot3(away, nrm) < 0.0) ? -1.0 : 1.0;
                for (int ax = 0; ax < 3; ++ax) u[ax] = side * nrm[ax];
            }
            double beyond = gap - radius[t];
            double advance = dot3(disp, u) - (beyond > 0.0 ? beyond : 0.0);
            if (!found || advance > best) {
                found = 1;
                best = advance;
                for (int ax = 0; ax < 3; ++ax) push[ax] = u[ax];
            }
        }
        for (int ax = 0; ax < 3; ++ax) out[3 * i + ax] = found && best > 0.0 ? best * push[ax] : 0.0;
    }
    return SINEW_OK;
}

/* The force (minus the objective's gradient) on each listed vertex at x, force (m,3), and
 * the collider normal force alone, contact_force (m,3). */
int sinew_vbd_forces(const SinewVbdProblem *pb, int64_t m, const int64_t *vertices,
                     const double *x, double *force, double *contact_force) {
    for (int64_t j = 0; j < m; ++j) {
        int64_t i = vertices[j];
        if (i < 0 || i >= pb->n) return SINEW_E_ARGUMENT;
        double H[6];
        double *cf = contact_force + 3 * j;
        cf[0] = cf[1] = cf[2] = 0.0;
        assemble(pb, &pb->springs, i, x, force + 3 * j, H, cf, NULL, NULL);
    }
    return SINEW_OK;
}

/* Moves every vertex from where it is in x to target (n,3) through the guard, one after the
 * other (the solve's starting guess, made in Python); clipped receives the number the ball
 * bounds held back. */
int sinew_vbd_guard(const SinewVbdProblem *pb, double *x, const double *target, int64_t *clipped) {
    int64_t held = 0;
    for (int64_t i = 0; i < pb->n; ++i) {
        double nx[3] = {target[3 * i], target[3 * i + 1], target[3 * i + 2]};
        held += guard_move(pb, i, x, nx);
        x[3 * i] = nx[0]; x[3 * i + 1] = nx[1]; x[3 * i + 2] = nx[2];
    }
    *clipped = held;
    return SINEW_OK;
}

/* Pushes each listed vertex of x out of the thickness of every collider it is in contact
 * with (its slots and the primitives), along the contact direction: the starting guess of a
 * vertex resting on a collider keeps the inertial prediction's motion along the surface
 * (sliding) without its motion into it. */
int sinew_vbd_push_out(const SinewVbdProblem *pb, int64_t m, const int64_t *vertices, double *x) {
    for (int64_t j = 0; j < m; ++j) {
        int64_t i = vertices[j];
        if (i < 0 || i >= pb->n) return SINEW_E_ARGUMENT;
        double *xi = x + 3 * i;
        int64_t nc = pb->c_count ? pb->c_count[i] : 0;
        for (int64_t k = 0; k < nc; ++k) {
            int64_t t = pb->c_id[pb->kslots * i + k];
            const int64_t *tv = pb->tris + 3 * t;
            double dir[3], sd, bary[3], r = pb->tri_radius[t];
            triangle_contact(xi, pb->cv + 3 * tv[0], pb->cv + 3 * tv[1], pb->cv + 3 * tv[2],
                             TRI_NORMAL(pb, t), pb->closed_tri[t], dir, &sd, bary);
            if (sd < r) for (int a = 0; a < 3; ++a) xi[a] += (r - sd) * dir[a];
        }
        for (int64_t p = 0; p < pb->np; ++p) {
            double dir[3], sd;
            primitive_contact(xi, pb->prim_type[p], pb->prim + 8 * p, dir, &sd);
            double r = pb->prim[8 * p + 6];
            if (sd < r) for (int a = 0; a < 3; ++a) xi[a] += (r - sd) * dir[a];
        }
    }
    return SINEW_OK;
}

/* What each of the m listed vertices adds to its cluster's sums at x, terms (m,9): f (3)
 * and H (xx, yy, zz, xy, xz, yz), with the springs leaving its cluster only (assemble). */
static int cluster_terms(const SinewVbdProblem *pb, int64_t m, const int64_t *vertices,
                         const int64_t *cluster, const SinewVbdSprings *leave, const double *x,
                         double *terms) {
    for (int64_t j = 0; j < m; ++j) {
        int64_t i = vertices[j];
        if (i < 0 || i >= pb->n || cluster[i] < 0) return SINEW_E_ARGUMENT;
        assemble(pb, leave, i, x, terms + 9 * j, terms + 9 * j + 3, NULL, cluster, NULL);
    }
    return SINEW_OK;
}

/* The coarse correction, in two calls so that clusters (and parts of one cluster) can go to
 * several threads: each cluster of free vertices takes one Newton step as a rigid
 * translation, delta = (sum H_i)^-1 sum f_i over the terms such a translation changes
 * (springs inside the cluster cancel). Gauss-Seidel moves a cloth as a whole very slowly
 * when its springs are stiff against its inertia (k h^2/m ~ 10^4 for cloth at 24 fps): a
 * sheet sliding, sticking or slowing by drag, or one side of a cloth swinging, is such a
 * motion.
 *
 * sinew_vbd_cluster_sums: for each of nclusters groups of vertices (cluster_off
 * (nclusters+1) into cluster_vertices), sums (nclusters, 9) receives sum f (3) and sum H (xx,
 * yy, zz, xy, xz, yz) at x; cluster (n,) gives every vertex's cluster (-1 for pinned ones),
 * and leave the springs at each vertex whose other end is not in its cluster: the springs a
 * translation of the cluster stretches. A group may be a whole cluster or a part of one (the
 * caller adds the parts). */
int sinew_vbd_cluster_sums(const SinewVbdProblem *pb, int64_t nclusters, const int64_t *cluster_off,
                           const int64_t *cluster_vertices, const int64_t *cluster,
                           const SinewVbdSprings *leave, const double *x, double *sums) {
    for (int64_t c = 0; c < nclusters; ++c) {
        double *S = sums + 9 * c;
        for (int a = 0; a < 9; ++a) S[a] = 0.0;
        for (int64_t j = cluster_off[c]; j < cluster_off[c + 1]; ++j) {
            double fH[9];
            int status = cluster_terms(pb, 1, cluster_vertices + j, cluster, leave, x, fH);
            if (status != SINEW_OK) return status;
            for (int a = 0; a < 9; ++a) S[a] += fH[a];
        }
    }
    return SINEW_OK;
}

/* sinew_vbd_translate: the vertices of each group c (cluster_off (nclusters+1) into
 * cluster_vertices) move by the Newton step of the sums row step_row[c] (9: sum f, sum H, as
 * sinew_vbd_cluster_sums gives; no move where that H is not positive definite), each
 * through the guard. step_row (nclusters,), may be NULL, names the row of each group
 * (NULL: row c), so parts of one cluster can share its row. clipped receives the number
 * of vertices the guard's ball bound held back. */
int sinew_vbd_translate(const SinewVbdProblem *pb, int64_t nclusters, const int64_t *cluster_off,
                        const int64_t *cluster_vertices, const double *sums, const int64_t *step_row,
                        double *x, int64_t *clipped) {
    int64_t held = 0;
    for (int64_t c = 0; c < nclusters; ++c) {
        const double *S = sums + 9 * (step_row ? step_row[c] : c);
        double delta[3];
        if (!solve3(S + 3, S, delta)) continue;
        for (int64_t j = cluster_off[c]; j < cluster_off[c + 1]; ++j) {
            int64_t i = cluster_vertices[j];
            if (i < 0 || i >= pb->n) return SINEW_E_ARGUMENT;
            double *xi = x + 3 * i;
            double nx[3] = {xi[0] + delta[0], xi[1] + delta[1], xi[2] + delta[2]};
            held += guard_move(pb, i, x, nx);
            xi[0] = nx[0]; xi[1] = nx[1]; xi[2] = nx[2];
        }
    }
    *clipped = held;
    return SINEW_OK;
}

/* Iterations of the solve, each a sweep then the coarse correction, run by thread `thread`
 * of a team (team.h; every thread of the team makes the same call with its own index, and
 * a team of one runs the whole). The sweep is nphases phases (phase_off (nphases+1) into
 * sweeps); the sweeps of one phase share no spring, and each thread takes a block of them
 * (sinew_vbd_sweep). Then the coarse correction's stages in order: each thread takes a
 * block of a stage's groups for sinew_vbd_cluster_sums, then for sinew_vbd_translate. A
 * whole cluster's stage (its groups are parts of it) shares out its vertices instead: each
 * thread takes a block of them for their terms, then a block of the parts for their sums in
 * order, the parts are added in order by every thread alike, and each translates its block
 * of vertices. The blocks are the same at every iteration, so each thread keeps to the same
 * part of the cloth (and of its cache). The threads meet after every phase and every half
 * stage, and what a block computes does not depend on the thread that takes it, so every
 * vertex sees the same positions, and the result is the same bit for bit, at any number of
 * threads. With aa (NULL: plain iterations), each iteration ends with Anderson's step from
 * the iterate it started from to the one it reached (anderson.h: each thread takes blocks of
 * 256 vertices), through the guard; with self-contact (pb->self_r > 0) only on a team of one,
 * as its guard reads the other vertices. Stops after the iteration in which the sweep's or
 * the coarse correction's moves met the guard's ball bound (the caller runs detection again
 * for the vertex held back, and restarts the history), or after iterations; returns the
 * iterations done, clipped the vertices held back in the last one (every thread returns the
 * same). */
int64_t sinew_vbd_iterate(const SinewVbdProblem *pb, SinewTeam *team, int64_t thread,
                          int64_t nphases, const int64_t *phase_off, const SinewVbdSweep *sweeps,
                          int64_t nstages, const SinewVbdStage *stages, const SinewAnderson *aa,
                          int64_t iterations, double *x, int64_t *clipped) {
    int64_t T = team->threads, done = 0, all = 0, b0 = 0, b1 = 0, v0 = 0, v1 = 0;
    if (thread < 0 || thread >= T ||
        (aa && (aa->size != 3 * pb->n || aa->memory < 1 || aa->memory > SINEW_ANDERSON_MEMORY ||
                aa->state[1] < 0 || (pb->self_r > 0.0 && T > 1)))) {
        team_fail(team, SINEW_E_ARGUMENT);
        return SINEW_E_ARGUMENT;
    }
    if (aa) { /* each thread keeps to its blocks of vertices; the map starts from x */
        team_share(anderson_blocks(aa), thread, T, &b0, &b1);
        v0 = b0 * (SINEW_ANDERSON_BLOCK / 3);
        v1 = b1 * (SINEW_ANDERSON_BLOCK / 3) < pb->n ? b1 * (SINEW_ANDERSON_BLOCK / 3) : pb->n;
        if (v1 > v0) memcpy(aa->before + 3 * v0, x + 3 * v0, (size_t)(3 * (v1 - v0)) * sizeof(double));
        int status = team_wait(team);
        if (status != 0) return status;
    }
    while (done < iterations) {
        int64_t mine = 0, h = 0, lo, hi;
        int status;
        for (int64_t p = 0; p < nphases; ++p) {
            team_share(phase_off[p + 1] - phase_off[p], thread, T, &lo, &hi);
            for (int64_t w = phase_off[p] + lo; w < phase_off[p] + hi; ++w) {
                status = sinew_vbd_sweep(pb, sweeps[w].ncolors, sweeps[w].color_off,
                                         sweeps[w].color_vertices, x, &h);
                if (status != SINEW_OK) team_fail(team, status);
                mine += h;
            }
            if ((status = team_wait(team)) != 0) return status;
        }
        for (int64_t s = 0; s < nstages; ++s) {
            const SinewVbdStage *st = stages + s;
            if (!st->whole) {
                team_share(st->groups, thread, T, &lo, &hi);
                status = sinew_vbd_cluster_sums(pb, hi - lo, st->off + lo, st->vertices, st->cluster,
                                                st->leave, x, st->sums + 9 * lo);
                if (status != SINEW_OK) team_fail(team, status);
                if ((status = team_wait(team)) != 0) return status;
                status = sinew_vbd_translate(pb, hi - lo, st->off + lo, st->vertices, st->sums + 9 * lo,
                                             NULL, x, &h);
                if (status != SINEW_OK) team_fail(team, status);
                mine += h;
                if ((status = team_wait(team)) != 0) return status;
                continue;
            }
            int64_t first = st->off[0], count = st->off[st->groups] - first;
            team_share(count, thread, T, &lo, &hi);
            status = cluster_terms(pb, hi - lo, st->vertices + first + lo, st->cluster, st->leave, x,
                                   st->terms + 9 * lo);
            if (status != SINEW_OK) team_fail(team, status);
            if ((status = team_wait(team)) != 0) return status;
            int64_t g0, g1;
            team_share(st->groups, thread, T, &g0, &g1);
            for (int64_t g = g0; g < g1; ++g) {
                /* (the part's terms added in order from zero: as sinew_vbd_cluster_sums adds them) */
                double *S = st->sums + 9 * g;
                for (int a = 0; a < 9; ++a) S[a] = 0.0;
                for (int64_t j = st->off[g]; j < st->off[g + 1]; ++j)
                    for (int a = 0; a < 9; ++a) S[a] += st->terms[9 * (j - first) + a];
            }
            if ((status = team_wait(team)) != 0) return status;
            double total[9];
            for (int a = 0; a < 9; ++a) total[a] = st->sums[a];
            for (int64_t g = 1; g < st->groups; ++g)
                for (int a = 0; a < 9; ++a) total[a] += st->sums[9 * g + a];
            int64_t range[2] = {first + lo, first + hi};
            status = sinew_vbd_translate(pb, 1, range, st->vertices, total, NULL, x, &h);
            if (status != SINEW_OK) team_fail(team, status);
            mine += h;
            if ((status = team_wait(team)) != 0) return status;
        }
        int restart = 0;
        double sums[ANDERSON_PARTIAL], move = 0.0;
        if (aa) {
            /* the map took x_k (aa->before) to G(x_k) (x): Anderson's iterate from the last
             * ones, each vertex's move to it through the guard. Where the map moved the cloth
             * farther than the time before (friction passing between sticking and sliding),
             * the history no longer describes it (extrapolated on, it stalls): it restarts
             * from this iterate, which stays G(x_k). */
            int64_t q;
            double gamma[SINEW_ANDERSON_MEMORY];
            anderson_record(aa, b0, b1, x, NULL, aa->before, NULL);
            if ((status = team_wait(team)) != 0) return status;
            anderson_sums(aa, sums);
            move = sqrt(sums[0]);
            restart = move > aa->move[0];
            if (!restart && (q = anderson_weights(aa, sums, gamma)) > 0) {
                anderson_combine(aa, 3 * v0, 3 * v1, q, gamma, x, NULL, aa->before, NULL);
                for (int64_t i = v0; i < v1; ++i) {
                    double *nx = aa->before + 3 * i, *xi = x + 3 * i;
                    /* a vertex the map leaves where it is has no difference to combine: a
                     * hard pin (at its target, which may lie outside its ball) stays put */
                    if (nx[0] == xi[0] && nx[1] == xi[1] && nx[2] == xi[2]) continue;
                    guard_move(pb, i, x, nx); /* (a move cut short is no reason to detect again:
                                                 the next sweep's own moves are) */
                    xi[0] = nx[0]; xi[1] = nx[1]; xi[2] = nx[2];
                }
            } else if (v1 > v0) {
                memcpy(aa->before + 3 * v0, x + 3 * v0, (size_t)(3 * (v1 - v0)) * sizeof(double));
            }
        }
        double held = (double)mine;
        if ((status = team_exchange(team, thread, done, &held, 1)) != 0) return status;
        if (aa && thread == 0) { /* (every thread has its weights: the history moves on) */
            anderson_advance(aa, sums, restart);
            aa->move[0] = move;
        }
        all = 0;
        for (int64_t t = 0; t < T; ++t) all += (int64_t)team->rows[done & 1][t][0];
        ++done;
        if (all > 0) break;
    }
    *clipped = all;
    return done;
}
