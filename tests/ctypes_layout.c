/* Prints the layout of the public structs that python/attnbwd/binding.py binds,
 * as the C compiler lays them out: "struct NAME SIZE", then "field NAME
 * OFFSET" for each member in order; and "const NAME VALUE" for every enum
 * value and integer macro of the header. tests/check_ctypes_layout.py
 * compares, and checks that every struct and constant the header declares
 * is printed here. */
#include <stddef.h>
#include <stdio.h>

#include "attnbwd.h"

#define STRUCT(t) printf("struct %s %zu\n", #t, sizeof(t))
#define FIELD(t, f) printf("field %s %zu\n", #f, offsetof(t, f))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))

int main(void) {
    STRUCT(attnbwd_options);
    FIELD(attnbwd_options, device);
    FIELD(attnbwd_options, cache_dir);
    FIELD(attnbwd_options, disk_cache);
    FIELD(attnbwd_options, arch);
    FIELD(attnbwd_options, log_level);
    FIELD(attnbwd_options, log_fn);
    FIELD(attnbwd_options, log_user);
    FIELD(attnbwd_options, deterministic);
    FIELD(attnbwd_options, cache_max_bytes);
    FIELD(attnbwd_options, gpu_model);

    STRUCT(attnbwd_shape);
    FIELD(attnbwd_shape, problem);
    FIELD(attnbwd_shape, batch);
    FIELD(attnbwd_shape, heads);
    FIELD(attnbwd_shape, seq_len);
    FIELD(attnbwd_shape, dropout);
    FIELD(attnbwd_shape, precision);

    STRUCT(attnbwd_kernel_info);
    FIELD(attnbwd_kernel_info, shape);
    FIELD(attnbwd_kernel_info, name);
    FIELD(attnbwd_kernel_info, arch);
    FIELD(attnbwd_kernel_info, grid);
    FIELD(attnbwd_kernel_info, block);
    FIELD(attnbwd_kernel_info, shared_bytes);
    FIELD(attnbwd_kernel_info, tiles);
    FIELD(attnbwd_kernel_info, cache_key);
    FIELD(attnbwd_kernel_info, origin);
    FIELD(attnbwd_kernel_info, build_seconds);
    FIELD(attnbwd_kernel_info, cubin_bytes);
    FIELD(attnbwd_kernel_info, unordered_outputs);

    STRUCT(attnbwd_edit_attention_args);
    FIELD(attnbwd_edit_attention_args, grad_output);
    FIELD(attnbwd_edit_attention_args, hidden_states);
    FIELD(attnbwd_edit_attention_args, edit_region_mask);
    FIELD(attnbwd_edit_attention_args, qkv_weight);
    FIELD(attnbwd_edit_attention_args, qkv_bias);
    FIELD(attnbwd_edit_attention_args, out_weight);
    FIELD(attnbwd_edit_attention_args, out_bias);
    FIELD(attnbwd_edit_attention_args, edit_region_bias);
    FIELD(attnbwd_edit_attention_args, within_edit_bias);
    FIELD(attnbwd_edit_attention_args, cross_edit_bias);
    FIELD(attnbwd_edit_attention_args, attention_mask);
    FIELD(attnbwd_edit_attention_args, query);
    FIELD(attnbwd_edit_attention_args, key);
    FIELD(attnbwd_edit_attention_args, value);
    FIELD(attnbwd_edit_attention_args, attention_scores);
    FIELD(attnbwd_edit_attention_args, attention_probs);
    FIELD(attnbwd_edit_attention_args, attention_probs_dropped);
    FIELD(attnbwd_edit_attention_args, attention_output);
    FIELD(attnbwd_edit_attention_args, dropout_mask);
    FIELD(attnbwd_edit_attention_args, scale);
    FIELD(attnbwd_edit_attention_args, dropout_p);
    FIELD(attnbwd_edit_attention_args, grad_hidden_states);
    FIELD(attnbwd_edit_attention_args, grad_qkv_weight);
    FIELD(attnbwd_edit_attention_args, grad_qkv_bias);
    FIELD(attnbwd_edit_attention_args, grad_out_weight);
    FIELD(attnbwd_edit_attention_args, grad_out_bias);
    FIELD(attnbwd_edit_attention_args, grad_edit_region_bias);
    FIELD(attnbwd_edit_attention_args, grad_within_edit_bias);
    FIELD(attnbwd_edit_attention_args, grad_cross_edit_bias);
    FIELD(attnbwd_edit_attention_args, workspace);
    FIELD(attnbwd_edit_attention_args, workspace_bytes);

    STRUCT(attnbwd_prewarm_event);
    FIELD(attnbwd_prewarm_event, index);
    FIELD(attnbwd_prewarm_event, done);
    FIELD(attnbwd_prewarm_event, total);
    FIELD(attnbwd_prewarm_event, shape);
    FIELD(attnbwd_prewarm_event, status);
    FIELD(attnbwd_prewarm_event, message);
    FIELD(attnbwd_prewarm_event, origin);
    FIELD(attnbwd_prewarm_event, seconds);

    STRUCT(attnbwd_prewarm_summary);
    FIELD(attnbwd_prewarm_summary, compiled);
    FIELD(attnbwd_prewarm_summary, from_disk);
    FIELD(attnbwd_prewarm_summary, from_memory);
    FIELD(attnbwd_prewarm_summary, failed);
    FIELD(attnbwd_prewarm_summary, seconds);

    STRUCT(attnbwd_ctx_info);
    FIELD(attnbwd_ctx_info, library_version);
    FIELD(attnbwd_ctx_info, nvrtc_major);
    FIELD(attnbwd_ctx_info, nvrtc_minor);
    FIELD(attnbwd_ctx_info, driver_version);
    FIELD(attnbwd_ctx_info, driver_error);
    FIELD(attnbwd_ctx_info, device_name);
    FIELD(attnbwd_ctx_info, arch);
    FIELD(attnbwd_ctx_info, cache_dir);
    FIELD(attnbwd_ctx_info, disk_cache);
    FIELD(attnbwd_ctx_info, cache_bytes);
    FIELD(attnbwd_ctx_info, cache_entries);
    FIELD(attnbwd_ctx_info, device);
    FIELD(attnbwd_ctx_info, deterministic);
    FIELD(attnbwd_ctx_info, gpu_model);
    FIELD(attnbwd_ctx_info, gpu_model_from);
    FIELD(attnbwd_ctx_info, gpu_sm_count);
    FIELD(attnbwd_ctx_info, tuning_table);
    FIELD(attnbwd_ctx_info, tuning_note);
    FIELD(attnbwd_ctx_info, cache_mode);
    FIELD(attnbwd_ctx_info, cache_read);
    FIELD(attnbwd_ctx_info, user_tuning_table);

    STRUCT(attnbwd_cache_stats);
    FIELD(attnbwd_cache_stats, entries);
    FIELD(attnbwd_cache_stats, bytes);
    FIELD(attnbwd_cache_stats, max_bytes);
    FIELD(attnbwd_cache_stats, hits);
    FIELD(attnbwd_cache_stats, misses);
    FIELD(attnbwd_cache_stats, evicted);
    FIELD(attnbwd_cache_stats, evicted_bytes);
    FIELD(attnbwd_cache_stats, since);

    STRUCT(attnbwd_cache_entry);
    FIELD(attnbwd_cache_entry, key);
    FIELD(attnbwd_cache_entry, bytes);
    FIELD(attnbwd_cache_entry, last_use);
    FIELD(attnbwd_cache_entry, problem);
    FIELD(attnbwd_cache_entry, current);
    FIELD(attnbwd_cache_entry, library_version);
    FIELD(attnbwd_cache_entry, nvrtc_version);
    FIELD(attnbwd_cache_entry, arch);
    FIELD(attnbwd_cache_entry, kernel);
    FIELD(attnbwd_cache_entry, tiles);
    FIELD(attnbwd_cache_entry, has_shape);
    FIELD(attnbwd_cache_entry, shape);
    FIELD(attnbwd_cache_entry, gpu_model);

    CONST(ATTNBWD_VERSION_MAJOR);
    CONST(ATTNBWD_VERSION_MINOR);
    CONST(ATTNBWD_VERSION_PATCH);
    CONST(ATTNBWD_OK);
    CONST(ATTNBWD_ERR_INVALID_ARGUMENT);
    CONST(ATTNBWD_ERR_UNSUPPORTED);
    CONST(ATTNBWD_ERR_OUT_OF_MEMORY);
    CONST(ATTNBWD_ERR_LUA);
    CONST(ATTNBWD_ERR_COMPILE);
    CONST(ATTNBWD_ERR_CACHE);
    CONST(ATTNBWD_ERR_NO_DRIVER);
    CONST(ATTNBWD_ERR_NO_DEVICE);
    CONST(ATTNBWD_ERR_CUDA);
    CONST(ATTNBWD_ERR_IO);
    CONST(ATTNBWD_SOFTMAX_DROPOUT_BWD);
    CONST(ATTNBWD_EDIT_ATTENTION_BWD);
    CONST(ATTNBWD_LOG_QUIET);
    CONST(ATTNBWD_LOG_WARN);
    CONST(ATTNBWD_LOG_INFO);
    CONST(ATTNBWD_LOG_DEBUG);
    CONST(ATTNBWD_DEVICE_CURRENT);
    CONST(ATTNBWD_PRECISION_TF32);
    CONST(ATTNBWD_PRECISION_FP32);
    CONST(ATTNBWD_PRECISION_FP16);
    CONST(ATTNBWD_FROM_COMPILE);
    CONST(ATTNBWD_FROM_DISK);
    CONST(ATTNBWD_FROM_MEMORY);
    CONST(ATTNBWD_DISK_CACHE_READ_ONLY);
    CONST(ATTNBWD_CACHE_DEFAULT_MAX_BYTES);
    CONST(ATTNBWD_CACHE_VERIFY);
    printf("string ATTNBWD_VERSION_STRING %s\n", ATTNBWD_VERSION_STRING);
    return 0;
}
