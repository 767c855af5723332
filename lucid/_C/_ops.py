"""The engine's entry points as Python functions, generated from include/lucid.h by
tools/gen_abi.py; do not edit (change the header and run the tool).

Each takes the header's parameters by their names, less the out-parameters and the counts of
arrays: a tensor is a tensor or its handle (an int; a tensor given stays alive through the
call), an array a sequence of ints (or of tensors or handles), a name a str. It raises the
engine's error as the matching Python exception and returns what the engine wrote: an op's
record, a value, or a tuple of them.
"""

from ctypes import byref, c_char_p, c_double, c_int32, c_int64, c_uint32, c_uint64  # noqa: F401

from ._library import (Record, handles as _handles, int64s as _int64s, lib as _lib, name as _name,
                       out_of_range as _out_of_range, raise_error as _raise, subscript as _subscript,
                       text as _text)


_lucid_autocast_override = _lib.lucid_autocast_override


def autocast_override(guard, op, policy):
    """Gives the op called `op` the autocast policy `policy` (a LUCID_POLICY_* code) while the scope
    `guard` (live, the calling thread's) is: for ops on its device, an inner scope's override of the
    same op winning. LUCID_ERR_VALUE for an unknown op or policy, an op with no precision of its own
    (a view, or `to`: LUCID_POLICY_VIEW in the op table), the policy LUCID_POLICY_VIEW, or
    LUCID_POLICY_LOWER_PRECISION for an op without 16-bit kernels.
    """
    rc = _lucid_autocast_override(guard, _name(op), policy)
    if rc:
        _raise(rc)


_lucid_autocast_effective_policy = _lib.lucid_autocast_effective_policy


