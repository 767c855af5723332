// The emulated dispatch. Every thread of every threadgroup runs. A kernel without
// threadgroup_barrier runs its threads one after another. A kernel with barriers runs each
// threadgroup's threads as fibers on one OS thread: each runs until it reaches a barrier (or
// returns), and the group moves past a barrier only when every thread has reached it, so
// threadgroup memory written before a barrier is seen by all threads after it. A thread that
// returns while others wait at a barrier is barrier divergence (undefined on a GPU) and fails
// the dispatch with a message.
//
// Threadgroup memory ([[threadgroup(n)]] parameters, sized by setThreadgroupMemoryLength) is
// allocated per threadgroup and filled with 0xFF bytes (NaN as a float, -1 as an integer)
// before each group runs, so a kernel that reads what it never wrote shows it; a write past
// its end (into a guard band checked after each group) fails the dispatch.
#include "MSLKernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace {

// Each fiber's stack: kernels are small C++ functions (plus libm), so 128 KiB is ample; a
// guard page below it turns an overflow into a fault rather than corruption.
constexpr size_t kStackBytes = 128 * 1024;

#if defined(__x86_64__)
// A context switch for the System V x86-64 ABI: pushes the callee-saved registers and the
// SSE/x87 control words on the current stack, stores the stack pointer in *from, loads `to`
// and pops the same frame from there. (ucontext's swapcontext would also do two signal-mask
// system calls per switch.)
extern "C" void lucid_msl_fiber_switch(void **from, void *to);
asm(R"(
    .text
    .globl lucid_msl_fiber_switch
    .hidden lucid_msl_fiber_switch
    .type lucid_msl_fiber_switch, @function
lucid_msl_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size lucid_msl_fiber_switch, .-lucid_msl_fiber_switch
)");
#endif

struct Fiber {
    void *stack = nullptr;  // the usable stack (above the guard page)
#if defined(__x86_64__)
    void *sp = nullptr;
#else
    ucontext_t context;
#endif
    lucid_msl_thread coords;
    bool at_barrier = false;
    bool done = false;
};

struct Group {
    const lucid_msl_kernel *kernel = nullptr;
    void *const *args = nullptr;
    std::vector<Fiber> fibers;
    std::vector<double> posted;  // a SIMD-group exchange's values, one per fiber
    size_t current = 0;
#if defined(__x86_64__)
    void *scheduler_sp = nullptr;
#else
    ucontext_t scheduler;
#endif
};

thread_local Group *running = nullptr;

void yield_to_scheduler(Fiber &f) {
#if defined(__x86_64__)
    lucid_msl_fiber_switch(&f.sp, running->scheduler_sp);
#else
    swapcontext(&f.context, &running->scheduler);
#endif
}

void fiber_main() {
    Group *g = running;
    Fiber &f = g->fibers[g->current];
    g->kernel->invoke(g->args, &f.coords);
    f.done = true;
    yield_to_scheduler(f);
    __builtin_trap();  // a finished fiber is never resumed
}

void *new_stack() {
    long page = sysconf(_SC_PAGESIZE);
    void *base = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    mprotect(base, page, PROT_NONE);
    return static_cast<char *>(base) + page;
}

// Stacks are kept for the process's life: one per thread of the largest threadgroup seen.
thread_local std::vector<void *> stacks;

bool prepare(Fiber &f, void *stack) {
    f.stack = stack;
    f.at_barrier = false;
    f.done = false;
#if defined(__x86_64__)
    // The frame lucid_msl_fiber_switch pops: control words, r15 r14 r13 r12 rbx rbp, then the
    // return address (fiber_main), placed so that fiber_main starts with the stack aligned
    // as after a call (rsp + 8 a multiple of 16).
    uintptr_t top = (reinterpret_cast<uintptr_t>(stack) + kStackBytes) & ~uintptr_t(15);
    void **slot = reinterpret_cast<void **>(top - 16);  // 16-aligned: the return address
    *slot = reinterpret_cast<void *>(&fiber_main);
    slot[1] = nullptr;
    void **frame = slot - 7;
    for (int i = 1; i < 7; ++i) frame[i] = nullptr;
    uint32_t control[2];
    asm volatile("stmxcsr %0" : "=m"(control[0]));
    asm volatile("fnstcw %0" : "=m"(control[1]));
    memcpy(frame, control, sizeof control);
    f.sp = frame;
#else
    if (getcontext(&f.context) != 0) return false;
    f.context.uc_stack.ss_sp = stack;
    f.context.uc_stack.ss_size = kStackBytes;
    f.context.uc_link = nullptr;
    makecontext(&f.context, fiber_main, 0);
#endif
    return true;
}

void resume(Group &g, size_t i) {
    g.current = i;
#if defined(__x86_64__)
    lucid_msl_fiber_switch(&g.scheduler_sp, g.fibers[i].sp);
#else
    swapcontext(&g.scheduler, &g.fibers[i].context);
#endif
}

