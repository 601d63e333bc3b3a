/* A team of threads inside one kernel call: Python starts the same entry point on each of
 * the team's threads (ctypes releases the GIL for the length of the call), and the threads
 * meet at barriers built on C11 atomics, so a whole run of iterations costs one call per
 * thread instead of a Python hand-off per stage. The team's memory is a caller-owned buffer
 * of sinew_team_size() bytes, set up by sinew_team_init before each run. */
#include "team.h"

int64_t sinew_team_size(void) { return (int64_t)sizeof(SinewTeam); }

int sinew_team_init(SinewTeam *team, int64_t threads) {
    if (threads < 1 || threads > SINEW_MAX_THREADS) return SINEW_E_ARGUMENT;
    team->threads = threads;
    atomic_init(&team->arrived, 0);
    atomic_init(&team->generation, 0);
    atomic_init(&team->stop, 0);
    atomic_init(&team->contended, 0);
    for (int p = 0; p < 2; ++p)
        for (int t = 0; t < SINEW_MAX_THREADS; ++t)
            for (int a = 0; a < TEAM_ROW; ++a) team->rows[p][t][a] = 0.0;
    return SINEW_OK;
}

void sinew_team_cancel(SinewTeam *team) { team_fail(team, SINEW_E_CANCELLED); }

int sinew_team_contended(const SinewTeam *team) {
    return atomic_load_explicit(&((SinewTeam *)team)->contended, memory_order_relaxed);
}
