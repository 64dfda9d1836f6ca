/* Launch entry of problem 2, the edit-attention backward: the plan's kernels
 * in order on the caller's stream, each argument bound by the name the Lua
 * script gave it (see lua/edit_attention_plan.lua). Reads: grad_output,
 * hidden_states, edit_region_mask, qkv_weight, out_weight, attention_mask,
 * query, key, value, attention_probs, attention_probs_dropped,
 * attention_output, scale, dropout_p; relies on attention_probs_dropped =
 * probs * dropout_mask / (1 - p), so dropout_mask, the biases,
 * edit_region_bias and attention_scores are not read (dropout_p only bounds
 * gS for its fp16 store, tile gs_half). The fused plan (the default) also
 * relies on attention_output = attention_probs_dropped @ value per head, for
 * rowsum(Pd * gPd) = gA . attention_output. */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "internal.h"
#include "pointer_check.h"

size_t attnbwd_edit_attention_workspace(const attnbwd_kernel *k) {
    return k && k->shape.problem == ATTNBWD_EDIT_ATTENTION_BWD ? k->plan.workspace_bytes : 0;
}

/* A named pointer of the args struct: its use (not read; read; written)
 * and its elements (floats) as a function of B and T. */
enum { UNUSED, READ, WRITTEN };
typedef enum { N_NONE, N_BT, N_BT_HIDDEN, N_HEADS_D, N_PROBS, N_QKV_W, N_OUT_W, N_QKV, N_HIDDEN, N_EDIT, N_HEADS } extent;
typedef struct launch_arg launch_arg;
typedef struct named_ptr {
    const char *name;
    size_t offset;
    int use;
    extent n;
} named_ptr;

#define F(field, use, n) {#field, offsetof(attnbwd_edit_attention_args, field), use, n}
static const named_ptr pointers[] = {
    F(grad_output, READ, N_BT_HIDDEN), F(hidden_states, READ, N_BT_HIDDEN), F(edit_region_mask, READ, N_BT),
    F(qkv_weight, READ, N_QKV_W), F(qkv_bias, UNUSED, N_NONE), F(out_weight, READ, N_OUT_W),
    F(out_bias, UNUSED, N_NONE), F(edit_region_bias, UNUSED, N_NONE), F(within_edit_bias, UNUSED, N_NONE),
    F(cross_edit_bias, UNUSED, N_NONE), F(attention_mask, READ, N_BT), F(query, READ, N_HEADS_D),
    F(key, READ, N_HEADS_D), F(value, READ, N_HEADS_D), F(attention_scores, UNUSED, N_NONE),
    F(attention_probs, READ, N_PROBS), F(attention_probs_dropped, READ, N_PROBS),
    F(attention_output, READ, N_BT_HIDDEN), F(dropout_mask, UNUSED, N_NONE),
    F(grad_hidden_states, WRITTEN, N_BT_HIDDEN), F(grad_qkv_weight, WRITTEN, N_QKV_W),
    F(grad_qkv_bias, WRITTEN, N_QKV), F(grad_out_weight, WRITTEN, N_OUT_W), F(grad_out_bias, WRITTEN, N_HIDDEN),
    F(grad_edit_region_bias, WRITTEN, N_EDIT), F(grad_within_edit_bias, WRITTEN, N_HEADS),
    F(grad_cross_edit_bias, WRITTEN, N_HEADS),
};
#undef F
#define N_POINTERS (sizeof pointers / sizeof pointers[0])

static size_t elements(extent n, size_t B, size_t T) {
    switch (n) {
    case N_BT: return B * T;
    case N_BT_HIDDEN: return B * T * 1024;
    case N_HEADS_D: return B * 16 * T * 64;
    case N_PROBS: return B * 16 * T * T;
    case N_QKV_W: return 3072 * 1024;
    case N_OUT_W: return 1024 * 1024;
    case N_QKV: return 3072;
    case N_HIDDEN: return 1024;
    case N_EDIT: return 16 * 1024 * 1024;
    case N_HEADS: return 16;
    default: return 0;
    }
}

