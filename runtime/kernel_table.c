/* The memory cache of kernels: an open-addressing hash table from (shape,
 * tile override) to kernel. A slot being built holds NULL; threads that want
 * it wait on `built` instead of building it twice. */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"

struct table_slot {
    int used; /* 0 empty, 1 built or being built, 2 its last build failed */
    attnbwd_shape shape;
    char *override;
    attnbwd_kernel *kernel; /* NULL while being built */
};

void table_init(kernel_table *t) {
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->built, NULL);
}

void table_destroy(kernel_table *t, void (*free_kernel)(attnbwd_kernel *)) {
    for (size_t i = 0; i < t->cap; ++i) {
        if (!t->slots[i].used) continue;
        if (t->slots[i].kernel) free_kernel(t->slots[i].kernel);
        free(t->slots[i].override);
    }
    free(t->slots);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->built);
}

static uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t hash_key(const attnbwd_shape *s, const char *override) {
    uint64_t h = mix(0, (uint64_t)s->problem);
    h = mix(h, (uint64_t)s->batch);
    h = mix(h, (uint64_t)s->heads);
    h = mix(h, (uint64_t)s->seq_len);
    h = mix(h, (uint64_t)s->dropout);
    h = mix(h, (uint64_t)s->precision);
    for (const char *p = override; p && *p; ++p) h = mix(h, (unsigned char)*p);
    return h;
}

static int same_key(const struct table_slot *e, const attnbwd_shape *s, const char *override) {
    if (e->shape.problem != s->problem || e->shape.batch != s->batch || e->shape.heads != s->heads ||
        e->shape.seq_len != s->seq_len || e->shape.dropout != s->dropout ||
        e->shape.precision != s->precision)
        return 0;
    if (!e->override || !override) return e->override == override;
    return strcmp(e->override, override) == 0;
}

static struct table_slot *find(kernel_table *t, const attnbwd_shape *s, const char *override) {
    if (!t->cap) return NULL;
    for (size_t i = hash_key(s, override) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        struct table_slot *e = &t->slots[i];
        if (!e->used) return NULL;
        if (same_key(e, s, override)) return e;
    }
}

/* Keeps the load under one half; slots are never removed, only reused for
 * the same key after a failed build. */
static int grow(kernel_table *t) {
    if (t->cap && (t->len + 1) * 2 <= t->cap) return 1;
    size_t cap = t->cap ? t->cap * 2 : 64;
    struct table_slot *slots = calloc(cap, sizeof *slots);
    if (!slots) return 0;
    for (size_t i = 0; i < t->cap; ++i) {
        struct table_slot *e = &t->slots[i];
        if (!e->used) continue;
        size_t j = hash_key(&e->shape, e->override) & (cap - 1);
        while (slots[j].used) j = (j + 1) & (cap - 1);
        slots[j] = *e;
    }
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 1;
}

attnbwd_status table_get(kernel_table *t, const attnbwd_shape *shape, const char *override,
                         attnbwd_status (*build)(attnbwd_ctx *, const attnbwd_shape *, const char *,
                                                 attnbwd_kernel **),
                         attnbwd_ctx *ctx, attnbwd_kernel **out, int *hit) {
    struct table_slot *e;
    *hit = 0;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        e = find(t, shape, override);
        if (e && e->kernel) {
            *out = e->kernel;
            *hit = 1;
            pthread_mutex_unlock(&t->mu);
            return ATTNBWD_OK;
        }
        if (!e) break;
        if (e->used == 2) {
            /* A failed build left the slot free for a retry: claim it. */
            e->used = 1;
            goto claimed;
        }
        pthread_cond_wait(&t->built, &t->mu); /* another thread is building it */
    }
    if (!grow(t)) {
        pthread_mutex_unlock(&t->mu);
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory growing the kernel table");
    }
    size_t i = hash_key(shape, override) & (t->cap - 1);
    while (t->slots[i].used) i = (i + 1) & (t->cap - 1);
    e = &t->slots[i];
    e->used = 1;
    e->shape = *shape;
    e->override = override ? strdup(override) : NULL;
    e->kernel = NULL;
    t->len++;
    if (override && !e->override) {
        e->used = 2;
        pthread_mutex_unlock(&t->mu);
        return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    }
claimed:;
    attnbwd_shape key_shape = e->shape;
    pthread_mutex_unlock(&t->mu);

    attnbwd_kernel *k = NULL;
    attnbwd_status s = build(ctx, &key_shape, override, &k);

    pthread_mutex_lock(&t->mu);
    e = find(t, &key_shape, override); /* the table may have grown meanwhile */
    if (s == ATTNBWD_OK) e->kernel = k;
    else e->used = 2;                  /* free for the next caller to retry */
    pthread_cond_broadcast(&t->built);
    pthread_mutex_unlock(&t->mu);
    if (s == ATTNBWD_OK) *out = k;
    return s;
}
