"""Dispatch overhead: a 4x4 add and matmul, and an autocast enter+exit, side by side with
numpy (and PyTorch when it is importable). Prints times and lucid/peer ratios."""

import timeit
import warnings

import numpy as np

import lucid

try:
    import torch
except ImportError:
    torch = None


def best(stmt, number=20000, repeat=5):
    return min(timeit.repeat(stmt, number=number, repeat=repeat)) / number


def main():
    warnings.simplefilter("ignore", lucid.metal.MetalFallbackWarning)
    a_np = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    rows = []
    for device in ("cpu", "metal"):
        a = lucid.tensor(a_np, device=device)
        ta = torch.from_numpy(a_np) if torch else None
        rows.append((f"4x4 add ({device})", best(lambda: a + a), best(lambda: a_np + a_np),
                     best(lambda: ta + ta) if torch else None))
        rows.append((f"4x4 matmul ({device})", best(lambda: a @ a), best(lambda: a_np @ a_np),
                     best(lambda: ta @ ta) if torch else None))

    scope = lucid.amp.autocast()

    def enter_exit():
        with scope:
            pass

    torch_scope = torch.autocast("cpu", dtype=torch.bfloat16) if torch else None

    def torch_enter_exit():
        with torch_scope:
            pass

    rows.append(("autocast enter+exit", best(enter_exit), None, best(torch_enter_exit) if torch else None))

    print(f"{'case':<24}{'lucid':>12}{'numpy':>12}{'lucid/numpy':>14}{'torch':>12}{'lucid/torch':>14}")
    for name, t, tn, tt in rows:
        fmt = lambda v: f"{v * 1e6:10.2f}us" if v is not None else f"{'-':>12}"
        ratio = lambda p: f"{t / p:13.2f}x" if p else f"{'-':>14}"
        print(f"{name:<24}{fmt(t)}{fmt(tn)}{ratio(tn)}{fmt(tt)}{ratio(tt)}")


if __name__ == "__main__":
    main()