static void *field(const attnbwd_edit_attention_args *a, const named_ptr *p) {
    void *v;
    memcpy(&v, (const char *)a + p->offset, sizeof v);
    return v;
}

/* The memory of every pointer the plan reads or writes, the workspace's too. */
static attnbwd_status check_memory(attnbwd_kernel *k, const attnbwd_edit_attention_args *a) {
    arg_range r[N_POINTERS + 1];
    size_t n = 0;
    const size_t B = (size_t)k->shape.batch, T = (size_t)k->shape.seq_len;
    for (size_t i = 0; i < N_POINTERS; ++i)
        if (pointers[i].use != UNUSED)
            r[n++] = (arg_range){pointers[i].name, field(a, &pointers[i]), 4 * elements(pointers[i].n, B, T),
                                 pointers[i].use == WRITTEN};
    if (k->plan.workspace_bytes) r[n++] = (arg_range){"workspace", a->workspace, k->plan.workspace_bytes, 1};
    char shape[64];
    snprintf(shape, sizeof shape, "B=%zu, T=%zu", B, T);
    return pointers_check(k->ctx, r, n, "args->", shape);
}

/* One argument of a launch as the plan spells it, parsed once (see
 * lua/edit_attention_builder.lua): "in:NAME" / "out:NAME" a pointer of the
 * args struct, "ws:BYTES" a workspace offset, "null", "f32:scale", "f32:dropout_p",
 * "f32:one", "i32:N", "i64:N", "tmap:ROWS:COLS:LD:BOX_ROWS:BOX_COLS:SWIZZLE:PTR"
 * a TMA tensor map over the matrix at PTR (an in:, out: or ws: spec),
 * encoded at each launch since the pointer is the caller's. */
typedef enum { ARG_FIELD, ARG_WORKSPACE, ARG_NULL, ARG_SCALE, ARG_DROPOUT_P, ARG_ONE, ARG_I32, ARG_I64, ARG_TMAP } arg_kind;
struct launch_arg {
    arg_kind kind;
    arg_kind base;      /* ARG_TMAP: ARG_FIELD or ARG_WORKSPACE, at offset */
    size_t offset;      /* ARG_FIELD: in the args struct; ARG_WORKSPACE: in the workspace */
    int64_t value;      /* ARG_I32, ARG_I64 */
    uint64_t rows, cols, ld;
    unsigned box_rows, box_cols;
    int swizzle;
};

/* A whole decimal integer in [lo, hi]. */
static int parse_int(const char *text, long long lo, long long hi, long long *v) {
    char *end;
    errno = 0;
    long long x = strtoll(text, &end, 10);
    if (end == text || *end || errno || x < lo || x > hi) return 0;
    *v = x;
    return 1;
}

/* "in:NAME", "out:NAME" or "ws:BYTES": a pointer's kind and offset. */
static int parse_pointer(const char *spec, arg_kind *kind, size_t *offset) {
    long long bytes;
    if (!strncmp(spec, "in:", 3) || !strncmp(spec, "out:", 4)) {
        const char *name = strchr(spec, ':') + 1;
        for (size_t i = 0; i < N_POINTERS; ++i)
            if (!strcmp(pointers[i].name, name)) {
                *kind = ARG_FIELD;
                *offset = pointers[i].offset;
                return 1;
            }
    } else if (!strncmp(spec, "ws:", 3) && parse_int(spec + 3, 0, LLONG_MAX, &bytes)) {
        *kind = ARG_WORKSPACE;
        *offset = (size_t)bytes;
        return 1;
    }
    return 0;
}

static int parse_tensor_map(const char *spec, launch_arg *a) {
    unsigned long long rows, cols, ld;
    int used = 0;
    if (sscanf(spec, "tmap:%llu:%llu:%llu:%u:%u:%d:%n", &rows, &cols, &ld, &a->box_rows, &a->box_cols, &a->swizzle,
               &used) != 6 || !used)
        return 0;
    a->kind = ARG_TMAP;
    a->rows = rows;
    a->cols = cols;
    a->ld = ld;
    return parse_pointer(spec + used, &a->base, &a->offset);
}

