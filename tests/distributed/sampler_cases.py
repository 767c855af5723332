"""The DistributedSampler cases worker_pytorch_setup.py runs on each rank: (len, drop_last, shuffle,
epoch)."""

CASES = [
    (10, False, True, 0),
    (10, True, True, 0),
    (11, False, True, 2),
    (11, True, True, 2),
    (11, False, False, 0),
    (1, False, True, 0),
    (1, True, True, 0),
    (64, False, True, 7),
]


def key(n, drop_last, shuffle, epoch):
    return f"n{n}-drop{int(drop_last)}-shuffle{int(shuffle)}-epoch{epoch}"
