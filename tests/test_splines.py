"""Our spline paths agree with nflows' rational-quadratic spline and invert each other."""

from __future__ import annotations

import pytest
import torch
from nflows.transforms.splines.rational_quadratic import (
    rational_quadratic_spline,
    unconstrained_rational_quadratic_spline,
)

from flows.splines import TAIL_DERIVATIVE_LOGIT, rq_forward, rq_inverse, rq_spline

K, BOUND = 6, 3.0


def _params(n: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3 * K - 1, generator=g, dtype=torch.float64) * 2.0


def _split(p: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    d = torch.nn.functional.pad(p[..., 2 * K :], (1, 1), value=TAIL_DERIVATIVE_LOGIT)
    return p[..., :K], p[..., K : 2 * K], d


def test_ports_match_nflows_core_both_directions() -> None:
    p = _params(500)
    x = torch.rand(500, dtype=torch.float64) * 2 * BOUND - BOUND
    w, h, d = _split(p)
    kw = {"left": -BOUND, "right": BOUND, "bottom": -BOUND, "top": BOUND}
    y_ref, ld_ref = rational_quadratic_spline(x, w, h, d, **kw)
    y, ld = rq_forward(x, w, h, d, BOUND)
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(ld, ld_ref)
    x_ref, ild_ref = rational_quadratic_spline(y_ref, w, h, d, inverse=True, **kw)
    x_back, ild = rq_inverse(y_ref, w, h, d, BOUND)
    torch.testing.assert_close(x_back, x_ref)
    torch.testing.assert_close(ild, ild_ref)
    torch.testing.assert_close(x_back, x)


@pytest.mark.parametrize("use_nflows", [True, False])
def test_rq_spline_matches_unconstrained_nflows_with_tails(use_nflows: bool) -> None:
    x = torch.linspace(-5, 5, 400, dtype=torch.float64)
    p = _params(400, 1)
    y, ld = rq_spline(x, p, BOUND, use_nflows=use_nflows)
    y_ref, ld_ref = unconstrained_rational_quadratic_spline(
        x, p[:, :K], p[:, K : 2 * K], p[:, 2 * K :].clone(), tails="linear", tail_bound=BOUND
    )
    torch.testing.assert_close(y, y_ref)
    torch.testing.assert_close(ld, ld_ref)


def test_inverse_inverts_and_logdets_cancel() -> None:
    x = torch.randn(1000, dtype=torch.float64) * 2.5  # some in the tails
    p = _params(1000, 2)
    y, ld = rq_spline(x, p, BOUND)
    x_back, ild = rq_spline(y, p, BOUND, inverse=True)
    torch.testing.assert_close(x_back, x)
    torch.testing.assert_close(ld + ild, torch.zeros_like(ld), atol=1e-9, rtol=0)


def test_logdet_is_the_derivative() -> None:
    x = (torch.rand(200, dtype=torch.float64) * 8 - 4).requires_grad_()
    p = _params(200, 3)
    y, ld = rq_spline(x, p, BOUND)
    (grad,) = torch.autograd.grad(y.sum(), x)
    torch.testing.assert_close(ld, grad.log())


def test_extreme_inputs_stay_finite_in_float32() -> None:
    p = torch.randn(10_000, 3 * K - 1) * 6
    y = torch.rand(10_000) * 2 * BOUND - BOUND
    x, ld = rq_spline(y, p, BOUND, inverse=True)
    assert torch.isfinite(x).all() and torch.isfinite(ld).all()
    assert (x.abs() <= BOUND + 1e-4).all()


@pytest.mark.parametrize("use_nflows", [True, False])
@pytest.mark.parametrize("inverse", [False, True])
def test_non_finite_values_give_nan_rows_not_an_error(use_nflows: bool, inverse: bool) -> None:
    """A diverging fit (model.lr=10) feeds the spline NaN or inf parameters: those rows come
    out NaN, for the fit's non-finite checks to skip the step or restart the model, and the
    others as they would be (nflows itself indexes out of range on them)."""
    torch.manual_seed(0)
    x, params = torch.randn(6, 3), torch.randn(6, 3, 23)
    want = rq_spline(x, params, 3.0, inverse=inverse, use_nflows=use_nflows)
    params[0, 0, 0], params[1, 1, :], x[2, 2] = float("nan"), float("inf"), float("nan")
    out, logdet = rq_spline(x, params, 3.0, inverse=inverse, use_nflows=use_nflows)
    bad = torch.zeros(6, 3, dtype=torch.bool)
    bad[0, 0] = bad[1, 1] = bad[2, 2] = True
    assert bool(out[bad].isnan().all()) and bool(out[~bad].isfinite().all())
    torch.testing.assert_close(out[~bad], want[0][~bad])
    torch.testing.assert_close(logdet[~bad], want[1][~bad])