static int parse_arg(const char *spec, launch_arg *a) {
    long long v;
    memset(a, 0, sizeof *a);
    if (!strncmp(spec, "tmap:", 5)) return parse_tensor_map(spec, a);
    if (parse_pointer(spec, &a->kind, &a->offset)) return 1;
    if (!strcmp(spec, "null")) a->kind = ARG_NULL;
    else if (!strcmp(spec, "f32:scale")) a->kind = ARG_SCALE;
    else if (!strcmp(spec, "f32:dropout_p")) a->kind = ARG_DROPOUT_P;
    else if (!strcmp(spec, "f32:one")) a->kind = ARG_ONE;
    else if (!strncmp(spec, "i64:", 4) && parse_int(spec + 4, LLONG_MIN, LLONG_MAX, &v)) a->kind = ARG_I64;
    else if (!strncmp(spec, "i32:", 4) && parse_int(spec + 4, INT32_MIN, INT32_MAX, &v)) a->kind = ARG_I32;
    else return 0;
    if (a->kind == ARG_I64 || a->kind == ARG_I32) a->value = v;
    return 1;
}

attnbwd_status edit_attention_parse_args(attnbwd_kernel *k) {
    const kernel_plan *p = &k->plan;
    launch_arg *args = calloc((size_t)p->n_launches * PLAN_MAX_ARGS, sizeof *args);
    if (!args) return err_set(ATTNBWD_ERR_OUT_OF_MEMORY, "out of memory");
    for (int i = 0; i < p->n_launches; ++i)
        for (int a = 0; a < p->launches[i].n_args && a < PLAN_MAX_ARGS; ++a)
            if (!parse_arg(p->launches[i].args[a], &args[i * PLAN_MAX_ARGS + a])) {
                free(args);
                return err_set(ATTNBWD_ERR_LUA,
                               "lua/edit_attention_plan.lua: launch %s has unknown or malformed argument '%s'",
                               p->launches[i].name, p->launches[i].args[a]);
            }
    k->launch_args = args;
    return ATTNBWD_OK;
}

/* One bound argument: storage for its value and the pointer cuLaunchKernel takes. */
typedef union arg_value {
    void *ptr;
    float f32;
    int32_t i32;
    int64_t i64;
    _Alignas(64) unsigned char tensor_map[128];
} arg_value;

static void *pointer_of(const attnbwd_edit_attention_args *args, arg_kind kind, size_t offset) {
    if (kind == ARG_WORKSPACE) return (char *)args->workspace + offset;
    void *v;
    memcpy(&v, (const char *)args + offset, sizeof v);
    return v;
}

static attnbwd_status bind(const attnbwd_edit_attention_args *args, const launch_arg *a, arg_value *v) {
    static const float one = 1.0f;
    switch (a->kind) {
    case ARG_FIELD:
    case ARG_WORKSPACE: v->ptr = pointer_of(args, a->kind, a->offset); break;
    case ARG_NULL: v->ptr = NULL; break;
    case ARG_SCALE: v->f32 = args->scale; break;
    case ARG_DROPOUT_P: v->f32 = args->dropout_p; break;
    case ARG_ONE: v->f32 = one; break;
    case ARG_I32: v->i32 = (int32_t)a->value; break;
    case ARG_I64: v->i64 = a->value; break;
    case ARG_TMAP:
        return drv_tensor_map_2d(v->tensor_map, pointer_of(args, a->base, a->offset), a->rows, a->cols, a->ld,
                                 a->box_rows, a->box_cols, a->swizzle);
    }
    return ATTNBWD_OK;
}

/* One launch of the plan on `stream`, its arguments bound; programmatic: it
 * may be placed before the kernel ahead of it on the stream ends (the
 * plan's kernels wait for that one as they start). */
