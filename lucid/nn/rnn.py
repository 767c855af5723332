"""Recurrent layers: RNN, LSTM and GRU, and their single-step cells, with PyTorch's
parameter names, layouts, initialisation and gate order, so that a PyTorch state dict loads.

An RNN, LSTM or GRU layer over a sequence is one engine op (``rnn_tanh``, ``rnn_relu``,
``lstm``, ``gru``: their products in lower precision under autocast, as PyTorch's autocast lists
them), whose backward through time runs in the engine. The cells, and the LSTM with a
projection, run step by step: a pair of ``linear`` products (the lower-precision autocast policy
applies to them) and the gate arithmetic (for the LSTM and GRU cells, the engine's fused
cells); gradients flow through the engine's autograd. Under autocast the hidden state follows
the products' dtype.
"""

from __future__ import annotations

import math

from .. import _C
from .._core import result
from .._ops import creation as _creation
from .._ops.shape import cat, stack
from .._types import as_index
from . import functional as F
from .layers import uniform_parameter
from .module import Module

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _lstm_step(xw, state, w_hh, b_hh):
    """One LSTM step from the input's product ``xw = x W_ihᵀ + b_ih``."""
    h, c = state
    hw = F.linear(h.to(xw.dtype), w_hh, b_hh)
    h, c = _C.lstm_cell(xw._h, hw._h, c._h)
    h = result(h)
    return h, (h, result(c))


def _lstm_projected_step(w_hr):
    def step(xw, state, w_hh, b_hh):
        """One LSTM step whose hidden state is projected by ``w_hr`` (``proj_size``)."""
        h, c = state
        hw = F.linear(h.to(xw.dtype), w_hh, b_hh)
        h, c = _C.lstm_cell(xw._h, hw._h, c._h)
        h = F.linear(result(h), w_hr)
        return h, (h, result(c))

    return step


def _gru_step(gi, h, w_hh, b_hh):
    """One GRU step from the input's product ``gi = x W_ihᵀ + b_ih``: the engine's fused cell."""
    gh = F.linear(h.to(gi.dtype), w_hh, b_hh)
    return result(_C.gru_cell(gi._h, gh._h, h._h))


def _rnn_step(nonlinearity):
    act = F.tanh if nonlinearity == "tanh" else F.relu

    def step(pre, h, w_hh, b_hh):
        """One Elman step from the input's product ``pre = x W_ihᵀ + b_ih``."""
        h = act(pre + F.linear(h.to(pre.dtype), w_hh, b_hh))
        return h, h

    return step


def _check_size(name, value):
    n = as_index(value)
    if n <= 0:
        raise ValueError(f"{name} must be positive, got {value}")
    return n


class _CellBase(Module):
    def __init__(self, mode, input_size, hidden_size, bias, device, dtype):
        super().__init__()
        self.input_size = _check_size("input_size", input_size)
        self.hidden_size = _check_size("hidden_size", hidden_size)
        self.bias = bool(bias)
        g = _GATES[mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self.weight_ih = uniform_parameter((g, self.input_size), bound, dtype, device)
        self.weight_hh = uniform_parameter((g, self.hidden_size), bound, dtype, device)
        if bias:
            self.bias_ih = uniform_parameter((g,), bound, dtype, device)
            self.bias_hh = uniform_parameter((g,), bound, dtype, device)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)

    def _batched(self, input, name):
        if input.ndim not in (1, 2):
            raise ValueError(
                f"{type(self).__name__}: expected {name} of shape [batch, {self.input_size}] or "
                f"[{self.input_size}], got {tuple(input.shape)}"
            )
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{type(self).__name__}: input has {input.shape[-1]} features, expected {self.input_size}")
        return (input.unsqueeze(0), True) if input.ndim == 1 else (input, False)

    def _state(self, hx, batch, like, unbatched):
        if hx is None:
            return _creation.zeros(batch, self.hidden_size, dtype=like.dtype, device=like.device)
        want = (self.hidden_size,) if unbatched else (batch, self.hidden_size)
        if tuple(hx.shape) != want:
            raise ValueError(
                f"{type(self).__name__}: expected hidden state of shape {list(want)}, got {list(hx.shape)}"
            )
        return hx.unsqueeze(0) if unbatched else hx

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}" + ("" if self.bias else ", bias=False")