def autocast_effective_policy(device, op):
    """The policy the op called `op` has on `device` for the calling thread now, overrides included.
    device -1: the innermost scope's that switches autocast on (metal when none).
    """
    out_ = c_int32()
    rc = _lucid_autocast_effective_policy(device, _name(op), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_amp_inspect_begin = _lib.lucid_amp_inspect_begin


def amp_inspect_begin():
    """Starts an inspection on the calling thread (lucid.amp.inspect): until it ends, every op that
    runs in a lower precision under autocast on this thread has its floating inputs (before the
    cast) and its result counted, by kernels on their device; nothing is read back until the end.
    Inspections nest; each counts on its own.
    """
    out_ = c_uint64()
    rc = _lucid_amp_inspect_begin(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_amp_inspect_set_module = _lib.lucid_amp_inspect_set_module


def amp_inspect_set_module(path):
    """The module path the calling thread's inspected ops are recorded under; '' or NULL: none."""
    rc = _lucid_amp_inspect_set_module(_name(path))
    if rc:
        _raise(rc)


_lucid_amp_inspect_end = _lib.lucid_amp_inspect_end


def amp_inspect_end(id):
    """Ends the inspection `id` (the calling thread's) and reads what it found (one wait for each
    device's queued work), kept for lucid_amp_inspect_entry on this thread: *entries = how many
    records, one per (op, module, device, dtype). LUCID_ERR_HANDLE for an id that is not live on
    this thread.
    """
    entries_ = c_int64()
    rc = _lucid_amp_inspect_end(id, byref(entries_))
    if rc:
        _raise(rc)
    return entries_.value


_lucid_autocast_is_enabled = _lib.lucid_autocast_is_enabled


def autocast_is_enabled(device):
    """device -1: whether autocast is on for either device."""
    out_ = c_int32()
    rc = _lucid_autocast_is_enabled(device, byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_get_dtype = _lib.lucid_autocast_get_dtype


def autocast_get_dtype(device):
    """The dtype code autocast targets on `device`, or -1 when off there. device -1: the dtype of
    the innermost scope that still switches autocast on, or -1.
    """
    out_ = c_int32()
    rc = _lucid_autocast_get_dtype(device, byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_live_guards = _lib.lucid_autocast_live_guards


def autocast_live_guards():
    """Live scopes in the process, across threads."""
    out_ = c_int64()
    rc = _lucid_autocast_live_guards(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_cached_casts = _lib.lucid_autocast_cached_casts


def autocast_cached_casts():
    """Parameter casts the calling thread's autocast weight cache holds (emptied when its outermost
    scope exits).
    """
    out_ = c_int64()
    rc = _lucid_autocast_cached_casts(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_is_cache_enabled = _lib.lucid_autocast_is_cache_enabled


def autocast_is_cache_enabled():
    """Whether the calling thread's weight cache is used (1, as for a new thread) or not (0):
    autocast's cache_enabled. set writes the previous setting to *previous (may be NULL); enabled
    must be 0 or 1. Casts already cached stay until the outermost scope exits.
    """
    out_ = c_int32()
    rc = _lucid_autocast_is_cache_enabled(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_set_cache_enabled = _lib.lucid_autocast_set_cache_enabled


def autocast_set_cache_enabled(enabled):
    previous_ = c_int32()
    rc = _lucid_autocast_set_cache_enabled(enabled, byref(previous_))
    if rc:
        _raise(rc)
    return previous_.value


_lucid_autocast_default_dtype = _lib.lucid_autocast_default_dtype


def autocast_default_dtype(device):
    """The dtype a scope on `device` targets when guard_create is given -1."""
    out_ = c_int32()
    rc = _lucid_autocast_default_dtype(device, byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_autocast_check_dtype = _lib.lucid_autocast_check_dtype


def autocast_check_dtype(device, dtype):
    """LUCID_OK when autocast on `device` can target `dtype`, else LUCID_ERR_VALUE naming the ones
    it can.
    """
    rc = _lucid_autocast_check_dtype(device, dtype)
    if rc:
        _raise(rc)


_lucid_dtype_info = _lib.lucid_dtype_info


def dtype_info(dtype):
    """The engine's dtype and device tables: a code's name (owned by the engine), element size and
    whether it is floating; LUCID_ERR_VALUE for an unknown code.
    """
    name_ = c_char_p()
    itemsize_ = c_int32()
    is_floating_ = c_int32()
    rc = _lucid_dtype_info(dtype, byref(name_), byref(itemsize_), byref(is_floating_))
    if rc:
        _raise(rc)
    return _text(name_.value), itemsize_.value, is_floating_.value


_lucid_device_info = _lib.lucid_device_info


def device_info(device):
    name_ = c_char_p()
    rc = _lucid_device_info(device, byref(name_))
    if rc:
        _raise(rc)
    return _text(name_.value)


_lucid_op_count = _lib.lucid_op_count


def op_count():
    """The op table: index 0..count-1 gives a name (static storage), a LUCID_POLICY_* code and
    whether the CPU stream has a bfloat16 kernel (when 0, bfloat16 CPU autocast runs it in float32).
    """
    out_ = c_int32()
    rc = _lucid_op_count(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_op_info = _lib.lucid_op_info


def op_info(index):
    name_ = c_char_p()
    policy_ = c_int32()
    cpu_bf16_ = c_int32()
    rc = _lucid_op_info(index, byref(name_), byref(policy_), byref(cpu_bf16_))
    if rc:
        _raise(rc)
    return _text(name_.value), policy_.value, cpu_bf16_.value


_lucid_tensor_from_host = _lib.lucid_tensor_from_host


def tensor_from_host(data, nbytes, shape, dtype, device):
    """Copies `nbytes` of row-major elements of `dtype` (exactly numel * itemsize)."""
    if not -0x8000000000000000 <= nbytes <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('nbytes', nbytes)
    shape_, ndim = _int64s(shape)
    out_ = Record()
    rc = _lucid_tensor_from_host(data, nbytes, shape_, ndim, dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_tensor_full = _lib.lucid_tensor_full


def tensor_full(shape, value, int_value, value_kind, dtype, device):
    """value_kind LUCID_SCALAR_FLOAT reads `value`; LUCID_SCALAR_INT and _BOOL read `int_value`."""
    shape_, ndim = _int64s(shape)
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    out_ = Record()
    rc = _lucid_tensor_full(shape_, ndim, value, int_value, value_kind, dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_tensor_arange = _lib.lucid_tensor_arange


def tensor_arange(start, end, step, dtype, device):
    """start, start + step, ... up to (not including) end, computed in float64; dtype -1 is float32."""
    out_ = Record()
    rc = _lucid_tensor_arange(start, end, step, dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_tensor_arange_int = _lib.lucid_tensor_arange_int


def tensor_arange_int(start, end, step, dtype, device):
    """The same in int64 arithmetic (exact for every int64 bound); dtype -1 is int64."""
    if not -0x8000000000000000 <= start <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('start', start)
    if not -0x8000000000000000 <= end <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('end', end)
    if not -0x8000000000000000 <= step <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('step', step)
    out_ = Record()
    rc = _lucid_tensor_arange_int(start, end, step, dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_tensor_random = _lib.lucid_tensor_random


def tensor_random(shape, normal, dtype, device):
    """normal 0: uniform [0, 1); 1: standard normal. Floating dtypes only."""
    shape_, ndim = _int64s(shape)
    out_ = Record()
    rc = _lucid_tensor_random(shape_, ndim, normal, dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_manual_seed = _lib.lucid_manual_seed


def manual_seed(seed):
    rc = _lucid_manual_seed(seed)
    if rc:
        _raise(rc)


_lucid_tensor_meta = _lib.lucid_tensor_meta


def tensor_meta(t):
    dtype_ = c_int32()
    device_ = c_int32()
    ndim_ = c_int32()
    requires_grad_ = c_int32()
    rc = _lucid_tensor_meta((t if t.__class__ is int else t._h), byref(dtype_), byref(device_), byref(ndim_), byref(requires_grad_))
    if rc:
        _raise(rc)
    return dtype_.value, device_.value, ndim_.value, requires_grad_.value


_lucid_tensor_record = _lib.lucid_tensor_record


def tensor_record(t):
    """The tensor's record, as an op that made it writes it (enum lucid_record_field)."""
    record_ = Record()
    rc = _lucid_tensor_record((t if t.__class__ is int else t._h), record_)
    if rc:
        _raise(rc)
    return record_


_lucid_tensor_to_host = _lib.lucid_tensor_to_host


def tensor_to_host(t, data, nbytes):
    """Copies the elements row-major; nbytes must be exactly numel * itemsize."""
    if not -0x8000000000000000 <= nbytes <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('nbytes', nbytes)
    rc = _lucid_tensor_to_host((t if t.__class__ is int else t._h), data, nbytes)
    if rc:
        _raise(rc)


_lucid_tensor_to = _lib.lucid_tensor_to


def tensor_to(t, dtype, device):
    """dtype / device -1: unchanged. Rounds to nearest even into float16 and bfloat16."""
    out_ = Record()
    rc = _lucid_tensor_to((t if t.__class__ is int else t._h), dtype, device, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_tensor_set_requires_grad = _lib.lucid_tensor_set_requires_grad


def tensor_set_requires_grad(t, flag):
    out_ = Record()
    rc = _lucid_tensor_set_requires_grad((t if t.__class__ is int else t._h), flag, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_detach = _lib.lucid_detach


def detach(t):
    """A second handle to the same values that does not require gradients."""
    out_ = Record()
    rc = _lucid_detach((t if t.__class__ is int else t._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_data = _lib.lucid_data


def data(t):
    """As lucid_detach, with a version counter of its own (PyTorch's `.data`): in-place writes
    through it (and its views) change the values but not the version backward checks.
    """
    out_ = Record()
    rc = _lucid_data((t if t.__class__ is int else t._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_clone = _lib.lucid_clone


def clone(t):
    """A copy of t in storage of its own, row-major (gradients flow back to t)."""
    out_ = Record()
    rc = _lucid_clone((t if t.__class__ is int else t._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_assign = _lib.lucid_assign


def assign(dst, value, flags, op):
    """The in-place write: value (broadcast to dst's shape, converted to its dtype, moved to its
    device) goes into dst's elements, in its storage, seen by every tensor that views it; the
    storage's version goes up by one. `flags`: enum lucid_assign_flag. `op` names the operation in
    errors. When autograd records the write, it becomes the grad_fn of dst (of the tensor dst views,
    for a view: every view of it then has the new history) and *recorded is set to 1; otherwise
    nothing but the values changed and *recorded is 0. `recorded` may be NULL.
    """
    recorded_ = c_int32()
    rc = _lucid_assign((dst if dst.__class__ is int else dst._h), (value if value.__class__ is int else value._h), flags, _name(op), byref(recorded_))
    if rc:
        _raise(rc)
    return recorded_.value != 0


_lucid_fill = _lib.lucid_fill


def fill(dst, value, int_value, kind, op):
    """Sets every element of dst to a scalar (value, or int_value for integer and bool kinds), in
    place, expanded views included; op and recorded as for lucid_assign.
    """
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    recorded_ = c_int32()
    rc = _lucid_fill((dst if dst.__class__ is int else dst._h), value, int_value, kind, _name(op), byref(recorded_))
    if rc:
        _raise(rc)
    return recorded_.value != 0


_lucid_set_data = _lib.lucid_set_data


def set_data(t, value):
    """PyTorch's `t.data = value`: t stands from now on for value's storage, shape, dtype and
    device, cut from autograd, keeping its requires_grad (and gradient) when t is a leaf. Tensors
    that viewed t keep the old storage.
    """
    rc = _lucid_set_data((t if t.__class__ is int else t._h), (value if value.__class__ is int else value._h))
    if rc:
        _raise(rc)


_lucid_binary_inplace = _lib.lucid_binary_inplace


def binary_inplace(op, dst, other, alpha, name):
    """dst op= other (other times alpha for LUCID_ADD and LUCID_SUB), in place, where autograd
    records nothing (LUCID_ERR_RUNTIME otherwise: compute the result and lucid_assign it): one
    kernel over dst's elements when the result keeps dst's dtype. other broadcasts to dst's shape; a
    result of a higher kind than dst (a float into an integer tensor) is refused. `name` names the
    op in errors.
    """
    rc = _lucid_binary_inplace(op, (dst if dst.__class__ is int else dst._h), (other if other.__class__ is int else other._h), alpha, _name(name))
    if rc:
        _raise(rc)


_lucid_binary_scalar_inplace = _lib.lucid_binary_scalar_inplace


def binary_scalar_inplace(op, dst, value, int_value, kind, name):
    """dst op= scalar, as lucid_binary_inplace."""
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    rc = _lucid_binary_scalar_inplace(op, (dst if dst.__class__ is int else dst._h), value, int_value, kind, _name(name))
    if rc:
        _raise(rc)


_lucid_unary_inplace = _lib.lucid_unary_inplace


def unary_inplace(op, dst, name):
    """dst = op(dst), as lucid_binary_inplace."""
    rc = _lucid_unary_inplace(op, (dst if dst.__class__ is int else dst._h), _name(name))
    if rc:
        _raise(rc)


_lucid_write_at = _lib.lucid_write_at


def write_at(dst, items, src, value, int_value, kind, op):
    """Writes src (or, when src is 0, the scalar) into the elements dst[items] names, items as for
    lucid_index but ints, slices, None and Ellipsis only: Python's dst[1, 2:5] = v, with no view
    handed out; op and recorded as for lucid_assign.
    """
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    recorded_ = c_int32()
    rc = _lucid_write_at((dst if dst.__class__ is int else dst._h), *_subscript(items), (src if src.__class__ is int else src._h), value, int_value, kind, _name(op), byref(recorded_))
    if rc:
        _raise(rc)
    return recorded_.value != 0


_lucid_live_tensors = _lib.lucid_live_tensors


def live_tensors():
    """Handles not yet released."""
    out_ = c_int64()
    rc = _lucid_live_tensors(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_memory_stats = _lib.lucid_memory_stats


def memory_stats(device):
    """Bytes held by tensor buffers on `device` (-1: all devices) now, and at most since the last
    reset.
    """
    allocated_ = c_int64()
    peak_ = c_int64()
    rc = _lucid_memory_stats(device, byref(allocated_), byref(peak_))
    if rc:
        _raise(rc)
    return allocated_.value, peak_.value


_lucid_reset_peak_memory_stats = _lib.lucid_reset_peak_memory_stats


def reset_peak_memory_stats(device):
    rc = _lucid_reset_peak_memory_stats(device)
    if rc:
        _raise(rc)


_lucid_empty_cache = _lib.lucid_empty_cache


def empty_cache():
    """Freed tensor buffers are cached for reuse; this returns the cache to the system and writes
    the bytes freed.
    """
    freed_ = c_int64()
    rc = _lucid_empty_cache(byref(freed_))
    if rc:
        _raise(rc)
    return freed_.value


_lucid_set_num_threads = _lib.lucid_set_num_threads


def set_num_threads(n):
    """Threads the CPU kernels use (the engine's loops, oneDNN's and OpenBLAS's pools), one
    process-wide setting in 1..1024; it starts at the number of online cores.
    """
    if not -0x8000000000000000 <= n <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('n', n)
    rc = _lucid_set_num_threads(n)
    if rc:
        _raise(rc)


_lucid_get_num_threads = _lib.lucid_get_num_threads


def get_num_threads():
    out_ = c_int64()
    rc = _lucid_get_num_threads(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_threads_contended = _lib.lucid_threads_contended


def threads_contended():
    """1 while the CPU kernels run on the calling thread alone because another process was found
    keeping the cores busy (their regions' CPU time fell well below their wall time); they try their
    threads again a second later. 0 otherwise.
    """
    out_ = c_int32()
    rc = _lucid_threads_contended(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_cpu_capability = _lib.lucid_cpu_capability


def cpu_capability():
    """The vector unit the engine's own host loops run on, by PyTorch's names: 'AVX512', 'AVX2' or
    'DEFAULT' (the baseline the engine is compiled for). The environment variable LUCID_HOST_ISA
    (baseline, avx2 or avx512), read at the first host loop, can lower it.
    """
    name_ = c_char_p()
    rc = _lucid_cpu_capability(byref(name_))
    if rc:
        _raise(rc)
    return _text(name_.value)


_lucid_binary = _lib.lucid_binary


def binary(op, a, b):
    """---- ops (inputs borrowed, result new) --------------------------------------------------"""
    out_ = Record()
    rc = _lucid_binary(op, (a if a.__class__ is int else a._h), (b if b.__class__ is int else b._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_binary_scalar = _lib.lucid_binary_scalar


def binary_scalar(op, a, value, int_value, kind, scalar_first):
    """a op scalar, or scalar op a when scalar_first. kind LUCID_SCALAR_FLOAT reads `value`;
    LUCID_SCALAR_INT and _BOOL read `int_value`.
    """
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    out_ = Record()
    rc = _lucid_binary_scalar(op, (a if a.__class__ is int else a._h), value, int_value, kind, scalar_first, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_unary = _lib.lucid_unary


def unary(op, a):
    out_ = Record()
    rc = _lucid_unary(op, (a if a.__class__ is int else a._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_bitwise_not = _lib.lucid_bitwise_not


def bitwise_not(a):
    """~a: logical not for bool, bitwise not for integers (floating tensors are a type error)."""
    out_ = Record()
    rc = _lucid_bitwise_not((a if a.__class__ is int else a._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_matmul = _lib.lucid_matmul


def matmul(a, b):
    out_ = Record()
    rc = _lucid_matmul((a if a.__class__ is int else a._h), (b if b.__class__ is int else b._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_linear = _lib.lucid_linear


def linear(x, weight, bias):
    """bias 0: none."""
    out_ = Record()
    rc = _lucid_linear((x if x.__class__ is int else x._h), (weight if weight.__class__ is int else weight._h), (bias if bias.__class__ is int else bias._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_reduce = _lib.lucid_reduce


def reduce(op, a, dims, keepdim):
    """ndims -1: every dimension."""
    dims_, ndims = _int64s(dims)
    out_ = Record()
    rc = _lucid_reduce(op, (a if a.__class__ is int else a._h), dims_, ndims, keepdim, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_reshape = _lib.lucid_reshape


def reshape(a, shape, view_only):
    """One size may be -1. view_only: fail instead of copying when the layout needs a copy."""
    shape_, ndim = _int64s(shape)
    out_ = Record()
    rc = _lucid_reshape((a if a.__class__ is int else a._h), shape_, ndim, view_only, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_transpose = _lib.lucid_transpose


def transpose(a, dim0, dim1):
    if not -0x8000000000000000 <= dim0 <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim0', dim0)
    if not -0x8000000000000000 <= dim1 <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim1', dim1)
    out_ = Record()
    rc = _lucid_transpose((a if a.__class__ is int else a._h), dim0, dim1, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_permute = _lib.lucid_permute


def permute(a, dims):
    dims_, ndim = _int64s(dims)
    out_ = Record()
    rc = _lucid_permute((a if a.__class__ is int else a._h), dims_, ndim, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_contiguous = _lib.lucid_contiguous


def contiguous(a):
    out_ = Record()
    rc = _lucid_contiguous((a if a.__class__ is int else a._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_compare = _lib.lucid_compare


def compare(op, a, b):
    """A tensor argument of 0 means 'absent' wherever a parameter is optional."""
    out_ = Record()
    rc = _lucid_compare(op, (a if a.__class__ is int else a._h), (b if b.__class__ is int else b._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_compare_scalar = _lib.lucid_compare_scalar


def compare_scalar(op, a, value, int_value, kind, scalar_first):
    if not -0x8000000000000000 <= int_value <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('int_value', int_value)
    out_ = Record()
    rc = _lucid_compare_scalar(op, (a if a.__class__ is int else a._h), value, int_value, kind, scalar_first, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_where = _lib.lucid_where


def where(cond, a, b, a_value, a_int, a_kind, b_value, b_int, b_kind):
    """cond ? a : b. A branch given as handle 0 is the scalar (value, int_value, kind) instead."""
    if not -0x8000000000000000 <= a_int <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('a_int', a_int)
    if not -0x8000000000000000 <= b_int <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('b_int', b_int)
    out_ = Record()
    rc = _lucid_where((cond if cond.__class__ is int else cond._h), (a if a.__class__ is int else a._h), (b if b.__class__ is int else b._h), a_value, a_int, a_kind, b_value, b_int, b_kind, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_clamp = _lib.lucid_clamp


def clamp(a, has_min, min_value, min_int, min_kind, has_max, max_value, max_int, max_kind):
    if not -0x8000000000000000 <= min_int <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('min_int', min_int)
    if not -0x8000000000000000 <= max_int <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('max_int', max_int)
    out_ = Record()
    rc = _lucid_clamp((a if a.__class__ is int else a._h), has_min, min_value, min_int, min_kind, has_max, max_value, max_int, max_kind, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_var = _lib.lucid_var


def var(a, dims, correction, keepdim, root):
    """Variance (root != 0: standard deviation) with `correction`; ndims -1 reduces everything."""
    dims_, ndims = _int64s(dims)
    out_ = Record()
    rc = _lucid_var((a if a.__class__ is int else a._h), dims_, ndims, correction, keepdim, root, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_max_dim = _lib.lucid_max_dim


def max_dim(a, dim, keepdim, largest):
    """Max (largest != 0) or min along dim: values and int64 indices."""
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    values_ = c_uint32()
    indices_ = c_uint32()
    rc = _lucid_max_dim((a if a.__class__ is int else a._h), dim, keepdim, largest, byref(values_), byref(indices_))
    if rc:
        _raise(rc)
    return values_.value, indices_.value


_lucid_argmax = _lib.lucid_argmax


def argmax(a, dim, has_dim, keepdim, largest):
    """argmax / argmin along dim, or of the flattened tensor when has_dim is 0."""
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_argmax((a if a.__class__ is int else a._h), dim, has_dim, keepdim, largest, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_squeeze = _lib.lucid_squeeze


def squeeze(a, dims):
    """ndims -1 squeezes every size-1 dimension."""
    dims_, ndims = _int64s(dims)
    out_ = Record()
    rc = _lucid_squeeze((a if a.__class__ is int else a._h), dims_, ndims, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_unsqueeze = _lib.lucid_unsqueeze


def unsqueeze(a, dim):
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_unsqueeze((a if a.__class__ is int else a._h), dim, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_expand = _lib.lucid_expand


def expand(a, shape):
    shape_, ndim = _int64s(shape)
    out_ = Record()
    rc = _lucid_expand((a if a.__class__ is int else a._h), shape_, ndim, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_flatten = _lib.lucid_flatten


def flatten(a, start_dim, end_dim):
    if not -0x8000000000000000 <= start_dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('start_dim', start_dim)
    if not -0x8000000000000000 <= end_dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('end_dim', end_dim)
    out_ = Record()
    rc = _lucid_flatten((a if a.__class__ is int else a._h), start_dim, end_dim, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_narrow = _lib.lucid_narrow


def narrow(a, dim, start, length):
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    if not -0x8000000000000000 <= start <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('start', start)
    if not -0x8000000000000000 <= length <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('length', length)
    out_ = Record()
    rc = _lucid_narrow((a if a.__class__ is int else a._h), dim, start, length, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_diagonal = _lib.lucid_diagonal


def diagonal(a, offset, dim1, dim2):
    """torch.diagonal: the view of the diagonal of dimensions dim1 and dim2 (shifted by offset),
    which become a last dimension.
    """
    if not -0x8000000000000000 <= offset <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('offset', offset)
    if not -0x8000000000000000 <= dim1 <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim1', dim1)
    if not -0x8000000000000000 <= dim2 <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim2', dim2)
    out_ = Record()
    rc = _lucid_diagonal((a if a.__class__ is int else a._h), offset, dim1, dim2, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_as_strided = _lib.lucid_as_strided


def as_strided(a, size, stride, offset, has_offset):
    """torch.as_strided: the view of a's storage with `ndim` sizes and strides (in elements, not
    negative) from storage element `offset` (a's own when has_offset is 0); it must lie inside the
    storage. Its elements may repeat; their gradients add up.
    """
    size_, ndim = _int64s(size)
    stride_ = _int64s(stride, ndim)
    if not -0x8000000000000000 <= offset <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('offset', offset)
    out_ = Record()
    rc = _lucid_as_strided((a if a.__class__ is int else a._h), size_, stride_, ndim, offset, has_offset, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_storage_offset = _lib.lucid_storage_offset


def storage_offset(a):
    """The element of a's storage where a's element 0 is."""
    out_ = c_int64()
    rc = _lucid_storage_offset((a if a.__class__ is int else a._h), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_is_contiguous = _lib.lucid_is_contiguous


def is_contiguous(a):
    """1 when a's elements lie in row-major order with no gaps (size-1 dimensions aside), else 0."""
    out_ = c_int32()
    rc = _lucid_is_contiguous((a if a.__class__ is int else a._h), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_wrap_dim = _lib.lucid_wrap_dim


def wrap_dim(dim, ndim, op):
    """Dimension `dim` of a tensor of `ndim` dimensions, wrapped into 0..<ndim (dim -1 and 0 for a
    0-d tensor); LUCID_ERR_INDEX, naming `op`, when it is out of range.
    """
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = c_int64()
    rc = _lucid_wrap_dim(dim, ndim, _name(op), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_cat = _lib.lucid_cat


def cat(tensors, dim, stack):
    """cat (stack = 0) or stack (stack = 1) of `count` tensors."""
    tensors_, count = _handles(tensors)
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_cat(tensors_, count, dim, stack, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_index = _lib.lucid_index


def index(a, items):
    """a[items]: kinds lucid_index_kind (a tensor item is integer or bool); `values` holds three
    int64 per item (the int, or start/stop/step), `flags` a slice's present parts (bits 0-2).
    """
    out_ = Record()
    rc = _lucid_index((a if a.__class__ is int else a._h), *_subscript(items), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_index_put = _lib.lucid_index_put


def index_put(a, items, src, accumulate):
    """A new tensor: `a` with `src` (converted to a's dtype, broadcast to the shape of a[items])
    written at a[items], or added there when `accumulate` (repeated positions add up). Without it, a
    position an integer index repeats takes its last write. Items as for lucid_index.
    """
    out_ = Record()
    rc = _lucid_index_put((a if a.__class__ is int else a._h), *_subscript(items), (src if src.__class__ is int else src._h), accumulate, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_index_put_inplace = _lib.lucid_index_put_inplace


def index_put_inplace(dst, items, src, accumulate, op):
    """The same write into dst itself, in place: only the elements dst[items] names are read and
    written, an expanded view's included; op and recorded as for lucid_assign.
    """
    recorded_ = c_int32()
    rc = _lucid_index_put_inplace((dst if dst.__class__ is int else dst._h), *_subscript(items), (src if src.__class__ is int else src._h), accumulate, _name(op), byref(recorded_))
    if rc:
        _raise(rc)
    return recorded_.value != 0


_lucid_gather = _lib.lucid_gather


def gather(a, dim, index):
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_gather((a if a.__class__ is int else a._h), dim, (index if index.__class__ is int else index._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_index_select = _lib.lucid_index_select


def index_select(a, dim, index):
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_index_select((a if a.__class__ is int else a._h), dim, (index if index.__class__ is int else index._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_embedding = _lib.lucid_embedding


def embedding(weight, indices, has_padding_idx, padding_idx):
    if not -0x8000000000000000 <= padding_idx <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('padding_idx', padding_idx)
    out_ = Record()
    rc = _lucid_embedding((weight if weight.__class__ is int else weight._h), (indices if indices.__class__ is int else indices._h), has_padding_idx, padding_idx, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_softmax = _lib.lucid_softmax


def softmax(a, dim, log):
    """---- layers ------------------------------------------------------------------------------"""
    if not -0x8000000000000000 <= dim <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('dim', dim)
    out_ = Record()
    rc = _lucid_softmax((a if a.__class__ is int else a._h), dim, log, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_dropout = _lib.lucid_dropout


def dropout(a, p, training):
    out_ = Record()
    rc = _lucid_dropout((a if a.__class__ is int else a._h), p, training, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_leaky_relu = _lib.lucid_leaky_relu


def leaky_relu(a, negative_slope):
    """torch.nn.functional.leaky_relu: a > 0 ? a : negative_slope·a for a floating tensor (gradient
    negative_slope at 0).
    """
    out_ = Record()
    rc = _lucid_leaky_relu((a if a.__class__ is int else a._h), negative_slope, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_lstm_cell = _lib.lucid_lstm_cell


def lstm_cell(xw, hw, c):
    """One LSTM step from the input's and the hidden state's products (xw, hw: [batch, 4 * hidden],
    gates in PyTorch's order: input, forget, cell, output) and the cell state c ([batch, hidden]):
    the new hidden state to h and the new cell state to c_new.
    """
    h_ = Record()
    c_new_ = Record()
    rc = _lucid_lstm_cell((xw if xw.__class__ is int else xw._h), (hw if hw.__class__ is int else hw._h), (c if c.__class__ is int else c._h), h_, c_new_)
    if rc:
        _raise(rc)
    return h_, c_new_


_lucid_lstm_layer = _lib.lucid_lstm_layer


def lstm_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse):
    """One LSTM layer over a sequence x ([steps, batch, features]) from the states h0 and c0
    ([batch, hidden]), with PyTorch's weights (w_ih [4 * hidden, features], w_hh [4 * hidden,
    hidden]) and optional biases (0 for none), from the last step to the first when reverse: every
    step's hidden state to out ([steps, batch, hidden]), the final ones to h_n and c_n.
    """
    out_ = Record()
    h_n_ = Record()
    c_n_ = Record()
    rc = _lucid_lstm_layer((x if x.__class__ is int else x._h), (h0 if h0.__class__ is int else h0._h), (c0 if c0.__class__ is int else c0._h), (w_ih if w_ih.__class__ is int else w_ih._h), (w_hh if w_hh.__class__ is int else w_hh._h), (b_ih if b_ih.__class__ is int else b_ih._h), (b_hh if b_hh.__class__ is int else b_hh._h), reverse, out_, h_n_, c_n_)
    if rc:
        _raise(rc)
    return out_, h_n_, c_n_


_lucid_gru_cell = _lib.lucid_gru_cell


def gru_cell(xw, hw, h):
    """One GRU step from the input's and the hidden state's products (xw, hw: [batch, 3 * hidden],
    each with its bias, gates in PyTorch's order: reset, update, new) and the hidden state h
    ([batch, hidden]): the new hidden state n + z * (h - n), with n = tanh(xw_n + r * hw_n).
    """
    out_ = Record()
    rc = _lucid_gru_cell((xw if xw.__class__ is int else xw._h), (hw if hw.__class__ is int else hw._h), (h if h.__class__ is int else h._h), out_)
    if rc:
        _raise(rc)
    return out_


_lucid_gru_layer = _lib.lucid_gru_layer


def gru_layer(x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
    """One GRU layer over a sequence x ([steps, batch, features]) from the state h0 ([batch,
    hidden]), with PyTorch's weights (w_ih [3 * hidden, features], w_hh [3 * hidden, hidden]) and
    optional biases (0 for none), from the last step to the first when reverse: every step's hidden
    state to out ([steps, batch, hidden]), the final one to h_n.
    """
    out_ = Record()
    h_n_ = Record()
    rc = _lucid_gru_layer((x if x.__class__ is int else x._h), (h0 if h0.__class__ is int else h0._h), (w_ih if w_ih.__class__ is int else w_ih._h), (w_hh if w_hh.__class__ is int else w_hh._h), (b_ih if b_ih.__class__ is int else b_ih._h), (b_hh if b_hh.__class__ is int else b_hh._h), reverse, out_, h_n_)
    if rc:
        _raise(rc)
    return out_, h_n_


_lucid_rnn_layer = _lib.lucid_rnn_layer


def rnn_layer(x, h0, w_ih, w_hh, b_ih, b_hh, relu, reverse):
    """One Elman RNN layer over a sequence x ([steps, batch, features]) from the state h0 ([batch,
    hidden]): h' = tanh (or, when relu, ReLU) of x w_ih^T + b_ih + h w_hh^T + b_hh, with PyTorch's
    weights (w_ih [hidden, features], w_hh [hidden, hidden]) and optional biases (0 for none), from
    the last step to the first when reverse: every step's hidden state to out ([steps, batch,
    hidden]), the final one to h_n.
    """
    out_ = Record()
    h_n_ = Record()
    rc = _lucid_rnn_layer((x if x.__class__ is int else x._h), (h0 if h0.__class__ is int else h0._h), (w_ih if w_ih.__class__ is int else w_ih._h), (w_hh if w_hh.__class__ is int else w_hh._h), (b_ih if b_ih.__class__ is int else b_ih._h), (b_hh if b_hh.__class__ is int else b_hh._h), relu, reverse, out_, h_n_)
    if rc:
        _raise(rc)
    return out_, h_n_


_lucid_layer_norm = _lib.lucid_layer_norm


def layer_norm(a, normalized_shape, weight, bias, eps):
    normalized_shape_, ndim = _int64s(normalized_shape)
    out_ = Record()
    rc = _lucid_layer_norm((a if a.__class__ is int else a._h), normalized_shape_, ndim, (weight if weight.__class__ is int else weight._h), (bias if bias.__class__ is int else bias._h), eps, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_group_norm = _lib.lucid_group_norm


def group_norm(a, groups, weight, bias, eps):
    if not -0x8000000000000000 <= groups <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('groups', groups)
    out_ = Record()
    rc = _lucid_group_norm((a if a.__class__ is int else a._h), groups, (weight if weight.__class__ is int else weight._h), (bias if bias.__class__ is int else bias._h), eps, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_batch_norm = _lib.lucid_batch_norm


def batch_norm(a, running_mean, running_var, weight, bias, training, momentum, eps):
    """In training with running statistics, also writes their updated (float32) values; else 0."""
    out_ = c_uint32()
    new_mean_ = c_uint32()
    new_var_ = c_uint32()
    rc = _lucid_batch_norm((a if a.__class__ is int else a._h), (running_mean if running_mean.__class__ is int else running_mean._h), (running_var if running_var.__class__ is int else running_var._h), (weight if weight.__class__ is int else weight._h), (bias if bias.__class__ is int else bias._h), training, momentum, eps, byref(out_), byref(new_mean_), byref(new_var_))
    if rc:
        _raise(rc)
    return out_.value, new_mean_.value, new_var_.value


_lucid_conv2d = _lib.lucid_conv2d


def conv2d(x, w, b, params):
    """params: stride h, w; padding h, w; dilation h, w; groups."""
    params_ = _int64s(params, 7)
    out_ = Record()
    rc = _lucid_conv2d((x if x.__class__ is int else x._h), (w if w.__class__ is int else w._h), (b if b.__class__ is int else b._h), params_, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_conv1d = _lib.lucid_conv1d


def conv1d(x, w, b, params):
    """params: stride, padding, dilation, groups."""
    params_ = _int64s(params, 4)
    out_ = Record()
    rc = _lucid_conv1d((x if x.__class__ is int else x._h), (w if w.__class__ is int else w._h), (b if b.__class__ is int else b._h), params_, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_conv_transpose2d = _lib.lucid_conv_transpose2d


def conv_transpose2d(x, w, b, params):
    """params: stride h, w; padding h, w; output padding h, w; dilation h, w; groups."""
    params_ = _int64s(params, 9)
    out_ = Record()
    rc = _lucid_conv_transpose2d((x if x.__class__ is int else x._h), (w if w.__class__ is int else w._h), (b if b.__class__ is int else b._h), params_, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_max_pool2d = _lib.lucid_max_pool2d


def max_pool2d(x, params, ceil_mode):
    """params: kernel h, w; stride h, w; padding h, w; dilation h, w."""
    params_ = _int64s(params, 8)
    out_ = Record()
    rc = _lucid_max_pool2d((x if x.__class__ is int else x._h), params_, ceil_mode, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_avg_pool2d = _lib.lucid_avg_pool2d


def avg_pool2d(x, params, ceil_mode, count_include_pad, divisor_override):
    """params: kernel h, w; stride h, w; padding h, w. divisor_override 0 means none."""
    params_ = _int64s(params, 6)
    if not -0x8000000000000000 <= divisor_override <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('divisor_override', divisor_override)
    out_ = Record()
    rc = _lucid_avg_pool2d((x if x.__class__ is int else x._h), params_, ceil_mode, count_include_pad, divisor_override, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_adaptive_avg_pool2d = _lib.lucid_adaptive_avg_pool2d


def adaptive_avg_pool2d(x, out_h, out_w):
    if not -0x8000000000000000 <= out_h <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('out_h', out_h)
    if not -0x8000000000000000 <= out_w <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('out_w', out_w)
    out_ = Record()
    rc = _lucid_adaptive_avg_pool2d((x if x.__class__ is int else x._h), out_h, out_w, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_pointwise_loss = _lib.lucid_pointwise_loss


def pointwise_loss(kind, input, target, reduction):
    """kind: lucid_pointwise_loss_kind."""
    out_ = Record()
    rc = _lucid_pointwise_loss(kind, (input if input.__class__ is int else input._h), (target if target.__class__ is int else target._h), reduction, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_nll_loss = _lib.lucid_nll_loss


def nll_loss(input, target, weight, ignore_index, reduction):
    if not -0x8000000000000000 <= ignore_index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('ignore_index', ignore_index)
    out_ = Record()
    rc = _lucid_nll_loss((input if input.__class__ is int else input._h), (target if target.__class__ is int else target._h), (weight if weight.__class__ is int else weight._h), ignore_index, reduction, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_cross_entropy = _lib.lucid_cross_entropy


def cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    if not -0x8000000000000000 <= ignore_index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('ignore_index', ignore_index)
    out_ = Record()
    rc = _lucid_cross_entropy((input if input.__class__ is int else input._h), (target if target.__class__ is int else target._h), (weight if weight.__class__ is int else weight._h), ignore_index, reduction, label_smoothing, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_binary_cross_entropy = _lib.lucid_binary_cross_entropy


def binary_cross_entropy(input, target, weight, reduction):
    """Of probabilities (each log clamped at -100); refused under autocast. weight 0: none."""
    out_ = Record()
    rc = _lucid_binary_cross_entropy((input if input.__class__ is int else input._h), (target if target.__class__ is int else target._h), (weight if weight.__class__ is int else weight._h), reduction, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_bce_with_logits = _lib.lucid_bce_with_logits


def bce_with_logits(input, target, weight, pos_weight, reduction):
    out_ = Record()
    rc = _lucid_bce_with_logits((input if input.__class__ is int else input._h), (target if target.__class__ is int else target._h), (weight if weight.__class__ is int else weight._h), (pos_weight if pos_weight.__class__ is int else pos_weight._h), reduction, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_custom_function_record = _lib.lucid_custom_function_record


def custom_function_record(name, inputs, output, context):
    """`output` (computed by the caller, untracked) recorded as the result of a function `name` of
    the `count` tensors `inputs`, with the registered backward and `context`: *out is the tracked
    output (the output itself when no input requires grad or grad mode is off).
    """
    inputs_, count = _handles(inputs)
    out_ = c_uint32()
    rc = _lucid_custom_function_record(_name(name), inputs_, count, (output if output.__class__ is int else output._h), context, byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_tensor_grad = _lib.lucid_tensor_grad


def tensor_grad(t):
    """The leaf's accumulated gradient as a new reference, or 0 when there is none."""
    out_ = c_uint32()
    rc = _lucid_tensor_grad((t if t.__class__ is int else t._h), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_tensor_set_grad = _lib.lucid_tensor_set_grad


def tensor_set_grad(t, grad):
    """Replaces the leaf's gradient (same shape, dtype and device), or clears it with 0."""
    rc = _lucid_tensor_set_grad((t if t.__class__ is int else t._h), (grad if grad.__class__ is int else grad._h))
    if rc:
        _raise(rc)


_lucid_tensor_grad_fn = _lib.lucid_tensor_grad_fn


def tensor_grad_fn(t):
    """The name of the op that made t ('MatmulBackward', static storage), or NULL for a leaf."""
    name_ = c_char_p()
    rc = _lucid_tensor_grad_fn((t if t.__class__ is int else t._h), byref(name_))
    if rc:
        _raise(rc)
    return _text(name_.value)


_lucid_set_grad_enabled = _lib.lucid_set_grad_enabled


def set_grad_enabled(enabled):
    """Grad mode of the calling thread (on for a new thread). `previous` may be NULL."""
    previous_ = c_int32()
    rc = _lucid_set_grad_enabled(enabled, byref(previous_))
    if rc:
        _raise(rc)
    return previous_.value


_lucid_is_grad_enabled = _lib.lucid_is_grad_enabled


def is_grad_enabled():
    out_ = c_int32()
    rc = _lucid_is_grad_enabled(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_tensor_register_hook = _lib.lucid_tensor_register_hook


def tensor_register_hook(t, kind, context):
    """Registers the hook `context` of `kind` on t (which requires grad; a leaf for
    LUCID_HOOK_POST_ACCUMULATE), after the hooks t already has: *key removes it. An op result's
    hooks see the gradient of the value t had when they were registered.
    """
    key_ = c_uint64()
    rc = _lucid_tensor_register_hook((t if t.__class__ is int else t._h), kind, context, byref(key_))
    if rc:
        _raise(rc)
    return key_.value


_lucid_hook_remove = _lib.lucid_hook_remove


def hook_remove(key):
    """Unregisters a hook; *removed is 0 when it was already gone."""
    removed_ = c_int32()
    rc = _lucid_hook_remove(key, byref(removed_))
    if rc:
        _raise(rc)
    return removed_.value


_lucid_tensor_retain_grad = _lib.lucid_tensor_retain_grad


def tensor_retain_grad(t):
    """Makes the op result t keep its gradient in grad during backward passes (a leaf keeps it)."""
    rc = _lucid_tensor_retain_grad((t if t.__class__ is int else t._h))
    if rc:
        _raise(rc)


_lucid_tensor_retains_grad = _lib.lucid_tensor_retains_grad


def tensor_retains_grad(t):
    out_ = c_int32()
    rc = _lucid_tensor_retains_grad((t if t.__class__ is int else t._h), byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_sgd_step = _lib.lucid_sgd_step


def sgd_step(param, grad, buffer, found_inf, lr, momentum, dampening, weight_decay, nesterov, maximize):
    """torch.optim.SGD: param and buffer are updated in place. buffer 0 on the first step; then
    *new_buffer is the buffer made for it (0 when momentum is 0 or a buffer was given, or when a
    first step with dampening was skipped).
    """
    new_buffer_ = c_uint32()
    rc = _lucid_sgd_step((param if param.__class__ is int else param._h), (grad if grad.__class__ is int else grad._h), (buffer if buffer.__class__ is int else buffer._h), (found_inf if found_inf.__class__ is int else found_inf._h), lr, momentum, dampening, weight_decay, nesterov, maximize, byref(new_buffer_))
    if rc:
        _raise(rc)
    return new_buffer_.value


_lucid_adam_step = _lib.lucid_adam_step


def adam_step(param, grad, m, v, step, found_inf, lr, beta1, beta2, eps, weight_decay, decoupled, maximize):
    """torch.optim.Adam, or AdamW when `decoupled`: param, m and v are updated in place, and step (a
    one-element float32 on param's device, the steps taken) goes up by one. m and v 0 before the
    first step: *new_m and *new_v are then the moments made for it (0 for those given).
    """
    new_m_ = c_uint32()
    new_v_ = c_uint32()
    rc = _lucid_adam_step((param if param.__class__ is int else param._h), (grad if grad.__class__ is int else grad._h), (m if m.__class__ is int else m._h), (v if v.__class__ is int else v._h), (step if step.__class__ is int else step._h), (found_inf if found_inf.__class__ is int else found_inf._h), lr, beta1, beta2, eps, weight_decay, decoupled, maximize, byref(new_m_), byref(new_v_))
    if rc:
        _raise(rc)
    return new_m_.value, new_v_.value


_lucid_unscale_grads = _lib.lucid_unscale_grads


def unscale_grads(grads, inv_scale, found_inf):
    """GradScaler's unscale: grads[i] *= inv_scale in float32, in place, and found_inf is set to 1
    when any value is infinite or NaN (left as it is otherwise).
    """
    grads_, count = _handles(grads)
    rc = _lucid_unscale_grads(grads_, count, (inv_scale if inv_scale.__class__ is int else inv_scale._h), (found_inf if found_inf.__class__ is int else found_inf._h))
    if rc:
        _raise(rc)


_lucid_update_scale = _lib.lucid_update_scale


def update_scale(scale, growth_tracker, found_inf, growth_factor, backoff_factor, growth_interval):
    """GradScaler's update of scale and growth_tracker, in place: backoff_factor after a skipped
    step, growth_factor after growth_interval clean ones (unless past the float32 range).
    """
    if not -0x8000000000000000 <= growth_interval <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('growth_interval', growth_interval)
    rc = _lucid_update_scale((scale if scale.__class__ is int else scale._h), (growth_tracker if growth_tracker.__class__ is int else growth_tracker._h), (found_inf if found_inf.__class__ is int else found_inf._h), growth_factor, backoff_factor, growth_interval)
    if rc:
        _raise(rc)


_lucid_safetensors_read = _lib.lucid_safetensors_read


def safetensors_read(data, nbytes):
    """Checks the file data[0..nbytes) and keeps its description on the calling thread for
    lucid_safetensors_tensor and lucid_safetensors_metadata, until its next read: *tensors = how
    many tensors, *metadata = how many metadata entries. Refused with LUCID_ERR_VALUE and the reason
    ('not a valid safetensors file: ...'): a short, oversized or overlong header length; a header
    that is not UTF-8, not JSON, nested deeper than 128, not an object or names a key twice; an
    entry without a known dtype, a shape of non-negative integers or two data_offsets; data ranges
    with gaps or overlaps, sizes that are not the shape's, bytes after the last range; metadata that
    is not strings; a NUL in a name; BOOL bytes other than 0 and 1; a dtype lucid cannot hold ('...
    which lucid cannot hold').
    """
    if not -0x8000000000000000 <= nbytes <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('nbytes', nbytes)
    tensors_ = c_int64()
    metadata_ = c_int64()
    rc = _lucid_safetensors_read(data, nbytes, byref(tensors_), byref(metadata_))
    if rc:
        _raise(rc)
    return tensors_.value, metadata_.value


_lucid_safetensors_declared_size = _lib.lucid_safetensors_declared_size


def safetensors_declared_size(header, nbytes):
    """How many bytes of tensor data the header JSON header[0..nbytes) declares (the furthest end of
    its data_offsets), or 0 when it is not a header: a stream is read no further than that, and
    lucid_safetensors_read then names anything wrong.
    """
    if not -0x8000000000000000 <= nbytes <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('nbytes', nbytes)
    size_ = c_int64()
    rc = _lucid_safetensors_declared_size(header, nbytes, byref(size_))
    if rc:
        _raise(rc)
    return size_.value


_lucid_safetensors_metadata = _lib.lucid_safetensors_metadata


def safetensors_metadata(index):
    """Metadata entry `index` of the last read (engine-owned, valid until the thread's next read)."""
    if not -0x8000000000000000 <= index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('index', index)
    key_ = c_char_p()
    value_ = c_char_p()
    rc = _lucid_safetensors_metadata(index, byref(key_), byref(value_))
    if rc:
        _raise(rc)
    return _text(key_.value), _text(value_.value)


_lucid_metal_is_available = _lib.lucid_metal_is_available


def metal_is_available():
    """1 when Metal kernels serve the 'metal' device, 0 where the host fallback does."""
    out_ = c_int32()
    rc = _lucid_metal_is_available(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_metal_synchronize = _lib.lucid_metal_synchronize


def metal_synchronize():
    """Waits until every kernel queued on 'metal' has finished. LUCID_ERR_RUNTIME when 'metal' is
    unavailable (no Metal and LUCID_METAL_FALLBACK=0).
    """
    rc = _lucid_metal_synchronize()
    if rc:
        _raise(rc)


_lucid_metal_fallback_entries = _lib.lucid_metal_fallback_entries


def metal_fallback_entries():
    """Ops whose kernels the 'metal' device's backend declined, so that the host kernels ran them
    over the device's memory: *out = how many distinct ops so far. Entries only ever grow.
    """
    out_ = c_int64()
    rc = _lucid_metal_fallback_entries(byref(out_))
    if rc:
        _raise(rc)
    return out_.value


_lucid_metal_fallback_entry = _lib.lucid_metal_fallback_entry


def metal_fallback_entry(index):
    """Entry `index` (0 <= index < entries): the op's name (engine-owned, valid for the process) and
    how many times it ran on the host.
    """
    if not -0x8000000000000000 <= index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('index', index)
    name_ = c_char_p()
    count_ = c_int64()
    rc = _lucid_metal_fallback_entry(index, byref(name_), byref(count_))
    if rc:
        _raise(rc)
    return _text(name_.value), count_.value


_lucid_metal_self_test = _lib.lucid_metal_self_test


def metal_self_test():
    """Runs the Metal backend's self-test now: every kernel it has, on small fixed inputs, against
    the host kernels (the same test runs before the backend first serves 'metal'; a failure keeps
    'metal' on the host fallback). *checks = how many checks ran, *failures = how many disagreed.
    LUCID_ERR_RUNTIME where there is no Metal backend.
    """
    checks_ = c_int64()
    failures_ = c_int64()
    rc = _lucid_metal_self_test(byref(checks_), byref(failures_))
    if rc:
        _raise(rc)
    return checks_.value, failures_.value


_lucid_metal_self_test_entry = _lib.lucid_metal_self_test_entry


def metal_self_test_entry(index):
    """Check `index` of the last self-test run: the op (engine-owned name), the dtype code, the
    largest relative error against the host, the tolerance it is held to, and what went wrong beyond
    the numbers (the kernel compiler's message for the check 'compile_library'; '' otherwise;
    engine-owned, valid until the next self-test).
    """
    if not -0x8000000000000000 <= index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('index', index)
    op_ = c_char_p()
    dtype_ = c_int32()
    max_error_ = c_double()
    tolerance_ = c_double()
    detail_ = c_char_p()
    rc = _lucid_metal_self_test_entry(index, byref(op_), byref(dtype_), byref(max_error_), byref(tolerance_), byref(detail_))
    if rc:
        _raise(rc)
    return _text(op_.value), dtype_.value, max_error_.value, tolerance_.value, _text(detail_.value)


_lucid_metal_dispatch_entry = _lib.lucid_metal_dispatch_entry


def metal_dispatch_entry(index):
    """Dispatch entry `index` of the last lucid_metal_stats call: the kernel's name (engine-owned,
    valid for the process) and how many times it was dispatched.
    """
    if not -0x8000000000000000 <= index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('index', index)
    kernel_ = c_char_p()
    count_ = c_int64()
    rc = _lucid_metal_dispatch_entry(index, byref(kernel_), byref(count_))
    if rc:
        _raise(rc)
    return _text(kernel_.value), count_.value


_lucid_metal_libraries = _lib.lucid_metal_libraries


def metal_libraries():
    """The Metal backend's kernel libraries, one per kernel family, made when 'metal' is first used
    (this call readies it if it has not been): *count = how many (0 where there is no Metal
    backend).
    """
    count_ = c_int64()
    rc = _lucid_metal_libraries(byref(count_))
    if rc:
        _raise(rc)
    return count_.value


_lucid_metal_library_entry = _lib.lucid_metal_library_entry


def metal_library_entry(index):
    """Library entry `index` of the last lucid_metal_libraries call (engine-owned strings, valid for
    the process): the family's name; where its kernels came from, 'prebuilt' (the library compiled
    ahead of time, loaded from <the engine's folder>/metal or LUCID_METALLIB_DIR) or 'source'
    (compiled at run time); the prebuilt library's path, or why the family was compiled from source
    although a folder of prebuilt libraries exists ('' when there is none); and why the library
    failed ('' when it did not).
    """
    if not -0x8000000000000000 <= index <= 0x7FFFFFFFFFFFFFFF:
        _out_of_range('index', index)
    family_ = c_char_p()
    origin_ = c_char_p()
    detail_ = c_char_p()
    error_ = c_char_p()
    rc = _lucid_metal_library_entry(index, byref(family_), byref(origin_), byref(detail_), byref(error_))
    if rc:
        _raise(rc)
    return _text(family_.value), _text(origin_.value), _text(detail_.value), _text(error_.value)


_lucid_linalg_lu_factor = _lib.lucid_linalg_lu_factor


def linalg_lu_factor(a, check):
    """LU with partial pivoting: lu (L below the diagonal, unit diagonal implied, U on and above),
    pivots (int32 [..., min(m, n)], 1-based row swaps), info (int32 [...], k > 0 when U[k-1, k-1] is
    zero). check != 0 raises on a zero pivot instead.
    """
    lu_ = c_uint32()
    pivots_ = c_uint32()
    info_ = c_uint32()
    rc = _lucid_linalg_lu_factor((a if a.__class__ is int else a._h), check, byref(lu_), byref(pivots_), byref(info_))
    if rc:
        _raise(rc)
    return lu_.value, pivots_.value, info_.value


_lucid_linalg_solve_triangular = _lib.lucid_linalg_solve_triangular


def linalg_solve_triangular(a, b, upper, left, unitriangular):
    """X with A @ X = B (left != 0) or X @ A = B, A upper or lower triangular (the other triangle is
    not read), a unit diagonal assumed when unitriangular != 0; batch dimensions broadcast.
    """
    out_ = Record()
    rc = _lucid_linalg_solve_triangular((a if a.__class__ is int else a._h), (b if b.__class__ is int else b._h), upper, left, unitriangular, out_)
    if rc:
        _raise(rc)
    return out_


_lucid_linalg_cholesky = _lib.lucid_linalg_cholesky


def linalg_cholesky(a, upper, check):
    """Cholesky factor L (A = L @ L^T), or U (A = U^T @ U) when upper != 0, and info (int32 [...], k
    > 0 when the leading minor of order k is not positive-definite; check != 0 raises instead).
    """
    l_ = c_uint32()
    info_ = c_uint32()
    rc = _lucid_linalg_cholesky((a if a.__class__ is int else a._h), upper, check, byref(l_), byref(info_))
    if rc:
        _raise(rc)
    return l_.value, info_.value


_lucid_linalg_eigh = _lib.lucid_linalg_eigh


def linalg_eigh(a, upper, vectors):
    """Eigenvalues (ascending) and, when vectors != 0, eigenvectors (columns) of symmetric A, read
    from its lower triangle (upper != 0: upper).
    """
    values_ = c_uint32()
    vecs_ = c_uint32()
    rc = _lucid_linalg_eigh((a if a.__class__ is int else a._h), upper, vectors, byref(values_), byref(vecs_))
    if rc:
        _raise(rc)
    return values_.value, vecs_.value


_lucid_linalg_svd = _lib.lucid_linalg_svd


def linalg_svd(a, full, vectors):
    """A = U @ diag(S) @ Vh, S descending; U and Vh full (m x m, n x n) when full != 0, and only
    when vectors != 0.
    """
    u_ = c_uint32()
    s_ = c_uint32()
    vh_ = c_uint32()
    rc = _lucid_linalg_svd((a if a.__class__ is int else a._h), full, vectors, byref(u_), byref(s_), byref(vh_))
    if rc:
        _raise(rc)
    return u_.value, s_.value, vh_.value


_lucid_linalg_qr = _lib.lucid_linalg_qr


def linalg_qr(a, mode):
    """A = Q @ R, as `mode` (a LUCID_QR_* code) says; q = 0 for LUCID_QR_R."""
    q_ = c_uint32()
    r_ = c_uint32()
    rc = _lucid_linalg_qr((a if a.__class__ is int else a._h), mode, byref(q_), byref(r_))
    if rc:
        _raise(rc)
    return q_.value, r_.value


_lucid_linalg_geqrf = _lib.lucid_linalg_geqrf


def linalg_geqrf(a):
    """LAPACK's geqrf: R and the Householder reflectors packed in qr, their scales in tau."""
    qr_ = c_uint32()
    tau_ = c_uint32()
    rc = _lucid_linalg_geqrf((a if a.__class__ is int else a._h), byref(qr_), byref(tau_))
    if rc:
        _raise(rc)
    return qr_.value, tau_.value


_lucid_linalg_ldl_factor = _lib.lucid_linalg_ldl_factor


def linalg_ldl_factor(a, check):
    """Bunch-Kaufman A = P L D L^T P^T of symmetric A (lower triangle read): ld (LAPACK's sytrf
    packing, zeros above the diagonal), pivots (int32 [..., n], negative for 2 x 2 blocks), info
    (int32 [...], k > 0 when D[k-1, k-1] is zero; check != 0 raises instead). Not differentiable.
    """
    ld_ = c_uint32()
    pivots_ = c_uint32()
    info_ = c_uint32()
    rc = _lucid_linalg_ldl_factor((a if a.__class__ is int else a._h), check, byref(ld_), byref(pivots_), byref(info_))
    if rc:
        _raise(rc)
    return ld_.value, pivots_.value, info_.value


_lucid_linalg_ldl_solve = _lib.lucid_linalg_ldl_solve


def linalg_ldl_solve(ld, pivots, b):
    """X with A @ X = B for A given by lucid_linalg_ldl_factor's ld and pivots. Not differentiable."""
    out_ = Record()
    rc = _lucid_linalg_ldl_solve((ld if ld.__class__ is int else ld._h), (pivots if pivots.__class__ is int else pivots._h), (b if b.__class__ is int else b._h), out_)
    if rc:
        _raise(rc)
    return out_


# The entry points no rule above covers, hand-written in lucid/_C/_calls.py.
HAND_WRITTEN = frozenset({
    "lucid_last_error",
    "guard_create",
    "guard_destroy",
    "lucid_amp_inspect_entry",
    "lucid_tensor_release",
    "lucid_tensor_release_many",
    "lucid_tensor_shape",
    "lucid_set_element",
    "lucid_split",
    "lucid_attention",
    "lucid_backward",
    "lucid_custom_function_callbacks",
    "lucid_hook_callbacks",
    "lucid_autograd_backward",
    "lucid_autograd_grad",
    "lucid_safetensors_tensor",
    "lucid_safetensors_write",
    "lucid_metal_stats",
    "lucid_set_warning_handler",
})
