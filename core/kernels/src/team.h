/* The team's barrier (team.c has the entry points). Threads spin at a barrier: by default a
 * team has no more threads than the machine has CPUs (kernels.thread_count; more, set by
 * SINEW_THREADS, is slow, not wrong), and the work between two barriers is a sweep's slab
 * or a coarse stage, a fraction of a millisecond. A thread that waits at one barrier for
 * longer than TEAM_CONTENDED seconds marks the team contended: the thread it waits for had
 * no core (another process has it), and C11's standard library has no way to give this
 * one's up on every platform; the caller then runs its next calls on one thread
 * (kernels.Workers). */
#ifndef SINEW_TEAM_H
#define SINEW_TEAM_H

#include <stdatomic.h>
#include <time.h>

#include "sinew_kernels.h"

struct SinewTeam {
    int64_t threads;
    atomic_llong arrived;    /* threads at the current barrier */
    atomic_llong generation; /* barriers passed */
    atomic_int stop;         /* 0, or the error code that stops every thread at its next barrier */
    /* each thread's count for one iteration, by the iteration's parity: a thread writes its
     * slot again only two barriers later, after every thread has read it */
    int64_t held[2][SINEW_MAX_THREADS];
    atomic_int contended;    /* a thread waited longer than TEAM_CONTENDED at a barrier */
    /* each thread's sums of one pass of the strain projection (strain.c), by the pass's parity */
    double sums[2][SINEW_MAX_THREADS][3];
};

/* Records the first error of any thread of the team. */
static inline void team_fail(SinewTeam *tm, int code) {
    int none = 0;
    atomic_compare_exchange_strong(&tm->stop, &none, code);
}

/* s: a wait at one barrier longer than this marks the team contended (a slab's or a stage's
 * work is well under a millisecond; a thread without a core waits a scheduler's time slice). */
#define TEAM_CONTENDED 0.005
/* Spins between two looks at the clock while waiting (a few tens of microseconds). */
#define TEAM_CLOCK_SPINS 4096

/* Seconds on a wall clock (C11's timespec_get), or 0 where it is not available. */
static inline double team_clock(void) {
    struct timespec ts;
    if (timespec_get(&ts, TIME_UTC) != TIME_UTC) return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Waits until every thread of the team has arrived; what each wrote before it arrived is
 * seen by all after. Returns 0, or the code that stopped the team (then the threads leave
 * at once: a cancelled or failed team is set up again before its next run). */
static inline int team_wait(SinewTeam *tm) {
    if (tm->threads > 1) {
        long long gen = atomic_load_explicit(&tm->generation, memory_order_acquire);
        if (atomic_fetch_add_explicit(&tm->arrived, 1, memory_order_acq_rel) == tm->threads - 1) {
            atomic_store_explicit(&tm->arrived, 0, memory_order_relaxed);
            atomic_store_explicit(&tm->generation, gen + 1, memory_order_release);
        } else {
            long long spins = 0;
            double since = -1.0;
            while (atomic_load_explicit(&tm->generation, memory_order_acquire) == gen) {
                if (atomic_load_explicit(&tm->stop, memory_order_relaxed)) break;
                if ((++spins & (TEAM_CLOCK_SPINS - 1)) == 0) {
                    double now = team_clock();
                    if (since < 0.0) since = now;
                    else if (now - since > TEAM_CONTENDED)
                        atomic_store_explicit(&tm->contended, 1, memory_order_relaxed);
                }
            }
        }
    }
    return atomic_load_explicit(&tm->stop, memory_order_acquire);
}

/* The share [*lo, *hi) of n items that thread t of a team of T takes (contiguous blocks). */
static inline void team_share(int64_t n, int64_t t, int64_t T, int64_t *lo, int64_t *hi) {
    *lo = n * t / T;
    *hi = n * (t + 1) / T;
}

#endif
