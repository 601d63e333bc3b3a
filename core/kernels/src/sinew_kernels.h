/* Sinew's compiled kernels: the entry points called from core/kernels/__init__.py.
 *
 * C11, C standard library only. No global or static mutable state: every input,
 * output and scratch buffer is passed in and owned by the caller (Python/numpy).
 * Arrays are C-contiguous; float64 positions are (n, 3) row-major; indices are int64.
 * Kernels return 0 on success or a negative SINEW_E_* code, and never print, exit
 * or allocate.
 */
#ifndef SINEW_KERNELS_H
#define SINEW_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define SINEW_API __declspec(dllexport)
#else
#define SINEW_API __attribute__((visibility("default")))
#endif

/* Bumped whenever an entry point's arguments change; the loader checks it. */
#define SINEW_ABI_VERSION 12

#define SINEW_OK 0
#define SINEW_E_ARGUMENT (-1) /* an index out of range or a size that does not fit */
#define SINEW_E_CAPACITY (-2) /* an output buffer too small: the count needed is returned elsewhere */
#define SINEW_E_CANCELLED (-3) /* the team's run was cancelled (sinew_team_cancel) */

SINEW_API int32_t sinew_abi_version(void);

/* ---- team.c: threads that meet at barriers inside one call (team.h) ---- */
/* The most threads of a team. */
#define SINEW_MAX_THREADS 64
typedef struct SinewTeam SinewTeam;
/* The bytes of a team's buffer (8-byte aligned, owned by the caller). */
SINEW_API int64_t sinew_team_size(void);
/* Sets the buffer up for a run of threads threads (1 .. SINEW_MAX_THREADS). */
SINEW_API int sinew_team_init(SinewTeam *team, int64_t threads);
/* Makes every thread of a running team leave at its next barrier with SINEW_E_CANCELLED
 * (for a caller that could not start all of them). */
SINEW_API void sinew_team_cancel(SinewTeam *team);
/* The barriers of the team's last run at which a thread waited longer than TEAM_CONTENDED
 * (team.h: the thread it waited for had no core), 0 for none; cleared by sinew_team_init. */
SINEW_API int sinew_team_contended(const SinewTeam *team);

/* ---- colour.c: greedy graph colouring (vertex sets with no edge inside one set) ---- */
SINEW_API int64_t sinew_color_greedy(int64_t n, const int64_t *adj_off, const int64_t *adj_other,
                                     const uint8_t *active, int64_t *color, uint8_t *scratch,
                                     int64_t scratch_len);

/* ---- proximity.c: closest points, broad phase and the collider contact query ---- */
SINEW_API int sinew_closest_points(int64_t n, const double *p, const double *a, const double *b,
                                   const double *c, double *q, double *bary);

SINEW_API int sinew_element_boxes(int64_t m, int64_t k, const int64_t *elems, int64_t nv, const double *x,
                                  const double *x1, double *lo, double *hi);
SINEW_API int64_t sinew_swept_elements_meet(int64_t m, int64_t k, const int64_t *elems, int64_t nv,
                                            const double *x0, const double *x1, double grow,
                                            const double *lo, const double *hi, uint8_t *keep);
SINEW_API int64_t sinew_grid_build(int64_t m, const double *lo, const double *hi, double cell, int64_t table,
                                   int64_t big_cells, int64_t *offsets, int64_t cap, int64_t *entries,
                                   int64_t *big, int64_t *nbig);

SINEW_API int sinew_collider_query(
    int64_t n, const double *x, const double *radius,
    int64_t nv, const double *cv, int64_t nt, const int64_t *tris, const uint8_t *closed_tri,
    double cell, int64_t table, const int64_t *offsets, const int64_t *entries,
    int64_t nbig, const int64_t *big, const double *box_lo, const double *box_hi,
    int64_t np, const int32_t *prim_type, const double *prim,
    int64_t k, int64_t *out_id, double *out_dist, int64_t *out_count, double *out_dmin);

/* ---- vbd.c: Vertex Block Descent (Chen, Liu & Yang 2024) sweeps and residual ---- */
/* The most contact slots a vertex may have (SinewVbdProblem.kslots). */
#define SINEW_MAX_SLOTS 16

/* The springs each vertex feels, one row of entries per vertex, the rows laid out in the
 * order a pass visits the vertices (it reads the entries from one end to the other). An
 * entry is a spring seen from one of its ends. */
typedef struct SinewVbdSprings {
    const int64_t *off;      /* (rows+1) the rows' offsets into the entries */
    const int64_t *row;      /* (n,) each vertex's row */
    const int64_t *other;    /* (e,) the spring's other end */
    const double *k;         /* (e,) stiffness N/m */
    const double *rest;      /* (e,) rest length m */
    const double *kd;        /* (e,) damping N s/m, along the spring's direction at x_prev */
    const double *rest_dir;  /* (e,3) the damping's direction where the ends meet at x_prev */
    const double *limit;     /* (e,) strain-limit length (0 = none) */
} SinewVbdSprings;