static attnbwd_status launch_one(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, int i, void *stream,
                                 int programmatic) {
    const plan_launch *l = &k->plan.launches[i];
    const launch_arg *specs = &k->launch_args[i * PLAN_MAX_ARGS];
    arg_value values[PLAN_MAX_ARGS];
    void *argv[PLAN_MAX_ARGS + 1] = {0}; /* NULL after the last: a kernel taking more would find it (tests/fake_cuda does) */
    attnbwd_status s;
    for (int a = 0; a < l->n_args && a < PLAN_MAX_ARGS; ++a) {
        if ((s = bind(args, &specs[a], &values[a])) != ATTNBWD_OK)
            return err_wrap(s, "%s: tensor map '%s'", l->name, l->args[a]);
        argv[a] = &values[a];
    }
    s = drv_launch(&k->ctx->dev, k->functions[i], l->grid, l->block, l->shared_bytes, stream, argv, programmatic);
    return s == ATTNBWD_OK ? s : err_wrap(s, "launching %s", l->name);
}

/* The whole plan on its lanes: our streams fork from the caller's, run
 * their launches after the events each waits on, and join back, so the
 * caller's stream sees one operation that starts after its earlier work and
 * ends after every kernel of the plan (CUDA graph capture follows the same
 * fork and join). Each lane's stream has the priority the plan gives it:
 * lane 0, the chain every output waits on, the greatest, so that its blocks
 * go first when the side lanes' kernels also wait for SMs (or it runs on the
 * caller's stream, where the plan says so or with ATTNBWD_LANE_PRIORITY=0:
 * its first kernel then follows the caller's work with no fork event to wait
 * for, which the GPU took 3-10 us to pass). The joins are queued even
 * after a failed launch, so no stream of ours is left ahead of the caller's. */
static attnbwd_status launch_lanes(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream) {
    drv_device *dev = &k->ctx->dev;
    const kernel_plan *p = &k->plan;
    void *lanes[PLAN_MAX_LANES];
    for (int i = 0; i < p->n_lanes; ++i) lanes[i] = k->lane_streams[i];
    if (!k->ctx->lane_priority || p->lane_priority[0] < 0) lanes[0] = stream;
    const int first = lanes[0] == stream; /* the first lane of ours */
    attnbwd_status s = drv_event_record(dev, k->fork_event, stream);
    for (int lane = first; s == ATTNBWD_OK && lane < p->n_lanes; ++lane)
        s = drv_stream_wait_event(dev, lanes[lane], k->fork_event);
    int forked = s == ATTNBWD_OK;
    for (int i = 0; s == ATTNBWD_OK && i < p->n_launches; ++i) {
        const plan_launch *l = &p->launches[i];
        void *st = lanes[l->lane];
        for (int w = 0; s == ATTNBWD_OK && w < l->n_waits; ++w) s = drv_stream_wait_event(dev, st, k->events[l->waits[w]]);
        if (s == ATTNBWD_OK) s = launch_one(k, args, i, st, l->pdl);
        if (s == ATTNBWD_OK && l->signal >= 0) s = drv_event_record(dev, k->events[l->signal], st);
    }
    for (int lane = first; forked && lane < p->n_lanes; ++lane) {
        attnbwd_status j = drv_event_record(dev, k->join_events[lane], lanes[lane]);
        if (j == ATTNBWD_OK) j = drv_stream_wait_event(dev, stream, k->join_events[lane]);
        if (s == ATTNBWD_OK) s = j;
    }
    return s;
}

/* The plan as the context runs it: on its lanes, or in plan order on the
 * caller's stream. Under launch_mu: the events are the kernel's, one
 * sequence at a time. */
static attnbwd_status launch_plan(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream) {
    if (k->plan.n_lanes > 1 && !k->ctx->one_stream) return launch_lanes(k, args, stream);
    return edit_attention_launch_range(k, args, stream, 0, k->plan.n_launches);
}

/* Every field the launches read, compared by value (not the struct's bytes:
 * its padding may differ between two calls of the same arguments). */
static int same_call(const attnbwd_edit_attention_args *a, const attnbwd_edit_attention_args *b) {
    for (size_t i = 0; i < N_POINTERS; ++i)
        if (field(a, &pointers[i]) != field(b, &pointers[i])) return 0;
    return !memcmp(&a->scale, &b->scale, sizeof a->scale) && !memcmp(&a->dropout_p, &b->dropout_p, sizeof a->dropout_p) &&
           a->workspace == b->workspace && a->workspace_bytes == b->workspace_bytes;
}

