/* lucid's Metal kernels compiled as C++ for the Metal emulation: a table of every kernel
 * with its parameters as the MSL source declares them, and a dispatcher that runs every
 * thread of every threadgroup, with threadgroup memory and barriers honoured. The emulated
 * Metal module (tests/metal/Metal) binds buffers and bytes by these descriptions and checks
 * them; gen_kernels.py writes the table. */
#ifndef LUCID_MSL_KERNELS_H
#define LUCID_MSL_KERNELS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct { uint32_t x, y, z; } lucid_msl_size;

/* Where a parameter's value comes from. */
enum {
    LUCID_MSL_DEVICE_POINTER = 0,  /* device T* [[buffer(n)]]: a buffer (+ offset) */
    LUCID_MSL_CONSTANT_REF = 1,    /* constant T& [[buffer(n)]]: setBytes (or a buffer) */
    LUCID_MSL_THREADGROUP = 2,     /* threadgroup T* [[threadgroup(n)]]: threadgroup memory */
    LUCID_MSL_BUILTIN = 3          /* uint/uint2/uint3 [[builtin]]: a thread coordinate */
};

typedef struct {
    const char *name;       /* the parameter's name in the source */
    int32_t kind;           /* LUCID_MSL_* */
    int32_t index;          /* n in [[buffer(n)]] / [[threadgroup(n)]]; -1 for builtins */
    const char *type;       /* the element (or referenced) type as written: float, half, Layout */
    int32_t size;           /* sizeof that type */
    int32_t is_const;       /* 1 for const data */
    const char *builtin;    /* thread_position_in_grid, ...; NULL otherwise */
} lucid_msl_param;

typedef struct {
    uint32_t x, y, z;
} lucid_msl_uint3;

/* The coordinates of one thread, as the MSL built-ins name them. */
typedef struct {
    lucid_msl_uint3 thread_position_in_grid;
    lucid_msl_uint3 threads_per_grid;
    lucid_msl_uint3 thread_position_in_threadgroup;
    lucid_msl_uint3 threadgroup_position_in_grid;
    lucid_msl_uint3 threads_per_threadgroup;
    lucid_msl_uint3 threadgroups_per_grid;
    uint32_t thread_index_in_threadgroup;
} lucid_msl_thread;

typedef struct {
    const char *name;
    const char *unit;        /* the .metal file it comes from */
    uint64_t unit_hash;      /* FNV-1a 64 of the whole library's source (the joined files) */
    int32_t param_count;
    const lucid_msl_param *params;
    int32_t uses_barrier;    /* calls threadgroup_barrier */
    void (*invoke)(void *const *args, const lucid_msl_thread *thread);
} lucid_msl_kernel;

/* Every compiled kernel; *count receives how many. */
const lucid_msl_kernel *lucid_msl_kernels(int32_t *count);

/* Runs `kernel` over `threadgroups` groups of `per_group` threads, launching only threads
 * whose position is inside `grid` (dispatchThreads; for dispatchThreadgroups grid is
 * threadgroups × per_group). args[i] is the value of parameter i (a pointer to the data,
 * NULL for builtins and threadgroup memory); threadgroup_lengths[i] is the byte length of
 * a threadgroup parameter's memory (0 for the others). Returns 0, or -1 with a message in
 * `error`. */
int32_t lucid_msl_dispatch(const lucid_msl_kernel *kernel, void *const *args, const uint32_t *threadgroup_lengths,
                           lucid_msl_size grid,
                           lucid_msl_size threadgroups, lucid_msl_size per_group, char *error, size_t error_size);

/* FNV-1a 64 of `n` bytes (what unit_hash holds). */
uint64_t lucid_msl_hash(const void *bytes, size_t n);

#ifdef __cplusplus
}
#endif
#endif