typedef struct SinewVbdProblem {
    int64_t n;              /* vertices */
    double h;               /* step, s */
    const double *x_prev;   /* (n,3) start of the step */
    const double *w;        /* (n,) inertia weight m(1/h^2 + c/h) (+ soft-pin stiffness) */
    const double *y;        /* (n,3) inertial target */
    SinewVbdSprings springs; /* every spring at each vertex, the rows in the sweep's order */
    int64_t elastic;        /* 0: the springs' stiffness and damping are left out (their
                               strain limits stay), as in an explicit step's contact solve */
    double k_limit;         /* stiffness of the strain-limit term, N/m */
    /* colliders: triangle soup and analytic primitives */
    const double *cv;       /* (nv,3) collider vertices at the end of the step */
    const double *cdisp;    /* (nv,3) their displacement over the step (friction), or NULL */
    const int64_t *tris;    /* (nt,3) */
    const uint8_t *closed_tri; /* (nt,) the triangle belongs to a closed (solid) mesh */
    const double *tri_normal;  /* (nt,3) unit normals of the triangles, or NULL (computed) */
    const double *tri_radius;  /* (nt,) contact radius (thickness) */
    const double *tri_mu;      /* (nt,) Coulomb coefficient */
    int64_t np;
    const int32_t *prim_type;  /* (np,) 0 plane (point, normal), 1 sphere (centre, radius) */
    const double *prim;        /* (np,8): plane p,n,radius(thickness),mu; sphere c,R,thick,mu,_,_ */
    int64_t kslots;            /* contact slots per vertex, at most SINEW_MAX_SLOTS */
    const int64_t *c_id;       /* (n,kslots) collider triangles near each vertex */
    const int64_t *c_count;    /* (n,) */
    const double *c_dist;      /* (n,kslots) each slot's distance at detection, or NULL */
    const double *kc;          /* (n,) contact stiffness N/m */
    double eps_u;              /* friction's static-to-sliding displacement, m */
    /* the displacement guard (guard.h) */
    const double *anchor;      /* (n,3) positions at the last detection */
    const double *bound;       /* (n,) radius around anchor holding no collider triangle but
                                  the vertex's slots, m (inf: unguarded) */
    /* self-contact, the cloth against itself (selfcontact.h); self_r 0: none */
    double self_r;             /* contact radius (self_distance), m */
    double self_k;             /* the barrier's stiffness, N/m */
    const int64_t *faces;      /* (nf,3) the cloth's triangles */
    const int64_t *edges;      /* (ne,2) its edges */
    int64_t self_vf;           /* the first self_vf pairs are (vertex, face), the rest (edge, edge) */
    const int64_t *pair;       /* (pairs,2) listed by the last self detection */
    const double *pair_dist;   /* (pairs,) their distance at detection, m */
    const int64_t *inc_off;    /* (n+1) CSR over the pairs each vertex belongs to */
    const int64_t *inc;        /* the pairs, per vertex */
    const double *self_anchor; /* (n,3) positions at the last self detection */
    const double *self_bound;  /* (n,) radius about self_anchor each vertex stays within, m */
    double *self_moved;        /* (n,) scratch: each vertex's distance from self_anchor, kept
                                  by guard_move (the caller sets it after moving vertices) */
} SinewVbdProblem;

SINEW_API int sinew_vbd_sweep(const SinewVbdProblem *pb, int64_t ncolors, const int64_t *color_off,
                              const int64_t *color_vertices, double *x, int64_t *clipped);
SINEW_API int sinew_vbd_push_out(const SinewVbdProblem *pb, int64_t m, const int64_t *vertices,
                                 double *x);
SINEW_API int sinew_vbd_guard(const SinewVbdProblem *pb, double *x, const double *target,
                              int64_t *clipped);
SINEW_API int sinew_vbd_cluster_sums(const SinewVbdProblem *pb, int64_t nclusters,
                                     const int64_t *cluster_off, const int64_t *cluster_vertices,
                                     const int64_t *cluster, const SinewVbdSprings *leave,
                                     const double *x, double *sums);
SINEW_API int sinew_vbd_translate(const SinewVbdProblem *pb, int64_t nclusters,
                                  const int64_t *cluster_off, const int64_t *cluster_vertices,
                                  const double *sums, const int64_t *step_row, double *x,
                                  int64_t *clipped);
/* ---- anderson.c: Anderson acceleration of a fixed-point iteration (anderson.h): FAST's
 * local/global iterations call it once per iterate; VBD's iterations run it inside
 * sinew_vbd_iterate ---- */
