"""numpy references for the layer ops, written from their definitions."""

import numpy as np


def conv2d(x, w, b=None, stride=(1, 1), padding=(0, 0), dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (padding[0], padding[0]), (padding[1], padding[1])))
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow), dtype=np.float64)
    og = o // groups
    for g in range(groups):
        for i in range(kh):
            for j in range(kw):
                ys, xs = i * dilation[0], j * dilation[1]
                patch = xp[
                    :,
                    g * cg : (g + 1) * cg,
                    ys : ys + stride[0] * (oh - 1) + 1 : stride[0],
                    xs : xs + stride[1] * (ow - 1) + 1 : stride[1],
                ]
                out[:, g * og : (g + 1) * og] += np.einsum("nchw,oc->nohw", patch, w[g * og : (g + 1) * og, :, i, j])
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def conv_transpose2d(x, w, b=None, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1):
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    oh = (h - 1) * stride[0] - 2 * padding[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    ow = (wd - 1) * stride[1] - 2 * padding[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    full = np.zeros((n, cog * groups, oh + 2 * padding[0] + kh * dilation[0], ow + 2 * padding[1] + kw * dilation[1]))
    cg = cin // groups
    for g in range(groups):
        for y in range(h):
            for xx in range(wd):
                for i in range(kh):
                    for j in range(kw):
                        full[
                            :,
                            g * cog : (g + 1) * cog,
                            y * stride[0] + i * dilation[0],
                            xx * stride[1] + j * dilation[1],
                        ] += x[:, g * cg : (g + 1) * cg, y, xx] @ w[g * cg : (g + 1) * cg, :, i, j]
    out = full[:, :, padding[0] : padding[0] + oh, padding[1] : padding[1] + ow]
    if b is not None:
        out = out + b.reshape(1, -1, 1, 1)
    return out


def windows(x, k, s, p, fill, ceil=False, d=(1, 1)):
    """[N, C, oh, ow, kh·kw] windows of x padded with `fill`."""
    n, c, h, w = x.shape

    def size(length, kk, ss, pp, dd):
        span = length + 2 * pp - dd * (kk - 1) - 1
        o = (-(-span // ss) if ceil else span // ss) + 1
        if ceil and (o - 1) * ss >= length + pp:
            o -= 1
        return o

    oh, ow = size(h, k[0], s[0], p[0], d[0]), size(w, k[1], s[1], p[1], d[1])
    big = np.full((n, c, h + 2 * p[0] + k[0] * d[0] + s[0], w + 2 * p[1] + k[1] * d[1] + s[1]), fill, dtype=np.float64)
    big[:, :, p[0] : p[0] + h, p[1] : p[1] + w] = x
    out = np.empty((n, c, oh, ow, k[0] * k[1]))
    for i in range(k[0]):
        for j in range(k[1]):
            out[..., i * k[1] + j] = big[
                :, :, i * d[0] : i * d[0] + s[0] * oh : s[0], j * d[1] : j * d[1] + s[1] * ow : s[1]
            ]
    return out, (oh, ow)


def max_pool2d(x, k, s, p=(0, 0), d=(1, 1), ceil=False):
    return windows(x, k, s, p, -np.inf, ceil, d)[0].max(-1)


def avg_pool2d(x, k, s, p=(0, 0), ceil=False, count_include_pad=True):
    h, w = x.shape[2:]
    win, (oh, ow) = windows(x, k, s, p, 0.0, ceil)
    sums = win.sum(-1)
    div = np.zeros((oh, ow))
    for a in range(oh):
        for b in range(ow):
            y0, x0 = a * s[0] - p[0], b * s[1] - p[1]
            y1, x1 = min(y0 + k[0], h + p[0]), min(x0 + k[1], w + p[1])
            if not count_include_pad:
                y0, x0, y1, x1 = max(y0, 0), max(x0, 0), min(y1, h), min(x1, w)
            div[a, b] = (y1 - y0) * (x1 - x0)
    return sums / div


def adaptive_avg_pool2d(x, out):
    h, w = x.shape[-2:]
    res = np.zeros(x.shape[:-2] + tuple(out))
    for i in range(out[0]):
        for j in range(out[1]):
            y0, y1 = (i * h) // out[0], -(-((i + 1) * h) // out[0])
            x0, x1 = (j * w) // out[1], -(-((j + 1) * w) // out[1])
            res[..., i, j] = x[..., y0:y1, x0:x1].mean(axis=(-2, -1))
    return res


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=axis, keepdims=True))


def attention(q, k, v, allowed=None, additive=None, scale=None):
    s = q @ np.swapaxes(k, -1, -2) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    if additive is not None:
        s = s + additive
    if allowed is not None:
        s = np.where(allowed, s, -np.inf)
    p = softmax(s)
    return p @ v, p


def cross_entropy(logits, target, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """Class-index targets; logits [N, C, *]."""
    c = logits.shape[1]
    lp = log_softmax(np.moveaxis(logits, 1, -1))  # [N, *, C]
    t = target
    w = np.ones(c) if weight is None else weight
    keep = t != ignore_index
    safe = np.where(keep, t, 0)
    picked = np.take_along_axis(lp, safe[..., None], -1)[..., 0]
    wt = w[safe] * keep
    nll = -picked * wt
    smooth = -(lp * w).sum(-1) * keep
    if reduction == "none":
        return (1 - smoothing) * nll + smoothing / c * smooth
    if reduction == "sum":
        return (1 - smoothing) * nll.sum() + smoothing / c * smooth.sum()
    return ((1 - smoothing) * nll.sum() + smoothing / c * smooth.sum()) / wt.sum()