class RNNCell(_CellBase):
    """One step of an Elman RNN: ``h' = act(x W_ihᵀ + b_ih + h W_hhᵀ + b_hh)``."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device="cpu", dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__("RNN_TANH", input_size, hidden_size, bias, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, "input")
        h = self._state(hx, x.shape[0], x, unbatched)
        out, _ = _rnn_step(self.nonlinearity)(
            F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh
        )
        return out.squeeze(0) if unbatched else out


class LSTMCell(_CellBase):
    """One LSTM step (gates in PyTorch's order: input, forget, cell, output); returns (h', c')."""

    def __init__(self, input_size, hidden_size, bias=True, device="cpu", dtype=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, "input")
        if hx is None:
            h = c = self._state(None, x.shape[0], x, unbatched)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTMCell: hx must be a tuple (h, c)")
            h, c = (self._state(t, x.shape[0], x, unbatched) for t in hx)
        _, (h, c) = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), (h, c), self.weight_hh, self.bias_hh)
        return (h.squeeze(0), c.squeeze(0)) if unbatched else (h, c)


class GRUCell(_CellBase):
    """One GRU step (gates in PyTorch's order: reset, update, new)."""

    def __init__(self, input_size, hidden_size, bias=True, device="cpu", dtype=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype)

    def forward(self, input, hx=None):
        x, unbatched = self._batched(input, "input")
        h = self._state(hx, x.shape[0], x, unbatched)
        out = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return out.squeeze(0) if unbatched else out


