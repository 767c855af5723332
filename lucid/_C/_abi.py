"""The engine's C ABI as ctypes declarations, generated from include/lucid.h by
tools/gen_abi.py; do not edit (change the header and run the tool)."""

from ctypes import (POINTER, c_char_p, c_double, c_float, c_int32, c_int64, c_uint32, c_uint64,  # noqa: F401
                    c_void_p)

# name: ([argument types], return type)
SIGNATURES = {
    "lucid_last_error": ([], c_char_p),
    "guard_create": ([c_int32, c_int32, c_int32, POINTER(c_uint64)], c_int32),
    "guard_destroy": ([c_uint64], c_int32),
    "lucid_autocast_override": ([c_uint64, c_char_p, c_int32], c_int32),
    "lucid_autocast_effective_policy": ([c_int32, c_char_p, POINTER(c_int32)], c_int32),
    "lucid_amp_inspect_begin": ([POINTER(c_uint64)], c_int32),
    "lucid_amp_inspect_set_module": ([c_char_p], c_int32),
    "lucid_amp_inspect_end": ([c_uint64, POINTER(c_int64)], c_int32),
    "lucid_amp_inspect_entry": ([c_int64, POINTER(c_char_p), POINTER(c_char_p), POINTER(c_int32), POINTER(c_int32), POINTER(c_int64), POINTER(c_double), POINTER(c_int32), POINTER(c_char_p)], c_int32),
    "lucid_autocast_is_enabled": ([c_int32, POINTER(c_int32)], c_int32),
    "lucid_autocast_get_dtype": ([c_int32, POINTER(c_int32)], c_int32),
    "lucid_autocast_live_guards": ([POINTER(c_int64)], c_int32),
    "lucid_autocast_cached_casts": ([POINTER(c_int64)], c_int32),
    "lucid_autocast_is_cache_enabled": ([POINTER(c_int32)], c_int32),
    "lucid_autocast_set_cache_enabled": ([c_int32, POINTER(c_int32)], c_int32),
    "lucid_autocast_default_dtype": ([c_int32, POINTER(c_int32)], c_int32),
    "lucid_autocast_check_dtype": ([c_int32, c_int32], c_int32),
    "lucid_dtype_info": ([c_int32, POINTER(c_char_p), POINTER(c_int32), POINTER(c_int32)], c_int32),
    "lucid_device_info": ([c_int32, POINTER(c_char_p)], c_int32),
    "lucid_op_count": ([POINTER(c_int32)], c_int32),
    "lucid_op_info": ([c_int32, POINTER(c_char_p), POINTER(c_int32), POINTER(c_int32)], c_int32),
    "lucid_tensor_from_host": ([c_void_p, c_int64, POINTER(c_int64), c_int32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_tensor_full": ([POINTER(c_int64), c_int32, c_double, c_int64, c_int32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_tensor_arange": ([c_double, c_double, c_double, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_tensor_arange_int": ([c_int64, c_int64, c_int64, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_tensor_random": ([POINTER(c_int64), c_int32, c_int32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_manual_seed": ([c_uint64], c_int32),
    "lucid_tensor_release": ([c_uint32], c_int32),
    "lucid_tensor_release_many": ([POINTER(c_uint32), c_int32], c_int32),
    "lucid_tensor_meta": ([c_uint32, POINTER(c_int32), POINTER(c_int32), POINTER(c_int32), POINTER(c_int32)], c_int32),
    "lucid_tensor_shape": ([c_uint32, POINTER(c_int64), POINTER(c_int64), c_int32], c_int32),
    "lucid_tensor_record": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_tensor_to_host": ([c_uint32, c_void_p, c_int64], c_int32),
    "lucid_tensor_to": ([c_uint32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_tensor_set_requires_grad": ([c_uint32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_detach": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_data": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_clone": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_assign": ([c_uint32, c_uint32, c_int32, c_char_p, POINTER(c_int32)], c_int32),
    "lucid_fill": ([c_uint32, c_double, c_int64, c_int32, c_char_p, POINTER(c_int32)], c_int32),
    "lucid_set_data": ([c_uint32, c_uint32], c_int32),
    "lucid_binary_inplace": ([c_int32, c_uint32, c_uint32, c_double, c_char_p], c_int32),
    "lucid_binary_scalar_inplace": ([c_int32, c_uint32, c_double, c_int64, c_int32, c_char_p], c_int32),
    "lucid_unary_inplace": ([c_int32, c_uint32, c_char_p], c_int32),
    "lucid_set_element": ([c_uint32, c_int32, c_int64, c_int64, c_int64, c_int64, c_double, c_int64, c_int32], c_int32),
    "lucid_write_at": ([c_uint32, POINTER(c_int32), POINTER(c_int64), POINTER(c_int32), POINTER(c_uint32), c_int32, c_uint32, c_double, c_int64, c_int32, c_char_p, POINTER(c_int32)], c_int32),
    "lucid_live_tensors": ([POINTER(c_int64)], c_int32),
    "lucid_memory_stats": ([c_int32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_reset_peak_memory_stats": ([c_int32], c_int32),
    "lucid_empty_cache": ([POINTER(c_int64)], c_int32),
    "lucid_set_num_threads": ([c_int64], c_int32),
    "lucid_get_num_threads": ([POINTER(c_int64)], c_int32),
    "lucid_threads_contended": ([POINTER(c_int32)], c_int32),
    "lucid_cpu_capability": ([POINTER(c_char_p)], c_int32),
    "lucid_binary": ([c_int32, c_uint32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_binary_scalar": ([c_int32, c_uint32, c_double, c_int64, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_unary": ([c_int32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_bitwise_not": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_matmul": ([c_uint32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_linear": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_reduce": ([c_int32, c_uint32, POINTER(c_int64), c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_reshape": ([c_uint32, POINTER(c_int64), c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_transpose": ([c_uint32, c_int64, c_int64, POINTER(c_int64)], c_int32),
    "lucid_permute": ([c_uint32, POINTER(c_int64), c_int32, POINTER(c_int64)], c_int32),
    "lucid_contiguous": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_compare": ([c_int32, c_uint32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_compare_scalar": ([c_int32, c_uint32, c_double, c_int64, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_where": ([c_uint32, c_uint32, c_uint32, c_double, c_int64, c_int32, c_double, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_clamp": ([c_uint32, c_int32, c_double, c_int64, c_int32, c_int32, c_double, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_var": ([c_uint32, POINTER(c_int64), c_int32, c_double, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_max_dim": ([c_uint32, c_int64, c_int32, c_int32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_argmax": ([c_uint32, c_int64, c_int32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_squeeze": ([c_uint32, POINTER(c_int64), c_int32, POINTER(c_int64)], c_int32),
    "lucid_unsqueeze": ([c_uint32, c_int64, POINTER(c_int64)], c_int32),
    "lucid_expand": ([c_uint32, POINTER(c_int64), c_int32, POINTER(c_int64)], c_int32),
    "lucid_flatten": ([c_uint32, c_int64, c_int64, POINTER(c_int64)], c_int32),
    "lucid_narrow": ([c_uint32, c_int64, c_int64, c_int64, POINTER(c_int64)], c_int32),
    "lucid_diagonal": ([c_uint32, c_int64, c_int64, c_int64, POINTER(c_int64)], c_int32),
    "lucid_as_strided": ([c_uint32, POINTER(c_int64), POINTER(c_int64), c_int32, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_storage_offset": ([c_uint32, POINTER(c_int64)], c_int32),
    "lucid_is_contiguous": ([c_uint32, POINTER(c_int32)], c_int32),
    "lucid_wrap_dim": ([c_int64, c_int32, c_char_p, POINTER(c_int64)], c_int32),
    "lucid_cat": ([POINTER(c_uint32), c_int32, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_split": ([c_uint32, c_int32, POINTER(c_int64), c_int32, c_int64, POINTER(c_uint32), c_int32, POINTER(c_int32)], c_int32),
    "lucid_index": ([c_uint32, POINTER(c_int32), POINTER(c_int64), POINTER(c_int32), POINTER(c_uint32), c_int32, POINTER(c_int64)], c_int32),
    "lucid_index_put": ([c_uint32, POINTER(c_int32), POINTER(c_int64), POINTER(c_int32), POINTER(c_uint32), c_int32, c_uint32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_index_put_inplace": ([c_uint32, POINTER(c_int32), POINTER(c_int64), POINTER(c_int32), POINTER(c_uint32), c_int32, c_uint32, c_int32, c_char_p, POINTER(c_int32)], c_int32),
    "lucid_gather": ([c_uint32, c_int64, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_index_select": ([c_uint32, c_int64, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_embedding": ([c_uint32, c_uint32, c_int32, c_int64, POINTER(c_int64)], c_int32),
    "lucid_softmax": ([c_uint32, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_dropout": ([c_uint32, c_double, c_int32, POINTER(c_int64)], c_int32),
    "lucid_leaky_relu": ([c_uint32, c_double, POINTER(c_int64)], c_int32),
    "lucid_lstm_cell": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_lstm_layer": ([c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_int32, POINTER(c_int64), POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_gru_cell": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64)], c_int32),
    "lucid_gru_layer": ([c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_int32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_rnn_layer": ([c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_int32, c_int32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_layer_norm": ([c_uint32, POINTER(c_int64), c_int32, c_uint32, c_uint32, c_double, POINTER(c_int64)], c_int32),
    "lucid_group_norm": ([c_uint32, c_int64, c_uint32, c_uint32, c_double, POINTER(c_int64)], c_int32),
    "lucid_batch_norm": ([c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_int32, c_double, c_double, POINTER(c_uint32), POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_conv2d": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_conv1d": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_conv_transpose2d": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_max_pool2d": ([c_uint32, POINTER(c_int64), c_int32, POINTER(c_int64)], c_int32),
    "lucid_avg_pool2d": ([c_uint32, POINTER(c_int64), c_int32, c_int32, c_int64, POINTER(c_int64)], c_int32),
    "lucid_adaptive_avg_pool2d": ([c_uint32, c_int64, c_int64, POINTER(c_int64)], c_int32),
    "lucid_attention": ([c_uint32, c_uint32, c_uint32, c_uint32, c_int32, c_int32, c_double, c_double, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_pointwise_loss": ([c_int32, c_uint32, c_uint32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_nll_loss": ([c_uint32, c_uint32, c_uint32, c_int64, c_int32, POINTER(c_int64)], c_int32),
    "lucid_cross_entropy": ([c_uint32, c_uint32, c_uint32, c_int64, c_int32, c_double, POINTER(c_int64)], c_int32),
    "lucid_binary_cross_entropy": ([c_uint32, c_uint32, c_uint32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_bce_with_logits": ([c_uint32, c_uint32, c_uint32, c_uint32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_backward": ([c_uint32, c_uint32, c_int32], c_int32),
    "lucid_custom_function_callbacks": ([c_void_p, c_void_p], c_int32),
    "lucid_custom_function_record": ([c_char_p, POINTER(c_uint32), c_int32, c_uint32, c_uint64, POINTER(c_uint32)], c_int32),
    "lucid_tensor_grad": ([c_uint32, POINTER(c_uint32)], c_int32),
    "lucid_tensor_set_grad": ([c_uint32, c_uint32], c_int32),
    "lucid_tensor_grad_fn": ([c_uint32, POINTER(c_char_p)], c_int32),
    "lucid_set_grad_enabled": ([c_int32, POINTER(c_int32)], c_int32),
    "lucid_is_grad_enabled": ([POINTER(c_int32)], c_int32),
    "lucid_hook_callbacks": ([c_void_p, c_void_p], c_int32),
    "lucid_tensor_register_hook": ([c_uint32, c_int32, c_uint64, POINTER(c_uint64)], c_int32),
    "lucid_hook_remove": ([c_uint64, POINTER(c_int32)], c_int32),
    "lucid_tensor_retain_grad": ([c_uint32], c_int32),
    "lucid_tensor_retains_grad": ([c_uint32, POINTER(c_int32)], c_int32),
    "lucid_autograd_backward": ([POINTER(c_uint32), POINTER(c_uint32), c_int32, POINTER(c_uint32), c_int32, c_int32], c_int32),
    "lucid_autograd_grad": ([POINTER(c_uint32), POINTER(c_uint32), c_int32, POINTER(c_uint32), c_int32, c_int32, c_int32, POINTER(c_uint32)], c_int32),
    "lucid_sgd_step": ([c_uint32, c_uint32, c_uint32, c_uint32, c_double, c_double, c_double, c_double, c_int32, c_int32, POINTER(c_uint32)], c_int32),
    "lucid_adam_step": ([c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_uint32, c_double, c_double, c_double, c_double, c_double, c_int32, c_int32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_unscale_grads": ([POINTER(c_uint32), c_int32, c_uint32, c_uint32], c_int32),
    "lucid_update_scale": ([c_uint32, c_uint32, c_uint32, c_double, c_double, c_int64], c_int32),
    "lucid_safetensors_read": ([c_void_p, c_int64, POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_safetensors_declared_size": ([c_void_p, c_int64, POINTER(c_int64)], c_int32),
    "lucid_safetensors_tensor": ([c_int64, POINTER(c_char_p), POINTER(c_char_p), POINTER(c_int64), c_int32, POINTER(c_int32), POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_safetensors_metadata": ([c_int64, POINTER(c_char_p), POINTER(c_char_p)], c_int32),
    "lucid_safetensors_write": ([POINTER(c_char_p), POINTER(c_char_p), POINTER(c_int32), POINTER(c_int64), POINTER(c_void_p), POINTER(c_int64), c_int32, POINTER(c_char_p), POINTER(c_char_p), c_int32, c_void_p, c_int64, POINTER(c_int64)], c_int32),
    "lucid_metal_is_available": ([POINTER(c_int32)], c_int32),
    "lucid_metal_synchronize": ([], c_int32),
    "lucid_metal_fallback_entries": ([POINTER(c_int64)], c_int32),
    "lucid_metal_fallback_entry": ([c_int64, POINTER(c_char_p), POINTER(c_int64)], c_int32),
    "lucid_metal_self_test": ([POINTER(c_int64), POINTER(c_int64)], c_int32),
    "lucid_metal_self_test_entry": ([c_int64, POINTER(c_char_p), POINTER(c_int32), POINTER(c_double), POINTER(c_double), POINTER(c_char_p)], c_int32),
    "lucid_metal_stats": ([POINTER(c_int64), c_int32], c_int32),
    "lucid_metal_dispatch_entry": ([c_int64, POINTER(c_char_p), POINTER(c_int64)], c_int32),
    "lucid_metal_libraries": ([POINTER(c_int64)], c_int32),
    "lucid_metal_library_entry": ([c_int64, POINTER(c_char_p), POINTER(c_char_p), POINTER(c_char_p), POINTER(c_char_p)], c_int32),
    "lucid_set_warning_handler": ([c_void_p], c_int32),
    "lucid_linalg_lu_factor": ([c_uint32, c_int32, POINTER(c_uint32), POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_solve_triangular": ([c_uint32, c_uint32, c_int32, c_int32, c_int32, POINTER(c_int64)], c_int32),
    "lucid_linalg_cholesky": ([c_uint32, c_int32, c_int32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_eigh": ([c_uint32, c_int32, c_int32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_svd": ([c_uint32, c_int32, c_int32, POINTER(c_uint32), POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_qr": ([c_uint32, c_int32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_geqrf": ([c_uint32, POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_ldl_factor": ([c_uint32, c_int32, POINTER(c_uint32), POINTER(c_uint32), POINTER(c_uint32)], c_int32),
    "lucid_linalg_ldl_solve": ([c_uint32, c_uint32, c_uint32, POINTER(c_int64)], c_int32),
}

# Entry points whose arguments are all 32-bit integers or data pointers: called without
# argtypes, so nothing is converted per call (tools/gen_abi.py, unconverted).
UNCONVERTED = frozenset({
    "lucid_last_error",
    "guard_create",
    "lucid_autocast_effective_policy",
    "lucid_amp_inspect_begin",
    "lucid_amp_inspect_set_module",
    "lucid_autocast_is_enabled",
    "lucid_autocast_get_dtype",
    "lucid_autocast_live_guards",
    "lucid_autocast_cached_casts",
    "lucid_autocast_is_cache_enabled",
    "lucid_autocast_set_cache_enabled",
    "lucid_autocast_default_dtype",
    "lucid_autocast_check_dtype",
    "lucid_dtype_info",
    "lucid_device_info",
    "lucid_op_count",
    "lucid_op_info",
    "lucid_tensor_random",
    "lucid_tensor_release",
    "lucid_tensor_release_many",
    "lucid_tensor_meta",
    "lucid_tensor_shape",
    "lucid_tensor_record",
    "lucid_tensor_to",
    "lucid_tensor_set_requires_grad",
    "lucid_detach",
    "lucid_data",
    "lucid_clone",
    "lucid_assign",
    "lucid_set_data",
    "lucid_unary_inplace",
    "lucid_live_tensors",
    "lucid_memory_stats",
    "lucid_reset_peak_memory_stats",
    "lucid_empty_cache",
    "lucid_get_num_threads",
    "lucid_threads_contended",
    "lucid_cpu_capability",
    "lucid_binary",
    "lucid_unary",
    "lucid_bitwise_not",
    "lucid_matmul",
    "lucid_linear",
    "lucid_reduce",
    "lucid_reshape",
    "lucid_permute",
    "lucid_contiguous",
    "lucid_compare",
    "lucid_squeeze",
    "lucid_expand",
    "lucid_storage_offset",
    "lucid_is_contiguous",
    "lucid_index",
    "lucid_index_put",
    "lucid_index_put_inplace",
    "lucid_lstm_cell",
    "lucid_lstm_layer",
    "lucid_gru_cell",
    "lucid_gru_layer",
    "lucid_rnn_layer",
    "lucid_conv2d",
    "lucid_conv1d",
    "lucid_conv_transpose2d",
    "lucid_max_pool2d",
    "lucid_pointwise_loss",
    "lucid_binary_cross_entropy",
    "lucid_bce_with_logits",
    "lucid_backward",
    "lucid_tensor_grad",
    "lucid_tensor_set_grad",
    "lucid_tensor_grad_fn",
    "lucid_set_grad_enabled",
    "lucid_is_grad_enabled",
    "lucid_tensor_retain_grad",
    "lucid_tensor_retains_grad",
    "lucid_autograd_backward",
    "lucid_autograd_grad",
    "lucid_unscale_grads",
    "lucid_metal_is_available",
    "lucid_metal_synchronize",
    "lucid_metal_fallback_entries",
    "lucid_metal_self_test",
    "lucid_metal_stats",
    "lucid_metal_libraries",
    "lucid_linalg_lu_factor",
    "lucid_linalg_solve_triangular",
    "lucid_linalg_cholesky",
    "lucid_linalg_eigh",
    "lucid_linalg_svd",
    "lucid_linalg_qr",
    "lucid_linalg_geqrf",
    "lucid_linalg_ldl_factor",
    "lucid_linalg_ldl_solve",
})

# Every enum of the header, by name: {constant: value}.
ENUMS = {
    "lucid_status": {"LUCID_OK": 0, "LUCID_ERR_VALUE": 1, "LUCID_ERR_TYPE": 2, "LUCID_ERR_INDEX": 3, "LUCID_ERR_RUNTIME": 4, "LUCID_ERR_HANDLE": 5, "LUCID_ERR_THREAD": 6},
    "lucid_record_field": {"LUCID_RECORD_HANDLE": 0, "LUCID_RECORD_DTYPE": 1, "LUCID_RECORD_DEVICE": 2, "LUCID_RECORD_NDIM": 3, "LUCID_RECORD_REQUIRES_GRAD": 4, "LUCID_RECORD_STORAGE_BYTES": 5, "LUCID_RECORD_SHAPE": 6, "LUCID_RECORD_DIMS": 8, "LUCID_RECORD_STRIDES": 14, "LUCID_RECORD_SHAPE_KEY": 22, "LUCID_RECORD_LEN": 23},
    "lucid_dtype": {"LUCID_FLOAT32": 0, "LUCID_FLOAT16": 1, "LUCID_BFLOAT16": 2, "LUCID_INT32": 3, "LUCID_INT64": 4, "LUCID_BOOL": 5, "LUCID_FLOAT64": 6, "LUCID_UINT8": 7, "LUCID_INT8": 8, "LUCID_INT16": 9},
    "lucid_device": {"LUCID_CPU": 0, "LUCID_METAL": 1},
    "lucid_scalar_kind": {"LUCID_SCALAR_FLOAT": 0, "LUCID_SCALAR_INT": 1, "LUCID_SCALAR_BOOL": 2},
    "lucid_binary_op": {"LUCID_ADD": 0, "LUCID_SUB": 1, "LUCID_MUL": 2, "LUCID_DIV": 3, "LUCID_POW": 4, "LUCID_MAXIMUM": 5, "LUCID_MINIMUM": 6, "LUCID_BITWISE_AND": 7, "LUCID_BITWISE_OR": 8, "LUCID_BITWISE_XOR": 9, "LUCID_ATAN2": 10, "LUCID_COPYSIGN": 11, "LUCID_XLOGY": 12, "LUCID_XLOG1PY": 13, "LUCID_ZETA": 14, "LUCID_HYPOT": 15, "LUCID_NEXTAFTER": 16, "LUCID_LOGADDEXP": 17, "LUCID_LOGADDEXP2": 18, "LUCID_IGAMMA": 19, "LUCID_IGAMMAC": 20, "LUCID_FMOD": 21, "LUCID_REMAINDER": 22, "LUCID_FLOOR_DIVIDE": 23, "LUCID_TRUNC_DIVIDE": 24, "LUCID_FMAX": 25, "LUCID_FMIN": 26, "LUCID_HEAVISIDE": 27, "LUCID_LEFT_SHIFT": 28, "LUCID_RIGHT_SHIFT": 29, "LUCID_GCD": 30, "LUCID_LCM": 31, "LUCID_CHEBYSHEV_POLYNOMIAL_T": 32, "LUCID_CHEBYSHEV_POLYNOMIAL_U": 33, "LUCID_CHEBYSHEV_POLYNOMIAL_V": 34, "LUCID_CHEBYSHEV_POLYNOMIAL_W": 35, "LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_T": 36, "LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_U": 37, "LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_V": 38, "LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_W": 39, "LUCID_HERMITE_POLYNOMIAL_H": 40, "LUCID_HERMITE_POLYNOMIAL_HE": 41, "LUCID_LAGUERRE_POLYNOMIAL_L": 42, "LUCID_LEGENDRE_POLYNOMIAL_P": 43},
    "lucid_compare_op": {"LUCID_EQ": 0, "LUCID_NE": 1, "LUCID_LT": 2, "LUCID_LE": 3, "LUCID_GT": 4, "LUCID_GE": 5},
    "lucid_unary_op": {"LUCID_NEG": 0, "LUCID_RELU": 1, "LUCID_EXP": 2, "LUCID_LOG": 3, "LUCID_LOG1P": 4, "LUCID_SQRT": 5, "LUCID_RSQRT": 6, "LUCID_ABS": 7, "LUCID_TANH": 8, "LUCID_SIGMOID": 9, "LUCID_SILU": 10, "LUCID_GELU": 11, "LUCID_GELU_TANH": 12, "LUCID_SOFTPLUS": 13, "LUCID_SIN": 14, "LUCID_COS": 15, "LUCID_EXPM1": 16, "LUCID_TAN": 17, "LUCID_ASIN": 18, "LUCID_ACOS": 19, "LUCID_ATAN": 20, "LUCID_ROUND": 21, "LUCID_FLOOR": 22, "LUCID_CEIL": 23, "LUCID_TRUNC": 24, "LUCID_SIGN": 25, "LUCID_ERF": 26, "LUCID_ERFC": 27, "LUCID_ERFINV": 28, "LUCID_LGAMMA": 29, "LUCID_DIGAMMA": 30, "LUCID_LOG2": 31, "LUCID_LOG10": 32, "LUCID_EXP2": 33, "LUCID_SINH": 34, "LUCID_COSH": 35, "LUCID_ASINH": 36, "LUCID_ACOSH": 37, "LUCID_ATANH": 38, "LUCID_SINC": 39, "LUCID_I0": 40, "LUCID_SPECIAL_I0E": 41, "LUCID_SPECIAL_I1": 42, "LUCID_SPECIAL_I1E": 43, "LUCID_SPECIAL_NDTRI": 44, "LUCID_SPECIAL_LOG_NDTR": 45, "LUCID_SPECIAL_ERFCX": 46, "LUCID_SPECIAL_BESSEL_J0": 47, "LUCID_SPECIAL_BESSEL_J1": 48, "LUCID_SPECIAL_BESSEL_Y0": 49, "LUCID_SPECIAL_BESSEL_Y1": 50, "LUCID_SPECIAL_MODIFIED_BESSEL_I0": 51, "LUCID_SPECIAL_MODIFIED_BESSEL_I1": 52, "LUCID_SPECIAL_MODIFIED_BESSEL_K0": 53, "LUCID_SPECIAL_MODIFIED_BESSEL_K1": 54, "LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K0": 55, "LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K1": 56, "LUCID_SPECIAL_SPHERICAL_BESSEL_J0": 57, "LUCID_SPECIAL_AIRY_AI": 58},
    "lucid_reduce_op": {"LUCID_SUM": 0, "LUCID_MEAN": 1, "LUCID_AMAX": 2, "LUCID_AMIN": 3, "LUCID_LOGSUMEXP": 4},
    "lucid_reduction": {"LUCID_REDUCTION_NONE": 0, "LUCID_REDUCTION_MEAN": 1, "LUCID_REDUCTION_SUM": 2},
    "lucid_cast_policy": {"LUCID_POLICY_NONE": 0, "LUCID_POLICY_LOWER_PRECISION": 1, "LUCID_POLICY_FLOAT32": 2, "LUCID_POLICY_PROMOTE": 3, "LUCID_POLICY_VIEW": 4},
    "lucid_index_kind": {"LUCID_INDEX_INT": 0, "LUCID_INDEX_SLICE": 1, "LUCID_INDEX_NONE": 2, "LUCID_INDEX_ELLIPSIS": 3, "LUCID_INDEX_TENSOR": 4},
    "lucid_assign_flag": {"LUCID_ASSIGN_FILL": 1, "LUCID_ASSIGN_SAME_KIND": 2, "LUCID_ASSIGN_RESULT": 4},
    "lucid_split_mode": {"LUCID_SPLIT_SIZES": 0, "LUCID_SPLIT_SIZE": 1, "LUCID_SPLIT_CHUNKS": 2},
    "lucid_pointwise_loss_kind": {"LUCID_LOSS_MSE": 0, "LUCID_LOSS_L1": 1},
    "lucid_precision_verdict": {"LUCID_VERDICT_SAFE_FLOAT16": 0, "LUCID_VERDICT_USE_BFLOAT16": 1, "LUCID_VERDICT_KEEP_FLOAT32": 2},
    "lucid_hook_kind": {"LUCID_HOOK_GRAD": 0, "LUCID_HOOK_POST_ACCUMULATE": 1},
    "lucid_qr_mode": {"LUCID_QR_REDUCED": 0, "LUCID_QR_COMPLETE": 1, "LUCID_QR_R": 2},
}

# The comment each enum constant carries in the header, where it has one.
DOCS = {
    'LUCID_ERR_VALUE': 'a value out of its allowed set or range (Python ValueError)',
    'LUCID_ERR_TYPE': 'a wrong dtype or argument type (TypeError)',
    'LUCID_ERR_INDEX': 'a dimension or index out of range (IndexError)',
    'LUCID_ERR_RUNTIME': 'well formed but impossible now, e.g. device mismatch (RuntimeError)',
    'LUCID_ERR_HANDLE': 'null, unknown, stale or released handle',
    'LUCID_ERR_THREAD': 'an object used from a thread that does not own it',
    'LUCID_ATAN2': 'atan2(a, b) (integers promote to float32, as for the next four)',
    'LUCID_COPYSIGN': '|a| with the sign of b',
    'LUCID_XLOGY': 'a log b, 0 where a is 0',
    'LUCID_XLOG1PY': 'a log1p b, 0 where a is 0',
    'LUCID_ZETA': 'the Hurwitz zeta function of a at b',
    'LUCID_HYPOT': 'sqrt(a**2 + b**2) (floating operands only, as for the next five)',
    'LUCID_NEXTAFTER': 'the next value after a towards b',
    'LUCID_LOGADDEXP': 'log(e**a + e**b)',
    'LUCID_LOGADDEXP2': 'log2(2**a + 2**b)',
    'LUCID_IGAMMA': 'the regularized lower incomplete gamma function P(a, b)',
    'LUCID_IGAMMAC': 'the regularized upper incomplete gamma function Q(a, b)',
    'LUCID_FMOD': "the remainder of a / b with a's sign (integers kept, as for the next six; not bool)",
    'LUCID_REMAINDER': "the remainder of a / b with b's sign",
    'LUCID_FLOOR_DIVIDE': 'floor(a / b)',
    'LUCID_TRUNC_DIVIDE': 'trunc(a / b)',
    'LUCID_FMAX': 'the maximum, NaN only where both are (bool too)',
    'LUCID_FMIN': 'the minimum, NaN only where both are (bool too)',
    'LUCID_HEAVISIDE': '0 where a < 0, b where a is 0, 1 where a > 0 (bool too)',
    'LUCID_LEFT_SHIFT': 'a << b (integers only, as for the next three)',
    'LUCID_RIGHT_SHIFT': 'a >> b, arithmetic',
    'LUCID_GCD': 'the greatest common divisor',
    'LUCID_LCM': 'the least common multiple',
    'LUCID_CHEBYSHEV_POLYNOMIAL_T': 'T_n(a), n = trunc(b) (0 for n < 0; as for the next eleven)',
    'LUCID_CHEBYSHEV_POLYNOMIAL_U': 'U_n(a)',
    'LUCID_CHEBYSHEV_POLYNOMIAL_V': 'V_n(a)',
    'LUCID_CHEBYSHEV_POLYNOMIAL_W': 'W_n(a)',
    'LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_T': 'T_n(2a - 1)',
    'LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_U': 'U_n(2a - 1)',
    'LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_V': 'V_n(2a - 1)',
    'LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_W': 'W_n(2a - 1)',
    'LUCID_HERMITE_POLYNOMIAL_H': "the physicists' Hermite polynomial H_n(a)",
    'LUCID_HERMITE_POLYNOMIAL_HE': "the probabilists' Hermite polynomial He_n(a)",
    'LUCID_LAGUERRE_POLYNOMIAL_L': 'the Laguerre polynomial L_n(a)',
    'LUCID_LEGENDRE_POLYNOMIAL_P': 'the Legendre polynomial P_n(a)',
    'LUCID_NEG': '-x',
    'LUCID_RELU': 'max(x, 0)',
    'LUCID_EXP': 'e**x',
    'LUCID_LOG': 'the natural logarithm',
    'LUCID_LOG1P': 'log(1 + x), exact for small x',
    'LUCID_SQRT': 'the square root',
    'LUCID_RSQRT': '1 / sqrt(x)',
    'LUCID_ABS': 'the absolute value',
    'LUCID_TANH': 'the hyperbolic tangent',
    'LUCID_SIGMOID': '1 / (1 + e**-x)',
    'LUCID_SILU': 'x * sigmoid(x)',
    'LUCID_GELU': 'x * P(X <= x) for a standard normal X',
    'LUCID_GELU_TANH': "GELU's tanh approximation",
    'LUCID_SOFTPLUS': 'log(1 + e**x)',
    'LUCID_SIN': 'the sine (integers promote to float32)',
    'LUCID_COS': 'the cosine (integers promote to float32)',
    'LUCID_EXPM1': 'e**x - 1, exact for small x',
    'LUCID_TAN': 'the tangent',
    'LUCID_ASIN': 'the arcsine (NaN outside [-1, 1])',
    'LUCID_ACOS': 'the arccosine (NaN outside [-1, 1])',
    'LUCID_ATAN': 'the arctangent',
    'LUCID_ROUND': 'the nearest integer, halves to even (integers unchanged; gradient 0)',
    'LUCID_FLOOR': 'the largest integer not above x (integers unchanged; gradient 0)',
    'LUCID_CEIL': 'the smallest integer not below x (integers unchanged; gradient 0)',
    'LUCID_TRUNC': 'x rounded toward zero (integers unchanged; gradient 0)',
    'LUCID_SIGN': '-1, 0 or 1 by the sign of x (NaN stays NaN; integers keep their dtype)',
    'LUCID_ERF': 'the error function',
    'LUCID_ERFC': 'the complementary error function 1 - erf(x), accurate in the tail',
    'LUCID_ERFINV': 'the inverse error function (NaN outside [-1, 1])',
    'LUCID_LGAMMA': 'log(abs(Gamma(x)))',
    'LUCID_DIGAMMA': 'the logarithmic derivative of Gamma (-inf at 0, NaN at the negative integers)',
    'LUCID_LOG2': 'the base-2 logarithm',
    'LUCID_LOG10': 'the base-10 logarithm',
    'LUCID_EXP2': '2**x',
    'LUCID_SINH': 'the hyperbolic sine',
    'LUCID_COSH': 'the hyperbolic cosine',
    'LUCID_ASINH': 'the inverse hyperbolic sine',
    'LUCID_ACOSH': 'the inverse hyperbolic cosine (NaN below 1)',
    'LUCID_ATANH': 'the inverse hyperbolic tangent (NaN outside [-1, 1])',
    'LUCID_SINC': 'sin(pi x) / (pi x), 1 at 0',
    'LUCID_I0': 'the modified Bessel function of the first kind, order 0',
    'LUCID_SPECIAL_I0E': 'exp(-|x|) i0(x)',
    'LUCID_SPECIAL_I1': 'the modified Bessel function of the first kind, order 1',
    'LUCID_SPECIAL_I1E': 'exp(-|x|) i1(x)',
    'LUCID_SPECIAL_NDTRI': 'the standard normal quantile: ndtr(y) = p for p in [0, 1]',
    'LUCID_SPECIAL_LOG_NDTR': 'log of the standard normal distribution function, accurate in the tails',
    'LUCID_SPECIAL_ERFCX': 'the scaled complementary error function exp(x**2) erfc(x)',
    'LUCID_SPECIAL_BESSEL_J0': 'the Bessel function of the first kind, order 0 (no gradient)',
    'LUCID_SPECIAL_BESSEL_J1': 'the Bessel function of the first kind, order 1 (no gradient)',
    'LUCID_SPECIAL_BESSEL_Y0': 'the Bessel function of the second kind, order 0 (no gradient)',
    'LUCID_SPECIAL_BESSEL_Y1': 'the Bessel function of the second kind, order 1 (no gradient)',
    'LUCID_SPECIAL_MODIFIED_BESSEL_I0': 'i0, as a special function (no gradient)',
    'LUCID_SPECIAL_MODIFIED_BESSEL_I1': 'i1, as a special function (no gradient)',
    'LUCID_SPECIAL_MODIFIED_BESSEL_K0': 'the modified Bessel function of the second kind, order 0 (no gradient)',
    'LUCID_SPECIAL_MODIFIED_BESSEL_K1': 'the modified Bessel function of the second kind, order 1 (no gradient)',
    'LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K0': 'exp(x) k0(x) (no gradient)',
    'LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K1': 'exp(x) k1(x) (no gradient)',
    'LUCID_SPECIAL_SPHERICAL_BESSEL_J0': 'sin(x) / x, 1 at 0 (no gradient)',
    'LUCID_SPECIAL_AIRY_AI': 'the Airy function Ai (no gradient)',
    'LUCID_HOOK_GRAD': "called with the tensor's gradient each time backward computes it",
    'LUCID_HOOK_POST_ACCUMULATE': 'called with a leaf once its gradient is accumulated into grad',
}

LUCID_OK = 0
LUCID_ERR_VALUE = 1
LUCID_ERR_TYPE = 2
LUCID_ERR_INDEX = 3
LUCID_ERR_RUNTIME = 4
LUCID_ERR_HANDLE = 5
LUCID_ERR_THREAD = 6
LUCID_RECORD_HANDLE = 0
LUCID_RECORD_DTYPE = 1
LUCID_RECORD_DEVICE = 2
LUCID_RECORD_NDIM = 3
LUCID_RECORD_REQUIRES_GRAD = 4
LUCID_RECORD_STORAGE_BYTES = 5
LUCID_RECORD_SHAPE = 6
LUCID_RECORD_DIMS = 8
LUCID_RECORD_STRIDES = 14
LUCID_RECORD_SHAPE_KEY = 22
LUCID_RECORD_LEN = 23
LUCID_FLOAT32 = 0
LUCID_FLOAT16 = 1
LUCID_BFLOAT16 = 2
LUCID_INT32 = 3
LUCID_INT64 = 4
LUCID_BOOL = 5
LUCID_FLOAT64 = 6
LUCID_UINT8 = 7
LUCID_INT8 = 8
LUCID_INT16 = 9
LUCID_CPU = 0
LUCID_METAL = 1
LUCID_SCALAR_FLOAT = 0
LUCID_SCALAR_INT = 1
LUCID_SCALAR_BOOL = 2
LUCID_ADD = 0
LUCID_SUB = 1
LUCID_MUL = 2
LUCID_DIV = 3
LUCID_POW = 4
LUCID_MAXIMUM = 5
LUCID_MINIMUM = 6
LUCID_BITWISE_AND = 7
LUCID_BITWISE_OR = 8
LUCID_BITWISE_XOR = 9
LUCID_ATAN2 = 10
LUCID_COPYSIGN = 11
LUCID_XLOGY = 12
LUCID_XLOG1PY = 13
LUCID_ZETA = 14
LUCID_HYPOT = 15
LUCID_NEXTAFTER = 16
LUCID_LOGADDEXP = 17
LUCID_LOGADDEXP2 = 18
LUCID_IGAMMA = 19
LUCID_IGAMMAC = 20
LUCID_FMOD = 21
LUCID_REMAINDER = 22
LUCID_FLOOR_DIVIDE = 23
LUCID_TRUNC_DIVIDE = 24
LUCID_FMAX = 25
LUCID_FMIN = 26
LUCID_HEAVISIDE = 27
LUCID_LEFT_SHIFT = 28
LUCID_RIGHT_SHIFT = 29
LUCID_GCD = 30
LUCID_LCM = 31
LUCID_CHEBYSHEV_POLYNOMIAL_T = 32
LUCID_CHEBYSHEV_POLYNOMIAL_U = 33
LUCID_CHEBYSHEV_POLYNOMIAL_V = 34
LUCID_CHEBYSHEV_POLYNOMIAL_W = 35
LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_T = 36
LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_U = 37
LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_V = 38
LUCID_SHIFTED_CHEBYSHEV_POLYNOMIAL_W = 39
LUCID_HERMITE_POLYNOMIAL_H = 40
LUCID_HERMITE_POLYNOMIAL_HE = 41
LUCID_LAGUERRE_POLYNOMIAL_L = 42
LUCID_LEGENDRE_POLYNOMIAL_P = 43
LUCID_EQ = 0
LUCID_NE = 1
LUCID_LT = 2
LUCID_LE = 3
LUCID_GT = 4
LUCID_GE = 5
LUCID_NEG = 0
LUCID_RELU = 1
LUCID_EXP = 2
LUCID_LOG = 3
LUCID_LOG1P = 4
LUCID_SQRT = 5
LUCID_RSQRT = 6
LUCID_ABS = 7
LUCID_TANH = 8
LUCID_SIGMOID = 9
LUCID_SILU = 10
LUCID_GELU = 11
LUCID_GELU_TANH = 12
LUCID_SOFTPLUS = 13
LUCID_SIN = 14
LUCID_COS = 15
LUCID_EXPM1 = 16
LUCID_TAN = 17
LUCID_ASIN = 18
LUCID_ACOS = 19
LUCID_ATAN = 20
LUCID_ROUND = 21
LUCID_FLOOR = 22
LUCID_CEIL = 23
LUCID_TRUNC = 24
LUCID_SIGN = 25
LUCID_ERF = 26
LUCID_ERFC = 27
LUCID_ERFINV = 28
LUCID_LGAMMA = 29
LUCID_DIGAMMA = 30
LUCID_LOG2 = 31
LUCID_LOG10 = 32
LUCID_EXP2 = 33
LUCID_SINH = 34
LUCID_COSH = 35
LUCID_ASINH = 36
LUCID_ACOSH = 37
LUCID_ATANH = 38
LUCID_SINC = 39
LUCID_I0 = 40
LUCID_SPECIAL_I0E = 41
LUCID_SPECIAL_I1 = 42
LUCID_SPECIAL_I1E = 43
LUCID_SPECIAL_NDTRI = 44
LUCID_SPECIAL_LOG_NDTR = 45
LUCID_SPECIAL_ERFCX = 46
LUCID_SPECIAL_BESSEL_J0 = 47
LUCID_SPECIAL_BESSEL_J1 = 48
LUCID_SPECIAL_BESSEL_Y0 = 49
LUCID_SPECIAL_BESSEL_Y1 = 50
LUCID_SPECIAL_MODIFIED_BESSEL_I0 = 51
LUCID_SPECIAL_MODIFIED_BESSEL_I1 = 52
LUCID_SPECIAL_MODIFIED_BESSEL_K0 = 53
LUCID_SPECIAL_MODIFIED_BESSEL_K1 = 54
LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K0 = 55
LUCID_SPECIAL_SCALED_MODIFIED_BESSEL_K1 = 56
LUCID_SPECIAL_SPHERICAL_BESSEL_J0 = 57
LUCID_SPECIAL_AIRY_AI = 58
LUCID_SUM = 0
LUCID_MEAN = 1
LUCID_AMAX = 2
LUCID_AMIN = 3
LUCID_LOGSUMEXP = 4
LUCID_REDUCTION_NONE = 0
LUCID_REDUCTION_MEAN = 1
LUCID_REDUCTION_SUM = 2
LUCID_POLICY_NONE = 0
LUCID_POLICY_LOWER_PRECISION = 1
LUCID_POLICY_FLOAT32 = 2
LUCID_POLICY_PROMOTE = 3
LUCID_POLICY_VIEW = 4
LUCID_INDEX_INT = 0
LUCID_INDEX_SLICE = 1
LUCID_INDEX_NONE = 2
LUCID_INDEX_ELLIPSIS = 3
LUCID_INDEX_TENSOR = 4
LUCID_ASSIGN_FILL = 1
LUCID_ASSIGN_SAME_KIND = 2
LUCID_ASSIGN_RESULT = 4
LUCID_SPLIT_SIZES = 0
LUCID_SPLIT_SIZE = 1
LUCID_SPLIT_CHUNKS = 2
LUCID_LOSS_MSE = 0
LUCID_LOSS_L1 = 1
LUCID_VERDICT_SAFE_FLOAT16 = 0
LUCID_VERDICT_USE_BFLOAT16 = 1
LUCID_VERDICT_KEEP_FLOAT32 = 2
LUCID_HOOK_GRAD = 0
LUCID_HOOK_POST_ACCUMULATE = 1
LUCID_QR_REDUCED = 0
LUCID_QR_COMPLETE = 1
LUCID_QR_R = 2
