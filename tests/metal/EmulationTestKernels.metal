// Kernels that exist only to test the Metal emulation itself (tests/swift/MetalEmulationTests.swift):
// a library of their own, compiled into the check build beside lucid's kernels and made from
// this file's source by the tests.
#include <metal_stdlib>
using namespace metal;

// Each thread publishes its index, and after the barrier reads its right neighbour's: right
// only when the barrier holds every thread until all have written.
kernel void barrier_exchange(device int* out [[buffer(0)]], threadgroup int* shared [[threadgroup(0)]],
                             uint lane [[thread_index_in_threadgroup]], uint width [[threads_per_threadgroup]],
                             uint gid [[thread_position_in_grid]]) {
    shared[lane] = int(lane);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[gid] = shared[(lane + 1) % width];
}

// Odd threads return before the barrier the even ones wait at: barrier divergence.
kernel void diverging_barrier(device int* out [[buffer(0)]], threadgroup int* shared [[threadgroup(0)]],
                              uint lane [[thread_index_in_threadgroup]]) {
    if (lane % 2 == 1) return;
    shared[lane] = 1;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lane] = shared[lane];
}

// Reads threadgroup memory nobody wrote: the emulation fills it with 0xFF bytes.
kernel void read_unwritten(device int* out [[buffer(0)]], threadgroup int* shared [[threadgroup(0)]],
                           uint lane [[thread_index_in_threadgroup]]) {
    out[lane] = shared[lane];
}

// Writes one int past the threadgroup memory it is given (sized for the group's threads).
kernel void write_past_threadgroup_memory(device int* out [[buffer(0)]], threadgroup int* shared [[threadgroup(0)]],
                                          uint lane [[thread_index_in_threadgroup]],
                                          uint width [[threads_per_threadgroup]]) {
    shared[lane + 1] = 1;
    threadgroup_barrier(mem_flags::mem_threadgroup);
    out[lane] = shared[lane] + int(width);
}

// Each thread writes its right neighbour's element: the last one writes past the buffer.
kernel void write_past_buffer_end(device int* out [[buffer(0)]], uint gid [[thread_position_in_grid]]) {
    out[gid + 1] = 1;
}

// SIMD-group collectives over a threadgroup of 48 (a SIMD group of 32 and a partial one of
// 16): each thread writes its group's sum and largest value of (lane index + 1), and the value
// of the lane whose index is its own XOR 5 (its own where that lane is missing).
kernel void simd_collectives(device int* out [[buffer(0)]], uint lane [[thread_index_in_simdgroup]],
                             uint gid [[thread_position_in_grid]]) {
    int value = int(lane) + 1;
    int sum = simd_sum(value), best = simd_max(value), least = simd_min(value);
    int partner = simd_shuffle_xor(value, ushort(5));
    out[gid * 4] = sum;
    out[gid * 4 + 1] = best;
    out[gid * 4 + 2] = least;
    out[gid * 4 + 3] = partner;
}