class _RNNBase(Module):
    def __init__(
        self,
        mode,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        device="cpu",
        dtype=None,
        proj_size=0,
    ):
        super().__init__()
        self.mode = mode
        self.input_size = _check_size("input_size", input_size)
        self.hidden_size = _check_size("hidden_size", hidden_size)
        self.proj_size = as_index(proj_size)
        if self.proj_size < 0 or (self.proj_size and self.proj_size >= self.hidden_size):
            raise ValueError(
                f"proj_size must be 0 or positive and smaller than hidden_size ({hidden_size}), got {proj_size}"
            )
        self.num_layers = _check_size("num_layers", num_layers)
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1:
            raise ValueError(f"dropout must be a number in [0, 1], got {dropout!r}")
        self.bias, self.batch_first, self.dropout = bool(bias), bool(batch_first), float(dropout)
        self.bidirectional = bool(bidirectional)
        directions = 2 if self.bidirectional else 1
        g = _GATES[mode] * self.hidden_size
        bound = 1.0 / math.sqrt(self.hidden_size)
        self._names = []
        out = self.proj_size or self.hidden_size  # the width of the hidden state, and of the output
        for layer in range(self.num_layers):
            size = self.input_size if layer == 0 else out * directions
            for suffix in ("", "_reverse")[:directions]:
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                setattr(self, names[0], uniform_parameter((g, size), bound, dtype, device))
                setattr(self, names[1], uniform_parameter((g, out), bound, dtype, device))
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    setattr(self, names[2], uniform_parameter((g,), bound, dtype, device))
                    setattr(self, names[3], uniform_parameter((g,), bound, dtype, device))
                if self.proj_size:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    setattr(
                        self, names[-1], uniform_parameter((self.proj_size, self.hidden_size), bound, dtype, device)
                    )
                self._names.append(names)

    def _weights(self, layer, direction):
        names = self._names[layer * (2 if self.bidirectional else 1) + direction]
        w = [getattr(self, n) for n in names[: 4 if self.bias else 2]]
        return w if self.bias else w + [None, None]

    def _projection(self, layer, direction):
        return getattr(self, self._names[layer * (2 if self.bidirectional else 1) + direction][-1])

    def _projected(self, x, h, c, w_ih, w_hh, b_ih, b_hh, layer, direction):
        """An LSTM layer with a projection, step by step: every step's h, and the final (h, c)."""
        steps, batch = x.shape[0], x.shape[1]
        step = _lstm_projected_step(self._projection(layer, direction))
        # The input's products for all steps at once: [steps * batch, gates], one per step.
        xw = F.linear(x.reshape(steps * batch, -1), w_ih, b_ih).split(batch, 0)
        seq, state = [None] * steps, (h, c)
        for t in range(steps) if direction == 0 else range(steps - 1, -1, -1):
            seq[t], state = step(xw[t], state, w_hh, b_hh)
        return stack(seq, 0), state[0], state[1]

    def _initial(self, hx, batch, like, unbatched, width=None):
        directions = 2 if self.bidirectional else 1
        want = (self.num_layers * directions, batch, width or self.hidden_size)
        if hx is None:
            return _creation.zeros(*want, dtype=like.dtype, device=like.device)
        shape = tuple(hx.shape)
        expected = want[::2] if unbatched else want
        if shape != expected:
            raise ValueError(
                f"{type(self).__name__}: expected hidden state of shape {list(expected)}, got {list(shape)}"
            )
        return hx.unsqueeze(1) if unbatched else hx

    def forward(self, input, hx=None):
        name = type(self).__name__
        if input.ndim not in (2, 3):
            raise ValueError(f"{name}: expected a 2-D (unbatched) or 3-D input, got shape {tuple(input.shape)}")
        if input.shape[-1] != self.input_size:
            raise ValueError(f"{name}: input has {input.shape[-1]} features, expected {self.input_size}")
        unbatched = input.ndim == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first else input)
        batch = x.shape[1]
        lstm = self.mode == "LSTM"
        if lstm:
            proj = self.proj_size or None
            if hx is None:
                h0 = self._initial(None, batch, x, unbatched, proj)
                c0 = self._initial(None, batch, x, unbatched)
            else:
                if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                    raise TypeError(f"{name}: hx must be a tuple (h_0, c_0)")
                h0, c0 = self._initial(hx[0], batch, x, unbatched, proj), self._initial(hx[1], batch, x, unbatched)
        else:
            h0 = self._initial(hx, batch, x, unbatched)
        directions = 2 if self.bidirectional else 1
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh = self._weights(layer, direction)
                h_0, reverse = h0[k], direction == 1  # (held: a handle lives as long as its tensor)
                w = (w_ih._h, w_hh._h, 0 if b_ih is None else b_ih._h, 0 if b_hh is None else b_hh._h)
                # Each layer and direction is one engine op, its backward through time in the engine;
                # with a projection, the LSTM's steps run one by one.
                if lstm and self.proj_size:
                    seq, h_k, c_k = self._projected(layer_input, h_0, c0[k], w_ih, w_hh, b_ih, b_hh, layer, direction)
                elif lstm:
                    c_0 = c0[k]
                    records = _C.lstm_layer(layer_input._h, h_0._h, c_0._h, *w, reverse)
                    seq, h_k, c_k = (result(r) for r in records)
                elif self.mode == "GRU":
                    seq, h_k = (result(r) for r in _C.gru_layer(layer_input._h, h_0._h, *w, reverse))
                else:
                    records = _C.rnn_layer(layer_input._h, h_0._h, *w, self.mode == "RNN_RELU", reverse)
                    seq, h_k = (result(r) for r in records)
                outputs.append(seq)
                finals_h.append(h_k)
                if lstm:
                    finals_c.append(c_k)
            layer_input = outputs[0] if directions == 1 else cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        out = layer_input
        h_n = stack(finals_h, 0)
        if unbatched:
            out, h_n = out.squeeze(1), h_n.squeeze(1)
        elif self.batch_first:
            out = out.transpose(0, 1)
        if lstm:
            c_n = stack(finals_c, 0)
            return out, (h_n, c_n.squeeze(1) if unbatched else c_n)
        return out, h_n

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if not self.bias:
            s += ", bias=False"
        if self.batch_first:
            s += ", batch_first=True"
        if self.dropout:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += ", bidirectional=True"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        return s


class RNN(_RNNBase):
    """A multi-layer Elman RNN (tanh or relu); PyTorch's signature and parameter names."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        nonlinearity="tanh",
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        device="cpu",
        dtype=None,
    ):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(
            "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
        )
        self.nonlinearity = nonlinearity


class LSTM(_RNNBase):
    """A multi-layer LSTM; returns ``output, (h_n, c_n)``, as PyTorch's. With ``proj_size`` > 0
    the hidden state is projected to that width by ``weight_hr_l{k}`` after each step."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        proj_size=0,
        device="cpu",
        dtype=None,
    ):
        super().__init__(
            "LSTM",
            input_size,
            hidden_size,
            num_layers,
            bias,
            batch_first,
            dropout,
            bidirectional,
            device,
            dtype,
            proj_size,
        )


class GRU(_RNNBase):
    """A multi-layer GRU; returns ``output, h_n``, as PyTorch's."""

    def __init__(
        self,
        input_size,
        hidden_size,
        num_layers=1,
        bias=True,
        batch_first=False,
        dropout=0.0,
        bidirectional=False,
        device="cpu",
        dtype=None,
    ):
        super().__init__(
            "GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout, bidirectional, device, dtype
        )
