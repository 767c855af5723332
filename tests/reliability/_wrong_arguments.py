"""Every pair of wrong arguments from BAD, given to each call of CALLS: the functions the PyTorch
coverage work added. Run as a script, it prints each call that raised anything but the
documented exceptions, then how many did; a hang is the caller's timeout's to catch."""

import itertools

import lucid
import lucid.nn.functional as F

x = lucid.randn(3, 4)
BAD = [None, "a", -1, 2**70, 1.5, [1, "x"], x, lucid.tensor([1.0, 2.0]), (), object()]
CALLS = {
    "eye": lucid.eye,
    "diag": lucid.diag,
    "roll": lambda a, b: lucid.roll(x, a, b),
    "randperm": lucid.randperm,
    "norm": lambda a, b: lucid.norm(x, a, b),
    "mm": lucid.mm,
    "dot": lucid.dot,
    "outer": lucid.outer,
    "unique": lambda a, b: lucid.unique(a, dim=b),
    "repeat_interleave": lambda a, b: lucid.repeat_interleave(x, a, b),
    "index_add_": lambda a, b: x.clone().index_add_(0, a, b),
    "flip": lambda a, b: lucid.flip(x, a),
    "repeat": lambda a, b: x.repeat(a, b),
    "cumsum": lambda a, b: lucid.cumsum(x, a),
    "any": lambda a, b: x.any(a),
    "linspace": lambda a, b: lucid.linspace(0, 1, a),
    "as_tensor": lucid.as_tensor,
    "isclose": lucid.isclose,
    "sparse_coo_tensor": lucid.sparse_coo_tensor,
    "spmm": lucid.spmm,
    "pad": lambda a, b: F.pad(x, a, value=b),
    "interpolate": lambda a, b: F.interpolate(x.view(1, 3, 4), size=a, mode=b if isinstance(b, str) else "nearest"),
    "pixel_shuffle": lambda a, b: F.pixel_shuffle(x.view(1, 3, 2, 2), a),
    "nonzero": lambda a, b: lucid.nonzero(a),
    "zeros(size=)": lambda a, b: lucid.zeros(size=a),
    "Categorical": lucid.distributions.Categorical,
    "assert_close": lucid.testing.assert_close,
    "device": lambda a, b: lucid.device(a),
    "chunk": lambda a, b: x.chunk(a, b),
    "rms_norm": lambda a, b: F.rms_norm(x, a, eps=b),
    "embedding_bag": lambda a, b: F.embedding_bag(a, x, b),
    "pad_sequence": lambda a, b: lucid.nn.utils.rnn.pad_sequence(a),
    "trunc_normal_": lambda a, b: lucid.nn.init.trunc_normal_(x.clone(), std=a, b=b),
    "LBFGS": lambda a, b: lucid.optim.LBFGS([lucid.zeros(1, requires_grad=True)], lr=a, history_size=b),
}
DOCUMENTED = (TypeError, ValueError, IndexError, RuntimeError, AssertionError, NotImplementedError, OverflowError)


def problems():
    found = []
    for name, call in CALLS.items():
        for a, b in itertools.product(BAD, repeat=2):
            try:
                call(a, b)
            except DOCUMENTED:
                pass
            except Exception as e:  # noqa: BLE001 (what this looks for)
                found.append(f"{name}({a!r:.20}, {b!r:.20}): {type(e).__name__}: {e}")
    return found


if __name__ == "__main__":
    found = problems()
    for line in found:
        print(line)
    print(f"{len(found)} problems")