#define SINEW_ANDERSON_MEMORY 16 /* the most differences a history may hold */
#define SINEW_ANDERSON_BLOCK 768 /* entries per block of the dot products (256 vertices) */
typedef struct SinewAnderson {
    int64_t size;    /* entries of an iterate */
    int64_t memory;  /* differences kept, 1 .. SINEW_ANDERSON_MEMORY */
    int64_t *state;  /* (2,): 1 when last holds an iterate, else 0; differences recorded since */
    double *move;    /* (1,): |f| of the last iterate VBD's iterations recorded */
    double *hist_f;  /* (memory, size): the ring of dF */
    double *hist_g;  /* (memory, 2, size): the ring of dG and of the second vector's */
    double *gram;    /* (memory, memory): dF_i . dF_j */
    double *last;    /* (3, size): f, G(x) and the second vector of the last iterate */
    double *before;  /* (size,): the iterate VBD's map started from */
    double *partial; /* (blocks, 1 + 2 SINEW_ANDERSON_MEMORY): the blocks' dot products */
} SinewAnderson;
SINEW_API int sinew_anderson(const SinewAnderson *aa, const double *g, const double *f,
                             const double *sg, double *out, double *sout);

/* One stage of the coarse correction for sinew_vbd_iterate: the arguments of a
 * sinew_vbd_cluster_sums call and of the sinew_vbd_translate call after it. When whole, the
 * groups are parts of one cluster: their sums are added in order, and every vertex moves by
 * the total's step; terms holds each vertex's (f, H) on the way (the vertices are shared
 * out in blocks, the sums are taken in order). */
typedef struct SinewVbdStage {
    int64_t groups;
    const int64_t *off;        /* (groups+1) into vertices */
    const int64_t *vertices;
    const int64_t *cluster;    /* (n,) */
    const SinewVbdSprings *leave; /* the springs leaving each vertex's cluster, the rows in
                                     the stage's order */
    double *sums;              /* (groups,9) scratch */
    int64_t whole;
    double *terms;             /* (off[groups],9) scratch, when whole */
} SinewVbdStage;

/* One part of a sweep for sinew_vbd_iterate: the arguments of a sinew_vbd_sweep call. */
typedef struct SinewVbdSweep {
    int64_t ncolors;
    const int64_t *color_off;      /* (ncolors+1) into color_vertices */
    const int64_t *color_vertices;
} SinewVbdSweep;

SINEW_API int64_t sinew_vbd_iterate(const SinewVbdProblem *pb, SinewTeam *team, int64_t thread,
                                    int64_t nphases, const int64_t *phase_off,
                                    const SinewVbdSweep *sweeps, int64_t nstages,
                                    const SinewVbdStage *stages, const SinewAnderson *aa,
                                    int64_t iterations, double *x, int64_t *clipped);
SINEW_API int sinew_vbd_carry(int64_t n, const double *x0, int64_t k, const int64_t *ids,
                              const int64_t *count, const double *distance,
                              const double *slot_distance, int64_t nv, const double *cv0,
                              const double *cdisp, int64_t nt, const int64_t *tris,
                              const uint8_t *closed_tri, const double *radius, double *out);
SINEW_API int sinew_vbd_forces(const SinewVbdProblem *pb, int64_t m, const int64_t *vertices,
                               const double *x, double *force, double *contact_force);

/* ---- selfcontact.c: the cloth's own vertex-face and edge-edge pairs near contact ---- */
SINEW_API int64_t sinew_self_query(int64_t n, const double *x, const double *bound, double r, double bmax,
                                   int64_t nf, const int64_t *faces, int64_t ne, const int64_t *edges,
                                   double cell, int64_t table, const int64_t *f_off,
                                   const int64_t *f_entries, const int64_t *e_off,
                                   const int64_t *e_entries, const double *f_lo, const double *f_hi,
                                   const double *e_lo, const double *e_hi, const int64_t *skip_vf_off,
                                   const int64_t *skip_vf, const int64_t *skip_ee_off,
                                   const int64_t *skip_ee, int64_t *stamp, int64_t part, int64_t parts,
                                   int64_t cap, int64_t *pairs, double *dist, int64_t *counts);

/* ---- crossing.c: the pairs of a mesh's triangles that share no vertex and intersect ---- */
SINEW_API int64_t sinew_crossing_pairs(int64_t n, const double *x, int64_t nt, const int64_t *tris,
                                       double cell, int64_t table, const int64_t *offsets,
                                       const int64_t *entries, int64_t nbig, const int64_t *big,
                                       const double *lo, const double *hi, int64_t *stamp, int64_t cap,
                                       int64_t *pairs);

/* ---- fast.c: FAST's local step (the global step's right-hand side from the springs) ---- */
SINEW_API int sinew_fast_local(int64_t s, int64_t f, const int64_t *ends, const double *xf,
                               const double *dpin, const double *k, const double *rest,
                               const double *kd_h, const double *u0, const double *proj0,
                               const double *rest_dir, double *out, double *energy);

/* ---- strain.c: the strain limit as Gauss-Seidel projections of the stretched springs, in
 * slabs on a team of threads ---- */
SINEW_API int64_t sinew_strain_project(SinewTeam *team, int64_t thread, int64_t n, int64_t s,
                                       const int64_t *springs, const double *limit,
                                       const double *inv_mass, int64_t nslabs, const int64_t *slab_off,
                                       int64_t rounds, double tolerance, const SinewVbdProblem *guard,
                                       double *x);

#endif
