"""``nn.DataParallel`` and ``data_parallel``: PyTorch's single-process spreading of a batch
over several GPUs, as it behaves where there is one device.

PyTorch's DataParallel splits each batch over ``device_ids``, runs a replica of the module on
each GPU and gathers the outputs on ``output_device``. A lucid process has one device (the one
its module is on, ``"cpu"`` or ``"metal"``), so there is nothing to split: the module runs as it
is, on the whole batch, which is what PyTorch's DataParallel itself does on a machine without
a GPU. Programs keep their ``nn.DataParallel(model)`` line, its ``.module`` and its
``module.``-prefixed ``state_dict`` keys. Several processes training one model are
:class:`DistributedDataParallel`'s work.
"""

from __future__ import annotations

import numbers

from ..module import Module

__all__ = ["DataParallel", "data_parallel"]


def _check(what, device_ids, output_device, dim):
    if device_ids is not None and not isinstance(device_ids, (list, tuple)):
        raise TypeError(f"{what}: device_ids must be None or a list of devices, got {device_ids!r}")
    if isinstance(dim, bool) or not isinstance(dim, numbers.Integral):
        raise TypeError(f"{what}: dim must be an int, got {dim!r}")


class DataParallel(Module):
    """Runs `module` as it is: lucid has one device per process (see the module's notes).

    Parameters
    ----------
    module : lucid.nn.Module
        The model; it stays where it is, as ``.module``.
    device_ids : None or a list, optional
        PyTorch's GPUs to spread the batch over. Accepted (a list or None) and not used, as
        PyTorch does on a machine without a GPU; ``.device_ids`` is then ``[]``.
    output_device : optional
        Accepted and not used: the output is where the module makes it.
    dim : int, default 0
        The dimension PyTorch splits inputs along; kept as ``.dim``, nothing is split.

    Notes
    -----
    ``state_dict()`` has PyTorch's ``module.`` prefix on every key (``.module`` is a
    submodule), so a checkpoint saved from a DataParallel model loads into one, and
    ``model.module.state_dict()`` gives the bare keys.

    Examples
    --------
    >>> model = nn.DataParallel(make_model())     # unchanged PyTorch line
    >>> out = model(x)                             # make_model()(x), on its device
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        if not isinstance(module, Module):
            raise TypeError(f"DataParallel wraps a lucid.nn.Module, got {type(module).__name__}")
        _check("DataParallel", device_ids, output_device, dim)
        self.module = module
        self.device_ids = []
        self.output_device = None
        self.dim = int(dim)

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """``module(*inputs, **module_kwargs)``: PyTorch's functional DataParallel, which runs the
    module as it is where there is one device (see :class:`DataParallel`). `inputs` is a
    tuple of positional arguments, or one argument that is not a tuple."""
    _check("data_parallel", device_ids, output_device, dim)
    if not isinstance(inputs, tuple):
        inputs = () if inputs is None else (inputs,)
    return module(*inputs, **(module_kwargs or {}))
