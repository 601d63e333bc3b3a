/* The hashed uniform grid's cells (internal header): sinew_grid_build (proximity.c) files
 * boxes under these buckets, and the queries look them up the same way; GridWalk visits the
 * elements filed in the cells a box covers, each once. */
#ifndef SINEW_GRID_H
#define SINEW_GRID_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

static inline int64_t cell_of(double v, double cell) { return (int64_t)floor(v / cell); }

static inline int64_t cell_hash(int64_t ix, int64_t iy, int64_t iz, int64_t table) {
    uint64_t h = ((uint64_t)ix * 73856093u) ^ ((uint64_t)iy * 19349663u) ^ ((uint64_t)iz * 83492791u);
    uint64_t t = (uint64_t)table;
    return (int64_t)((t & (t - 1)) == 0 ? (h & (t - 1)) : (h % t)); /* a mask for a power of two */
}

/* Most cells per axis a walk's box scans before it visits every gridded element instead. */
#define GRID_SPAN 24

/* A walk over the elements filed in the grid cells (offsets (table+1), entries) that a box
 * covers, each once: stamp (elements,) holds the last walk that gave an element (its tag).
 * The cells go x-major, then y, then z (at: the current one). */
typedef struct GridWalk {
    int64_t c0[3], c1[3], at[3], q, len, tag, table;
    const int64_t *list, *offsets, *entries;
    int64_t *stamp;
    int every, left;
} GridWalk;

static inline void walk_start(GridWalk *w, const double *lo, const double *hi, double cell, int64_t table,
                              const int64_t *offsets, const int64_t *entries, int64_t *stamp, int64_t tag) {
    w->every = 0;
    for (int a = 0; a < 3; ++a) {
        w->c0[a] = cell_of(lo[a], cell);
        w->c1[a] = cell_of(hi[a], cell);
        if (w->c1[a] - w->c0[a] + 1 > GRID_SPAN) w->every = 1;
    }
    w->at[0] = w->c0[0]; w->at[1] = w->c0[1]; w->at[2] = w->c0[2] - 1;
    w->left = 1; w->q = 0; w->len = 0; w->list = NULL;
    w->table = table; w->offsets = offsets; w->entries = entries; w->stamp = stamp; w->tag = tag;
}

/* Moves the walk to its next cell; 0 when there is none left. */
static inline int walk_cell(GridWalk *w) {
    if (!w->left) return 0;
    if (w->every) {
        w->left = 0;
        w->list = w->entries; w->len = w->offsets[w->table];
        w->q = 0;
        return 1;
    }
    if (++w->at[2] > w->c1[2]) {
        w->at[2] = w->c0[2];
        if (++w->at[1] > w->c1[1]) {
            w->at[1] = w->c0[1];
            if (++w->at[0] > w->c1[0]) { w->left = 0; return 0; }
        }
    }
    int64_t b = cell_hash(w->at[0], w->at[1], w->at[2], w->table);
    w->list = w->entries + w->offsets[b];
    w->len = w->offsets[b + 1] - w->offsets[b];
    w->q = 0;
    return 1;
}

/* The next element of the walk into *elem; 0 when there is none left. */
static inline int walk_next(GridWalk *w, int64_t *elem) {
    for (;;) {
        while (w->q < w->len) {
            int64_t e = w->list[w->q++];
            if (w->stamp[e] == w->tag) continue;
            w->stamp[e] = w->tag;
            *elem = e;
            return 1;
        }
        if (!walk_cell(w)) return 0;
    }
}

#endif