// Runs one threadgroup's launched threads as fibers, barrier to barrier.
int32_t run_group(Group &g, char *error, size_t error_size) {
    size_t n = g.fibers.size();
    while (stacks.size() < n) {
        void *s = new_stack();
        if (!s) {
            snprintf(error, error_size, "kernel %s: no memory for %zu thread stacks", g.kernel->name, n);
            return -1;
        }
        stacks.push_back(s);
    }
    for (size_t i = 0; i < n; ++i) {
        if (!prepare(g.fibers[i], stacks[i])) {
            snprintf(error, error_size, "kernel %s: could not make a thread context", g.kernel->name);
            return -1;
        }
    }
    Group *outer = running;
    running = &g;
    int32_t status = 0;
    for (;;) {
        size_t waiting = 0, finished = 0, finished_now = 0;
        for (size_t i = 0; i < n; ++i) {
            Fiber &f = g.fibers[i];
            if (f.done) {
                ++finished;
                continue;
            }
            f.at_barrier = false;
            resume(g, i);
            if (f.done) {
                ++finished;
                ++finished_now;
            } else {
                ++waiting;
            }
        }
        if (waiting == 0) break;
        if (finished > 0) {
            snprintf(error, error_size,
                     "kernel %s: barrier divergence: %zu of %zu threads of threadgroup (%u, %u, %u) returned while "
                     "the others wait at threadgroup_barrier",
                     g.kernel->name, finished, n, g.fibers[0].coords.threadgroup_position_in_grid.x,
                     g.fibers[0].coords.threadgroup_position_in_grid.y,
                     g.fibers[0].coords.threadgroup_position_in_grid.z);
            status = -1;
            break;
        }
        (void)finished_now;
    }
    running = outer;
    return status;
}

}  // namespace

extern "C" void lucid_msl_threadgroup_barrier(void) {
    Group *g = running;
    if (!g) {
        // gen_kernels.py marks a kernel as using barriers when its own body calls one.
        fputs("Metal emulation: threadgroup_barrier called from a helper function of a kernel; call it in the kernel's body\n", stderr);
        abort();
    }
    Fiber &f = g->fibers[g->current];
    f.at_barrier = true;
    yield_to_scheduler(f);
}

extern "C" int lucid_msl_simd_exchange(double value, double *lanes, int *lane) {
    Group *g = running;
    if (!g) {
        fputs("Metal emulation: a SIMD-group function called from a kernel not marked as using barriers\n", stderr);
        abort();
    }
    // A SIMD group is 32 consecutive thread indices of the threadgroup.
    size_t n = g->fibers.size(), index = g->fibers[g->current].coords.thread_index_in_threadgroup;
    size_t total = g->fibers.back().coords.thread_index_in_threadgroup + 1;
    if (g->posted.size() < total) g->posted.resize(total);
    g->posted[index] = value;
    lucid_msl_threadgroup_barrier();
    size_t first = index / 32 * 32, count = total - first < 32 ? total - first : 32;
    for (size_t k = 0; k < count; ++k) lanes[k] = g->posted[first + k];
    *lane = int(index - first);
    (void)n;
    lucid_msl_threadgroup_barrier();
    return int(count);
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

extern "C" int32_t lucid_msl_dispatch(const lucid_msl_kernel *kernel, void *const *args,
                                      const uint32_t *threadgroup_lengths, lucid_msl_size grid,
                                      lucid_msl_size groups, lucid_msl_size per_group, char *error,
                                      size_t error_size) {
    // Threadgroup memory: one block per [[threadgroup(n)]] parameter, refilled per group, with
    // a guard band after it that must still hold its pattern when the group is done.
    constexpr size_t kGuard = 64;
    constexpr unsigned char kGuardByte = 0xA5;
    std::vector<void *> bound(args, args + kernel->param_count);
    std::vector<std::vector<unsigned char>> memory(kernel->param_count);
    for (int32_t i = 0; i < kernel->param_count; ++i) {
        if (kernel->params[i].kind != LUCID_MSL_THREADGROUP) continue;
        memory[i].resize(threadgroup_lengths[i] + kGuard);
        bound[i] = memory[i].data();
    }
    auto poison = [&] {
        for (auto &block : memory) {
            if (block.empty()) continue;
            memset(block.data(), 0xFF, block.size() - kGuard);
            memset(block.data() + block.size() - kGuard, kGuardByte, kGuard);
        }
    };
    auto overrun = [&](const lucid_msl_thread &at) {
        for (int32_t i = 0; i < kernel->param_count; ++i) {
            const auto &block = memory[i];
            if (block.empty()) continue;
            for (size_t b = block.size() - kGuard; b < block.size(); ++b) {
                if (block[b] == kGuardByte) continue;
                snprintf(error, error_size,
                         "kernel %s wrote past the %u bytes of threadgroup memory of '%s' (threadgroup %u, %u, %u)",
                         kernel->name, threadgroup_lengths[i], kernel->params[i].name,
                         at.threadgroup_position_in_grid.x, at.threadgroup_position_in_grid.y,
                         at.threadgroup_position_in_grid.z);
                return true;
            }
        }
        return false;
    };

    lucid_msl_thread t;
    t.threads_per_grid = {grid.x, grid.y, grid.z};
    t.threads_per_threadgroup = {per_group.x, per_group.y, per_group.z};
    t.threadgroups_per_grid = {groups.x, groups.y, groups.z};
    Group g;
    g.kernel = kernel;
    g.args = bound.data();
    for (uint32_t gz = 0; gz < groups.z; ++gz)
        for (uint32_t gy = 0; gy < groups.y; ++gy)
            for (uint32_t gx = 0; gx < groups.x; ++gx) {
                poison();
                t.threadgroup_position_in_grid = {gx, gy, gz};
                g.fibers.clear();
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
                            if (kernel->uses_barrier) {
                                g.fibers.emplace_back();
                                g.fibers.back().coords = t;
                            } else {
                                kernel->invoke(bound.data(), &t);
                            }
                        }
                if (kernel->uses_barrier && !g.fibers.empty() && run_group(g, error, error_size) != 0) return -1;
                if (overrun(t)) return -1;
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