/* The call, from the kernel's CUDA graph where the same arguments came
 * before (call_graph.c): the first call of a set of arguments runs the plan
 * directly, the second captures it and replays the graph, later ones only
 * replay. Not while the caller's stream is itself being captured (the
 * caller's graph takes the launches), nor with ATTNBWD_GRAPHS=0. */
static attnbwd_status call_locked(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream) {
    /* The memory is asked about once for a set of arguments: a training
     * loop's repeated calls (and the graph's replays) pay nothing for it. */
    if (!k->have_checked || !same_call(args, &k->checked_args)) {
        attnbwd_status s = check_memory(k, args);
        if (s != ATTNBWD_OK) return s;
        k->checked_args = *args;
        k->have_checked = 1;
    }
    int capturing = 1;
    if (k->ctx->graphs && !k->graph_failed && drv_stream_capturing(&k->ctx->dev, stream, &capturing) == ATTNBWD_OK &&
        !capturing) {
        if (k->graph_exec && same_call(args, &k->graph_args)) return graph_replay(k, stream);
        if (k->have_last && same_call(args, &k->last_args)) {
            attnbwd_status s = graph_capture(k, launch_plan, args);
            if (s == ATTNBWD_OK) return graph_replay(k, stream);
            /* Never again for this kernel: the direct launches still work. */
            k->graph_failed = 1;
            log_line(&k->ctx->log, ATTNBWD_LOG_WARN, "%s: no CUDA graph (%s); launching directly", k->plan.name,
                     attnbwd_last_error());
        }
    }
    err_clear(); /* a stream the driver could not ask about is not an error of this call */
    k->last_args = *args;
    k->have_last = 1;
    return launch_plan(k, args, stream);
}

attnbwd_status attnbwd_edit_attention_bwd(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream) {
    if (!k) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "kernel is NULL");
    if (!args) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "args is NULL");
    if (k->shape.problem != ATTNBWD_EDIT_ATTENTION_BWD || !k->plan.n_launches)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "kernel %s is not an edit-attention backward kernel", k->plan.name);
    for (size_t i = 0; i < N_POINTERS; ++i) {
        void *p = field(args, &pointers[i]);
        if (pointers[i].use != UNUSED && !p) return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "args->%s is NULL", pointers[i].name);
        if (p && (uintptr_t)p % k->plan.align)
            return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "args->%s = %p is not %u-byte aligned, as this kernel's loads need",
                           pointers[i].name, p, k->plan.align);
    }
    if (!(args->dropout_p >= 0.0f && args->dropout_p < 1.0f))
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "args->dropout_p = %g: must be in [0, 1)", (double)args->dropout_p);
    if (args->workspace_bytes < k->plan.workspace_bytes || (k->plan.workspace_bytes && !args->workspace) ||
        (uintptr_t)args->workspace % 256)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT,
                       "args->workspace: %zu bytes at %p; the kernel needs %zu bytes, 256-byte aligned "
                       "(attnbwd_edit_attention_workspace)", args->workspace_bytes, args->workspace,
                       k->plan.workspace_bytes);
    attnbwd_status s = kernel_ensure_loaded(k);
    if (s != ATTNBWD_OK) return s;
    pthread_mutex_lock(&k->launch_mu);
    s = call_locked(k, args, stream);
    pthread_mutex_unlock(&k->launch_mu);
    return s;
}

attnbwd_status edit_attention_launch_range(attnbwd_kernel *k, const attnbwd_edit_attention_args *args, void *stream,
                                           int first, int count) {
    if (first < 0 || count < 0 || first + count > k->plan.n_launches)
        return err_set(ATTNBWD_ERR_INVALID_ARGUMENT, "launches [%d, %d) of %d", first, first + count,
                       k->plan.n_launches);
    attnbwd_status s = kernel_ensure_loaded(k);
    if (s != ATTNBWD_OK) return s;
    /* Plan order on the caller's stream meets every wait of the lanes; a
     * pdl launch then follows whichever kernel of the plan is ahead of it. */
    for (int i = first; s == ATTNBWD_OK && i < first + count; ++i)
        s = launch_one(k, args, i, stream, i > first && k->plan.launches[i].pdl);
    return s;
}
