"""Autograd graphs far deeper than the stack are built, differentiated and freed without
recursion proportional to their depth, on any thread."""

import threading

import numpy as np

import lucid


def chain(depth):
    x = lucid.tensor([2.0], requires_grad=True)
    y = x
    for _ in range(depth):
        y = y * 1.0
    return x, y


def test_a_chain_of_200000_ops_is_differentiated_and_freed():
    x, y = chain(200_000)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1.0])
    del y  # the whole chain is freed here
    assert x.grad is not None


def test_a_chain_never_differentiated_is_freed_on_a_thread_with_a_small_stack():
    held = [chain(200_000)[1]]
    freed = []

    def free():
        held.pop()  # every node, and what its backward rule captured, is freed on this thread
        freed.append(True)

    previous = threading.stack_size(256 << 10)
    try:
        t = threading.Thread(target=free)
        t.start()
        t.join()
    finally:
        threading.stack_size(previous)
    assert freed == [True] and not held


def test_a_loss_summed_over_50000_steps_without_detach_is_freed():
    w = lucid.tensor([0.5], requires_grad=True)
    total = lucid.zeros(1)
    for _ in range(50_000):
        total = total + (w * w).sum()  # the common mistake: no .detach() / .item()
    total.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [50_000.0])  # 50,000 times d(w²)/dw = 2w = 1
    del total
