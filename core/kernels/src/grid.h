/* The hashed uniform grid's cells (internal header): sinew_grid_build (proximity.c) files
 * boxes under these buckets, and the queries look them up the same way. */
#ifndef SINEW_GRID_H
#define SINEW_GRID_H

#include <math.h>
#include <stdint.h>

static inline int64_t cell_of(double v, double cell) { return (int64_t)floor(v / cell); }

static inline int64_t cell_hash(int64_t ix, int64_t iy, int64_t iz, int64_t table) {
    uint64_t h = ((uint64_t)ix * 73856093u) ^ ((uint64_t)iy * 19349663u) ^ ((uint64_t)iz * 83492791u);
    return (int64_t)(h % (uint64_t)table);
}

#endif
