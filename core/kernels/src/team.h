/* The team's barrier (team.c has the entry points). Threads spin at a barrier: by default a
 * team has no more threads than the machine has CPUs (kernels.thread_count; more, set by
 * SINEW_THREADS, is slow, not wrong), and the work between two barriers is a sweep's slab
 * or a coarse stage, a fraction of a millisecond. A thread that waits at one barrier for
 * longer than TEAM_CONTENDED seconds marks the team contended, once per such barrier: the
 * thread it waits for had no core (another process has it), and C11's standard library has
 * no way to give this one's up on every platform; the caller then runs its next calls on one
 * thread, the longer the more barriers were marked (kernels.Workers): one preempted
 * barrier, or a busy machine that takes a partner's core at every one. */
#ifndef SINEW_TEAM_H
#define SINEW_TEAM_H

#include <stdatomic.h>
#include <time.h>

#include "sinew_kernels.h"

/* The most values a thread hands the others in one team_exchange. */
#define TEAM_ROW 3

struct SinewTeam {
    int64_t threads;
    atomic_llong arrived;    /* threads at the current barrier */
    atomic_llong generation; /* barriers passed */
    atomic_int stop;         /* 0, or the error code that stops every thread at its next barrier */
    atomic_int contended;    /* barriers at which a thread waited longer than TEAM_CONTENDED */
    /* each thread's row of values handed to the others (team_exchange), by the parity of
     * the exchange */
    double rows[2][SINEW_MAX_THREADS][TEAM_ROW];
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
            int marked = 0;
            while (atomic_load_explicit(&tm->generation, memory_order_acquire) == gen) {
                if (atomic_load_explicit(&tm->stop, memory_order_relaxed)) break;
                if (!marked && (++spins & (TEAM_CLOCK_SPINS - 1)) == 0) {
                    double now = team_clock();
                    if (since < 0.0) since = now;
                    else if (now - since > TEAM_CONTENDED) {
                        atomic_fetch_add_explicit(&tm->contended, 1, memory_order_relaxed);
                        marked = 1;
                    }
                }
            }
        }
    }
    return atomic_load_explicit(&tm->stop, memory_order_acquire);
}

/* Thread `thread` hands its k values v (k <= TEAM_ROW) to the others and waits for theirs:
 * afterwards every thread reads the team's rows, tm->rows[parity & 1][t] for each thread t,
 * and adds them up alike. parity alternates from one exchange to the next, so a thread
 * writes a row again only after a barrier that every thread passes once it has read it (the
 * work between two exchanges holds at least one). Returns 0, or the code that stopped the
 * team. */
static inline int team_exchange(SinewTeam *tm, int64_t thread, int64_t parity, const double *v, int k) {
    double *row = tm->rows[parity & 1][thread];
    for (int a = 0; a < k; ++a) row[a] = v[a];
    return team_wait(tm);
}

/* The share [*lo, *hi) of n items that thread t of a team of T takes (contiguous blocks). */
static inline void team_share(int64_t n, int64_t t, int64_t T, int64_t *lo, int64_t *hi) {
    *lo = n * t / T;
    *hi = n * (t + 1) / T;
}

#endif
