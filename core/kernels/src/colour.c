/* Greedy graph colouring: vertices of one colour share no spring, so a colour's vertices
 * can be updated in any order, or at once on several cores (Vertex Block Descent's
 * parallel Gauss-Seidel, Chen, Liu & Yang 2024). */
#include "sinew_kernels.h"

/* Colours the active vertices of the graph (CSR adj_off/adj_other, n + 1 offsets) in
 * index order with the smallest colour no coloured neighbour has. color[i] = -1 for
 * inactive vertices. scratch has scratch_len bytes, at least (max degree + 1).
 * Returns the number of colours, or SINEW_E_ARGUMENT / SINEW_E_CAPACITY. */
int64_t sinew_color_greedy(int64_t n, const int64_t *adj_off, const int64_t *adj_other,
                           const uint8_t *active, int64_t *color, uint8_t *scratch,
                           int64_t scratch_len) {
    int64_t ncolors = 0;
    for (int64_t i = 0; i < n; ++i) color[i] = -1;
    for (int64_t i = 0; i < scratch_len; ++i) scratch[i] = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (!active[i]) continue;
        int64_t lo = adj_off[i], hi = adj_off[i + 1];
        if (lo < 0 || hi < lo) return SINEW_E_ARGUMENT;
        for (int64_t e = lo; e < hi; ++e) {
            int64_t o = adj_other[e];
            if (o < 0 || o >= n) return SINEW_E_ARGUMENT;
            int64_t c = color[o];
            if (c >= 0 && c < scratch_len) scratch[c] = 1;
        }
        int64_t pick = 0;
        while (pick < scratch_len && scratch[pick]) ++pick;
        if (pick >= scratch_len) return SINEW_E_CAPACITY;
        color[i] = pick;
        if (pick + 1 > ncolors) ncolors = pick + 1;
        for (int64_t e = lo; e < hi; ++e) {
            int64_t c = color[adj_other[e]];
            if (c >= 0 && c < scratch_len) scratch[c] = 0;
        }
    }
    return ncolors;
}
