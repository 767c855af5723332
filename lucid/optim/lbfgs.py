"""L-BFGS, as ``torch.optim.LBFGS``: a quasi-Newton method over all parameters as one vector,
driven by a closure that computes the loss and its gradients."""

from __future__ import annotations

from .. import _grad_mode
from .._ops.shape import cat
from .._tensor import Tensor
from .optimizer import Optimizer


def _dot(a: Tensor, b: Tensor) -> float:
    return (a * b).sum().item()


class LBFGS(Optimizer):
    """L-BFGS with PyTorch's algorithm and defaults: each ``step(closure)`` runs up to
    `max_iter` iterations (and `max_eval` closure calls) of the two-loop recursion over the
    last `history_size` steps, with step size `lr` (the first step scaled by the gradient's
    size), until the gradient is below `tolerance_grad` or the progress below
    `tolerance_change`. One parameter group only. Only ``line_search_fn=None`` (a fixed step)
    is supported."""

    def __init__(
        self,
        params,
        lr=1.0,
        max_iter=20,
        max_eval=None,
        tolerance_grad=1e-7,
        tolerance_change=1e-9,
        history_size=100,
        line_search_fn=None,
    ):
        if line_search_fn is not None:
            raise ValueError(f"LBFGS: line_search_fn {line_search_fn!r} is not supported; use None (a fixed step)")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        super().__init__(
            params,
            dict(
                lr=lr,
                max_iter=max_iter,
                max_eval=max_eval,
                tolerance_grad=tolerance_grad,
                tolerance_change=tolerance_change,
                history_size=history_size,
                line_search_fn=line_search_fn,
            ),
        )
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self) -> Tensor:
        return cat([p.grad.reshape(-1) if p.grad is not None else p.new_zeros(p.numel()) for p in self._params])

    def _add_grad(self, step: float, direction: Tensor):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(direction[offset : offset + n].view_as(p), alpha=step)
            offset += n

    def step(self, closure):
        """Runs up to ``max_iter`` iterations; `closure` re-evaluates the model and returns the
        loss (it must call ``zero_grad`` and ``backward``). Returns the first loss."""
        if closure is None:
            raise RuntimeError("LBFGS.step() needs a closure that returns the loss")
        with _grad_mode.enable_grad():
            orig_loss = closure()
        with _grad_mode.no_grad():
            return self._iterate(closure, orig_loss)

    def _iterate(self, closure, orig_loss):
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change, history_size = (
            group["tolerance_grad"],
            group["tolerance_change"],
            group["history_size"],
        )
        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._flat_grad()
        if flat_grad.abs().amax().item() <= tolerance_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad, prev_loss = state.get("H_diag"), state.get("prev_flat_grad"), state.get("prev_loss")
        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
            else:
                y = flat_grad - prev_flat_grad
                s = d * t
                ys = _dot(y, s)
                if ys > 1e-10:  # the curvature condition: keep the pair
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    h_diag = ys / _dot(y, y)
                al = [0.0] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = _dot(old_stps[i], q) * ro[i]
                    q = q - old_dirs[i] * al[i]
                r = q * h_diag
                for i in range(len(old_dirs)):
                    be_i = _dot(old_dirs[i], r) * ro[i]
                    r = r + old_stps[i] * (al[i] - be_i)
                d = r
            prev_flat_grad = flat_grad.clone()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / flat_grad.abs().sum().item()) * lr
            else:
                t = lr
            gtd = _dot(flat_grad, d)
            if gtd > -tolerance_change:  # not a descent direction
                break

            evals = 0
            self._add_grad(t, d)
            opt_cond = False
            if n_iter != max_iter:
                with _grad_mode.enable_grad():
                    loss = float(closure())
                flat_grad = self._flat_grad()
                opt_cond = flat_grad.abs().amax().item() <= tolerance_grad
                evals = 1
            current_evals += evals
            state["func_evals"] += evals

            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if (d * t).abs().amax().item() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state.update(
            d=d,
            t=t,
            old_dirs=old_dirs,
            old_stps=old_stps,
            ro=ro,
            H_diag=h_diag,
            prev_flat_grad=prev_flat_grad,
            prev_loss=prev_loss,
        )
        return orig_loss
