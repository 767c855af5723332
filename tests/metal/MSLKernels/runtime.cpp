// The emulated dispatch: every thread of every threadgroup runs, one after another. A kernel
// that calls threadgroup_barrier needs its threads interleaved at each barrier; none of
// lucid's kernels does yet, and such a kernel is refused with a message rather than run wrong.
#include "MSLKernels.h"

#include <stdio.h>
#include <string.h>

extern "C" void lucid_msl_threadgroup_barrier(void) {
    // Unreachable: kernels that call it are refused by lucid_msl_dispatch.
    __builtin_trap();
}

extern "C" uint64_t lucid_msl_hash(const void *bytes, size_t n) {
    const unsigned char *p = static_cast<const unsigned char *>(bytes);
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

extern "C" int32_t lucid_msl_dispatch(const lucid_msl_kernel *kernel, void *const *args, lucid_msl_size grid,
                                      lucid_msl_size groups, lucid_msl_size per_group, char *error,
                                      size_t error_size) {
    if (kernel->uses_barrier) {
        snprintf(error, error_size, "kernel %s calls threadgroup_barrier, which the emulation cannot interleave yet",
                 kernel->name);
        return -1;
    }
    lucid_msl_thread t;
    t.threads_per_grid = {grid.x, grid.y, grid.z};
    t.threads_per_threadgroup = {per_group.x, per_group.y, per_group.z};
    t.threadgroups_per_grid = {groups.x, groups.y, groups.z};
    for (uint32_t gz = 0; gz < groups.z; ++gz)
        for (uint32_t gy = 0; gy < groups.y; ++gy)
            for (uint32_t gx = 0; gx < groups.x; ++gx) {
                t.threadgroup_position_in_grid = {gx, gy, gz};
                uint32_t index = 0;
                for (uint32_t z = 0; z < per_group.z; ++z)
                    for (uint32_t y = 0; y < per_group.y; ++y)
                        for (uint32_t x = 0; x < per_group.x; ++x, ++index) {
                            uint64_t px = uint64_t(gx) * per_group.x + x, py = uint64_t(gy) * per_group.y + y,
                                     pz = uint64_t(gz) * per_group.z + z;
                            if (px >= grid.x || py >= grid.y || pz >= grid.z) continue;
                            t.thread_position_in_threadgroup = {x, y, z};
                            t.thread_index_in_threadgroup = index;
                            t.thread_position_in_grid = {uint32_t(px), uint32_t(py), uint32_t(pz)};
                            kernel->invoke(args, &t);
                        }
            }
    return 0;
}

// float → bfloat16, rounding to nearest even (NaN stays a quiet NaN). Clang calls this helper
// for `bfloat(x)`; the GCC 12 runtime the toolchain links on Debian 12 predates it.
extern "C" __bf16 __truncsfbf2(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint16_t r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r = uint16_t((u >> 16) | 0x40u);
    } else {
        r = uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
    }
    __bf16 b;
    memcpy(&b, &r, sizeof b);
    return b;
}
