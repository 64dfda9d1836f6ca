/* A repeated call replayed from a CUDA graph. A training loop calls the
 * edit-attention backward with the same buffers step after step; its plan
 * is a dozen or more kernels on several streams joined by events, and the
 * GPU takes microseconds to pass each event wait and each launch. Captured
 * once into a graph, the call is one launch, the waits become the graph's
 * edges, and the tensor maps are not encoded again. The caller
 * (launch_edit_attention.c) decides when: the second identical call in a
 * row captures, later identical ones replay. */
#include "error.h"
#include "internal.h"

attnbwd_status graph_capture(attnbwd_kernel *k, plan_launch_fn launch, const attnbwd_edit_attention_args *args) {
    drv_device *dev = &k->ctx->dev;
    /* Capture needs a stream of its own: the caller's may be the legacy one,
     * which cannot be captured. */
    attnbwd_status s = k->capture_stream ? ATTNBWD_OK : drv_stream_create(dev, 0, &k->capture_stream);
    if (s != ATTNBWD_OK) return s;
    if ((s = drv_capture_begin(dev, k->capture_stream)) != ATTNBWD_OK) return s;
    attnbwd_status launched = launch(k, args, k->capture_stream);
    void *exec = NULL;
    s = drv_capture_end(dev, k->capture_stream, launched == ATTNBWD_OK, &exec);
    if (launched != ATTNBWD_OK) return launched;
    if (s != ATTNBWD_OK) return s;
    drv_graph_destroy(dev, k->graph_exec);
    k->graph_exec = exec;
    k->graph_args = *args;
    log_line(&k->ctx->log, ATTNBWD_LOG_INFO, "%s: the call captured into a CUDA graph (%d launches)", k->plan.name,
             k->plan.n_launches);
    return ATTNBWD_OK;
}

attnbwd_status graph_replay(attnbwd_kernel *k, void *stream) {
    attnbwd_status s = drv_graph_launch(&k->ctx->dev, k->graph_exec, stream);
    if (s != ATTNBWD_OK) return err_wrap(s, "replaying %s's CUDA graph", k->plan.name);
    k->graph_replays++;
    return s;
}

void graph_free(attnbwd_kernel *k) {
    drv_graph_destroy(&k->ctx->dev, k->graph_exec);
    drv_stream_destroy(&k->ctx->dev, k->capture_stream);
    k->graph_exec = k->capture_stream = NULL;
}
