// Gathers and scatter-adds on the GPU, with the host kernels' rules (Host+Indexing.swift).
// gather: one thread per output element; an index outside the gathered dimension writes
// nothing and raises a flag the backend reads. scatter_add: one thread per line (the
// elements along the scattered dimension at one position of the others), adding in the
// line's order, so that each output element is owned by one thread and sums exactly as the
// host does, into float32 (int64 for integers) storage; or, for floating lines of many
// elements, one thread per element with atomic adds. An index outside the accumulator's
// dimension (a gather whose own error is raised only at the next synchronisation may be
// followed by its backward) adds nothing and raises the flag, as gather's does: nothing is
// written outside the accumulator. Compiled after Common.metal and Elementwise.metal (for
// Layout), in one library.

// Field order and sizes match `indexSteps` in Metal+Indexing.swift.
struct IndexSteps {
    long length;      // scatter: elements per line (index.shape[dim])
    long index_step;  // scatter: stride of index along dim
    long src_step;    // gather: stride of a along dim; scatter: stride of src along dim
    long out_step;    // scatter: stride of the accumulator along dim
    long size;        // gather: a.shape[dim]; scatter: the accumulator's shape[dim]
};

// operand 0: the index's strides, 1: a's with dim zeroed, 2: the output's.
#define LUCID_GATHER(NAME, T)                                                                        \
kernel void NAME(device const T* a [[buffer(0)]], device const long* index [[buffer(1)]],           \
                 device T* out [[buffer(2)]], device int* bad [[buffer(3)]],                         \
                 constant Layout& layout [[buffer(4)]], constant IndexSteps& s [[buffer(5)]],        \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= layout.count) return;                                                          \
    long idx = index[element_offset(gid, layout, 0)];                                                \
    if (idx < 0 || idx >= s.size) {                                                                  \
        bad[0] = 1;                                                                                  \
        return;                                                                                      \
    }                                                                                                \
    out[element_offset(gid, layout, 2)] = a[element_offset(gid, layout, 1) + idx * s.src_step];     \
}

LUCID_GATHER(gather_float32, float)
LUCID_GATHER(gather_float16, half)
LUCID_GATHER(gather_bfloat16, bfloat)
LUCID_GATHER(gather_int32, int)
LUCID_GATHER(gather_int64, long)
LUCID_GATHER(gather_bool, uchar)

inline void accumulate(device float& total, float x) { total += x; }
inline void accumulate(device long& total, long x) { total = long(ulong(total) + ulong(x)); }  // wrapping

// `layout` runs over the lines (index's shape with dim set to 1): operand 0 the index's
// strides, 1 src's, 2 the accumulator's with dim zeroed. A is float (for floating src) or
// long (for integer src); the accumulator is contiguous and zeroed.
#define LUCID_SCATTER_ADD(NAME, T, A, READ)                                                          \
kernel void NAME(device const T* src [[buffer(0)]], device const long* index [[buffer(1)]],         \
                 device A* acc [[buffer(2)]], constant Layout& layout [[buffer(3)]],                 \
                 constant IndexSteps& s [[buffer(4)]], device int* bad [[buffer(5)]],                \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= layout.count) return;                                                          \
    long x = element_offset(gid, layout, 0), i = element_offset(gid, layout, 1);                     \
    long k = element_offset(gid, layout, 2);                                                         \
    for (long r = 0; r < s.length; ++r) {                                                            \
        long idx = index[x + r * s.index_step];                                                      \
        if (idx < 0 || idx >= s.size) {                                                              \
            bad[0] = 1;                                                                              \
            continue;                                                                                \
        }                                                                                            \
        accumulate(acc[k + idx * s.out_step], READ(src[i + r * s.src_step]));                        \
    }                                                                                                \
}

// Floating scatter-adds whose lines are long (embedding's backward: one line per embedding
// column, as long as the batch's tokens): one thread per source element, adding into the
// float32 accumulator with a relaxed atomic add. The sums come out in an order the GPU
// chooses, so their last bits may differ from the host's, and from run to run. `layout` runs
// over the index's whole shape: operand 0 the index's strides, 1 src's, 2 the accumulator's
// with dim zeroed.
#define LUCID_SCATTER_ADD_ATOMIC(NAME, T)                                                            \
kernel void NAME(device const T* src [[buffer(0)]], device const long* index [[buffer(1)]],         \
                 device atomic_float* acc [[buffer(2)]], constant Layout& layout [[buffer(3)]],      \
                 constant IndexSteps& s [[buffer(4)]], device int* bad [[buffer(5)]],                \
                 LUCID_THREAD_POSITION) {                                                            \
    const ulong gid = LUCID_THREAD_INDEX;                                                            \
    if (ulong(gid) >= layout.count) return;                                                          \
    long x = element_offset(gid, layout, 0), i = element_offset(gid, layout, 1);                     \
    long idx = index[x];                                                                             \
    if (idx < 0 || idx >= s.size) {                                                                  \
        bad[0] = 1;                                                                                  \
        return;                                                                                      \
    }                                                                                                \
    long k = element_offset(gid, layout, 2) + idx * s.out_step;                                      \
    atomic_fetch_add_explicit(acc + k, widen(src[i]), memory_order_relaxed);                         \
}

LUCID_SCATTER_ADD_ATOMIC(scatter_add_atomic_float32, float)
LUCID_SCATTER_ADD_ATOMIC(scatter_add_atomic_float16, half)
LUCID_SCATTER_ADD_ATOMIC(scatter_add_atomic_bfloat16, bfloat)

#define LUCID_READ_LONG(v) long(v)
LUCID_SCATTER_ADD(scatter_add_float32, float, float, widen)
LUCID_SCATTER_ADD(scatter_add_float16, half, float, widen)
LUCID_SCATTER_ADD(scatter_add_bfloat16, bfloat, float, widen)
LUCID_SCATTER_ADD(scatter_add_int32, int, long, LUCID_READ_LONG)
LUCID_SCATTER_ADD(scatter_add_int64, long, long, LUCID_READ_LONG)
LUCID_SCATTER_ADD(scatter_add_bool, uchar, long, LUCID_READ_LONG)
