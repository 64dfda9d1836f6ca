/* Prewarm: build the kernels of many shapes on worker threads (NVRTC compiles
 * in parallel; the Lua state is shared under its mutex), reporting each one to
 * the caller's callback on the calling thread, in order of completion. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "internal.h"

typedef struct job {
    attnbwd_status status;
    char message[1024];
    attnbwd_origin origin;
    double seconds;
} job;

typedef struct prewarm_run {
    attnbwd_ctx *ctx;
    const attnbwd_shape *shapes;
    size_t n, next;
    job *jobs;
    size_t *done_order;  /* indices in order of completion */
    size_t done_count;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} prewarm_run;

static void *worker(void *arg) {
    prewarm_run *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        size_t i = r->next < r->n ? r->next++ : r->n;
        pthread_mutex_unlock(&r->mu);
        if (i == r->n) return NULL;
        job *j = &r->jobs[i];
        double t0 = now_seconds();
        attnbwd_kernel *k = NULL;
        int memory_hit = 0;
        j->status = kernel_get(r->ctx, &r->shapes[i], NULL, &k, &memory_hit);
        j->seconds = now_seconds() - t0;
        if (j->status == ATTNBWD_OK)
            j->origin = memory_hit ? ATTNBWD_FROM_MEMORY : k->origin;
        else
            snprintf(j->message, sizeof j->message, "%s", attnbwd_last_error());
        pthread_mutex_lock(&r->mu);
        r->done_order[r->done_count++] = i;
        pthread_cond_signal(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
}

attnbwd_status attnbwd_prewarm(attnbwd_ctx *ctx, const attnbwd_shape *shapes, size_t n, int threads,
                               attnbwd_progress_fn progress, void *user, attnbwd_prewarm_summary *summary) {
    if (!ctx) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "ctx is NULL");
    if (!shapes && n) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "shapes is NULL but n = %zu", n);
    if (summary) memset(summary, 0, sizeof *summary);
    if (threads <= 0) {
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cores > 0 ? (int)cores : 1;
    }
    if ((size_t)threads > n) threads = n ? (int)n : 1;
    prewarm_run r = {.ctx = ctx, .shapes = shapes, .n = n};
    r.jobs = calloc(n ? n : 1, sizeof *r.jobs);
    r.done_order = calloc(n ? n : 1, sizeof *r.done_order);
    pthread_t *tids = calloc((size_t)threads, sizeof *tids);
    if (!r.jobs || !r.done_order || !tids) {
        free(r.jobs);
        free(r.done_order);
        free(tids);
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory preparing a prewarm of %zu shapes", n);
    }
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    double t0 = now_seconds();
    int started = 0;
    for (; started < threads; ++started)
        if (pthread_create(&tids[started], NULL, worker, &r) != 0) break;
    if (started == 0) worker(&r); /* no thread could start: do it here */

    attnbwd_prewarm_summary sum = {0};
    for (size_t reported = 0; reported < n; ++reported) {
        pthread_mutex_lock(&r.mu);
        while (r.done_count <= reported) pthread_cond_wait(&r.cv, &r.mu);
        size_t i = r.done_order[reported];
        pthread_mutex_unlock(&r.mu);
        job *j = &r.jobs[i];
        if (j->status != ATTNBWD_OK) sum.failed++;
        else if (j->origin == ATTNBWD_FROM_COMPILE) sum.compiled++;
        else if (j->origin == ATTNBWD_FROM_DISK) sum.from_disk++;
        else sum.from_memory++;
        if (progress) {
            attnbwd_prewarm_event ev = {.index = i, .done = reported + 1, .total = n, .shape = &shapes[i],
                                        .status = j->status, .message = j->message, .origin = j->origin,
                                        .seconds = j->seconds};
            progress(&ev, user);
        }
    }
    for (int t = 0; t < started; ++t) pthread_join(tids[t], NULL);
    sum.seconds = now_seconds() - t0;
    if (summary) *summary = sum;

    attnbwd_status s = ATTNBWD_OK;
    for (size_t i = 0; i < n; ++i) {
        if (r.jobs[i].status != ATTNBWD_OK) {
            s = err_set(r.jobs[i].status, "%zu of %zu shapes failed; the first (#%zu): %s", sum.failed, n, i,
                        r.jobs[i].message);
            break;
        }
    }
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
    free(r.jobs);
    free(r.done_order);
    free(tids);
    return s;
}
