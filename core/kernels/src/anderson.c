/* Anderson acceleration of a fixed-point iteration, one call per iterate (anderson.h has the
 * method; VBD's iterations run the same parts inside sinew_vbd_iterate). */
#include "anderson.h"

/* Records this iterate (g = G(x_k), f = f_k, sg the second vector or NULL, each aa->size)
 * and writes x_{k+1} to out (and the second vector's combination to sout, NULL iff sg is).
 * Returns 1 then, 0 with out untouched where there is nothing to extrapolate from (the first
 * call since state[0] was set to 0, or weights that are not finite), SINEW_E_ARGUMENT for a
 * history out of range. */
int sinew_anderson(const SinewAnderson *aa, const double *g, const double *f, const double *sg,
                   double *out, double *sout) {
    if (aa->size < 0 || aa->memory < 1 || aa->memory > SINEW_ANDERSON_MEMORY || aa->state[1] < 0 ||
        !f || (!sg) != (!sout))
        return SINEW_E_ARGUMENT;
    double sums[ANDERSON_PARTIAL], gamma[SINEW_ANDERSON_MEMORY];
    anderson_record(aa, 0, anderson_blocks(aa), g, f, NULL, sg);
    anderson_sums(aa, sums);
    int64_t q = anderson_weights(aa, sums, gamma);
    anderson_advance(aa, sums, 0);
    if (!q) return 0;
    anderson_combine(aa, 0, aa->size, q, gamma, g, sg, out, sout);
    return 1;
}
