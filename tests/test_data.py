"""lucid.utils.data against PyTorch's semantics, and lucid.accelerator."""

import threading

import numpy as np
import pytest

import lucid
from lucid.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    Generator,
    SequentialSampler,
    Subset,
    TensorDataset,
    default_collate,
    random_split,
)

X = np.arange(30, dtype=np.float32).reshape(10, 3)
Y = np.arange(10)


def test_tensor_dataset_batches_in_order_with_the_last_partial_or_dropped():
    ds = TensorDataset(lucid.tensor(X), lucid.tensor(Y))
    assert len(ds) == 10 and [int(v) for v in ds[3][1].numpy().ravel()] == [3]
    batches = list(DataLoader(ds, batch_size=4))
    assert len(DataLoader(ds, batch_size=4)) == 3 == len(batches)
    xb, yb = batches[0]
    np.testing.assert_array_equal(xb.numpy(), X[:4])
    np.testing.assert_array_equal(yb.numpy(), Y[:4])
    assert batches[-1][0].shape == (2, 3)
    dropped = list(DataLoader(ds, batch_size=4, drop_last=True))
    assert len(dropped) == 2 == len(DataLoader(ds, batch_size=4, drop_last=True))


def test_shuffle_is_a_permutation_reproducible_with_manual_seed_or_a_generator():
    ds = TensorDataset(lucid.tensor(X), lucid.tensor(Y))

    def order(**kw):
        return np.concatenate([yb.numpy() for _, yb in DataLoader(ds, batch_size=3, shuffle=True, **kw)])

    lucid.manual_seed(0)
    a = order()
    lucid.manual_seed(0)
    b = order()
    assert sorted(a) == list(range(10)) and (a == b).all() and (a != np.arange(10)).any()
    g1, g2 = Generator().manual_seed(5), Generator().manual_seed(5)
    assert (order(generator=g1) == order(generator=g2)).all()
    # Each pass over a shuffling loader is a new order.
    loader = DataLoader(ds, batch_size=10, shuffle=True, generator=Generator().manual_seed(1))
    first, second = (next(iter(loader))[1].numpy() for _ in range(2))
    assert (first != second).any()


def test_default_collate_handles_numbers_arrays_tuples_dicts_and_strings():
    batch = [
        {"x": np.ones(2, np.float32) * i, "y": i, "w": float(i), "name": f"s{i}", "pair": (i, lucid.tensor([i]))}
        for i in range(3)
    ]
    out = default_collate(batch)
    np.testing.assert_array_equal(out["x"].numpy(), [[0, 0], [1, 1], [2, 2]])
    assert out["y"].dtype == lucid.int64 and out["w"].dtype == lucid.float32
    assert out["name"] == ["s0", "s1", "s2"]
    assert isinstance(out["pair"], tuple) and out["pair"][1].shape == (3, 1)
    with pytest.raises(RuntimeError, match="same length"):
        default_collate([(1, 2), (1,)])


class Squares(Dataset):
    def __getitem__(self, i):
        a = lucid.ones(2, 2, device="metal")
        return (a @ a).dtype.name, threading.get_ident(), i * i

    def __len__(self):
        return 12


def test_worker_threads_keep_the_order_and_the_callers_autocast():
    main = threading.get_ident()
    started = []
    with lucid.amp.autocast("metal", dtype=lucid.bfloat16):
        batches = list(
            DataLoader(Squares(), batch_size=5, num_workers=2, collate_fn=list, worker_init_fn=started.append)
        )
    values = [s[2] for b in batches for s in b]
    assert values == [i * i for i in range(12)]
    assert all(s[0] == "bfloat16" for b in batches for s in b)
    assert all(s[1] != main for b in batches for s in b)
    assert sorted(started) == [0, 1]
    # Without workers, on the calling thread.
    assert all(s[1] == main for b in DataLoader(Squares(), batch_size=6, collate_fn=list) for s in b)


def test_random_split_subsets_and_concat():
    ds = TensorDataset(lucid.tensor(X), lucid.tensor(Y))
    a, b = random_split(ds, [7, 3], generator=Generator().manual_seed(0))
    ids = [int(a[i][1].item()) for i in range(7)] + [int(b[i][1].item()) for i in range(3)]
    assert sorted(ids) == list(range(10))
    c, d, e = random_split(ds, [0.5, 0.3, 0.2])
    assert (len(c), len(d), len(e)) == (5, 3, 2)
    with pytest.raises(ValueError, match="summing to"):
        random_split(ds, [5, 4])
    both = ConcatDataset([Subset(ds, [0, 1]), Subset(ds, [9])])
    assert len(both) == 3 and int(both[2][1].item()) == 9 and int(both[-1][1].item()) == 9
    with pytest.raises(IndexError):
        both[3]
    assert list(BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)) == [[0, 1], [2, 3], [4]]


def test_loader_arguments_are_checked():
    ds = TensorDataset(lucid.tensor(X))
    with pytest.raises(ValueError, match="batch_size should be a positive integer"):
        DataLoader(ds, batch_size=0)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(ds, num_workers=-1)
    with pytest.raises(ValueError, match="mutually exclusive"):
        DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True)
    with pytest.raises(ValueError, match="same first dimension"):
        TensorDataset(lucid.ones(3), lucid.ones(4))
    with pytest.raises(TypeError, match="lucid.Generator"):
        list(DataLoader(ds, shuffle=True, generator=np.random.default_rng(0)))
    # batch_size=None yields single samples, uncollated.
    single = list(DataLoader(ds, batch_size=None))
    assert len(single) == 10 and single[0][0].shape == (3,)


def test_accelerator_is_metal_where_the_metal_backend_serves_it():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        served = lucid.metal.is_available()
    assert lucid.accelerator.is_available() is served
    if served:
        assert lucid.accelerator.current_accelerator() == lucid.device("metal")
        assert lucid.accelerator.device_count() == 1 and lucid.accelerator.current_device_index() == 0
    else:
        assert lucid.accelerator.current_accelerator() is None
        assert lucid.accelerator.device_count() == 0 and lucid.accelerator.current_device_index() == -1
    lucid.accelerator.synchronize()
    # The idiom of PyTorch's examples picks a device either way.
    chosen = lucid.accelerator.current_accelerator() if lucid.accelerator.is_available() else lucid.device("cpu")
    assert lucid.ones(2, device=chosen).device == chosen
