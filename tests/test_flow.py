"""Ensemble conditional flow: bijection, log-det, gradients, nflows agreement, save/load."""

from __future__ import annotations

import io
from collections.abc import Callable

import pytest
import torch
from nflows.distributions import StandardNormal
from nflows.flows import Flow
from nflows.transforms import CompositeTransform, Permutation
from nflows.transforms.coupling import PiecewiseRationalQuadraticCouplingTransform
from torch import nn

from flows import ConditionalFlow, EnsembleConditionalFlow
from flows.nn import EnsembleMLP

E, D, C, B = 3, 5, 4, 16


def _flow(
    transform: str = "spline", context_dim: int = C, seed: int = 0
) -> EnsembleConditionalFlow:
    torch.manual_seed(seed)
    flow = EnsembleConditionalFlow(
        E,
        D,
        context_dim,
        layers=3,
        transform=transform,
        hidden=(16, 16),
        bins=5,
        tail_bound=3.0,
        embed_hidden=(16,),
        embed_dim=8,
    ).double()
    with torch.no_grad():  # move away from the identity initialisation
        for p in flow.parameters():
            p.add_(torch.randn_like(p) * 0.3)
    return flow


@pytest.mark.parametrize("transform", ["spline", "affine"])
def test_invertible_and_logdets_cancel(transform: str) -> None:
    flow = _flow(transform)
    ctx = torch.randn(E, B, C, dtype=torch.float64)
    dist = flow(ctx)
    y = torch.randn(E, B, D, dtype=torch.float64) * 2
    z, ld = flow.to_noise(y, dist.h, None)
    y_back, ild = flow.to_data(z, dist.h, None)
    torch.testing.assert_close(y_back, y)
    torch.testing.assert_close(ld + ild, torch.zeros_like(ld), atol=1e-9, rtol=0)


@pytest.mark.parametrize("transform", ["spline", "affine"])
def test_logdet_matches_autograd_jacobian(transform: str) -> None:
    flow = _flow(transform)
    ctx = torch.randn(1, C, dtype=torch.float64)
    dist = flow(ctx)
    for member in range(E):
        h = dist.h[member : member + 1]
        y0 = torch.randn(1, 1, D, dtype=torch.float64) * 1.5

        def f(y: torch.Tensor, h: torch.Tensor = h, m: int = member) -> torch.Tensor:
            return flow.to_noise(y.view(1, 1, D), h, torch.tensor([m]))[0].view(D)

        jac = torch.autograd.functional.jacobian(f, y0.view(D))
        _, ld = flow.to_noise(y0, h, torch.tensor([member]))
        torch.testing.assert_close(ld.view(()), torch.linalg.slogdet(jac)[1])


def test_gradients_reach_every_parameter() -> None:
    flow = _flow()
    ctx, y = torch.randn(B, C, dtype=torch.float64), torch.randn(B, D, dtype=torch.float64)
    (-flow(ctx).log_prob(y).mean()).backward()
    for name, p in flow.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    flow.zero_grad()
    flow(ctx).rsample(generator=torch.Generator().manual_seed(0)).square().sum().backward()
    for name, p in flow.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, f"rsample: {name}"


class _MemberNet(nn.Module):
    """nflows transform net computing one member's conditioner on [identity part, context]."""

    def __init__(self, flow: EnsembleConditionalFlow, layer: int, member: int) -> None:
        super().__init__()
        self.flow, self.layer, self.member = flow, layer, torch.tensor([member])

    def forward(self, inputs: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        x = torch.cat([inputs, context], -1)[None]
        return self.flow.conditioners[self.layer](x, self.member)[0]


@pytest.mark.filterwarnings("ignore:Inputs to the softmax are not scaled down")
def test_one_member_equals_a_plain_nflows_flow() -> None:
    flow = _flow()
    with torch.no_grad():  # identity base layer: nflows has no conditional elementwise affine
        flow.base.weight.zero_()
        flow.base.bias.zero_()
    ctx, y = torch.randn(B, C, dtype=torch.float64), torch.randn(B, D, dtype=torch.float64) * 2
    dist = flow(ctx)
    ours = dist.log_prob(y)
    mask = torch.tensor([0] * flow.split + [1] * (D - flow.split))
    for member in range(E):
        layers: list[nn.Module] = []
        for i in range(len(flow.conditioners)):
            layers.append(Permutation(getattr(flow, f"perm{i}")))
            layers.append(
                PiecewiseRationalQuadraticCouplingTransform(
                    mask,
                    lambda _i, _o, i=i, m=member: _MemberNet(flow, i, m),
                    num_bins=flow.bins,
                    tails="linear",
                    tail_bound=flow.tail_bound,
                )
            )
        ref = Flow(CompositeTransform(layers), StandardNormal([D]))
        expected = ref.log_prob(y, context=dist.h[member])
        torch.testing.assert_close(ours[member], expected)


def test_members_are_independent_and_subsets_agree() -> None:
    flow = _flow()
    ctx, y = torch.randn(B, C, dtype=torch.float64), torch.randn(B, D, dtype=torch.float64)
    full = flow(ctx).log_prob(y)
    subset = flow(ctx, members=torch.tensor([2, 0])).log_prob(y)
    torch.testing.assert_close(subset, full[[2, 0]])
    with torch.no_grad():
        for p in flow.parameters():
            if p.dim() >= 1 and p.shape[0] == E:
                p[0].add_(1.0)  # change member 0 only
    after = flow(ctx).log_prob(y)
    assert not torch.allclose(after[0], full[0])
    torch.testing.assert_close(after[1:], full[1:])


def test_identity_at_init_and_unconditional_flow() -> None:
    flow = EnsembleConditionalFlow(2, 3, 0, layers=2, hidden=(8,))
    dist = flow(batch=10)
    y = torch.randn(10, 3)
    expected = torch.distributions.Normal(0.0, 1.0).log_prob(y).sum(-1)
    torch.testing.assert_close(dist.log_prob(y), expected.expand(2, 10), atol=1e-5, rtol=0)
    assert dist.sample(generator=torch.Generator().manual_seed(0)).shape == (2, 10, 3)
    with pytest.raises(ValueError, match="batch=B"):
        flow()
    with pytest.raises(ValueError, match="transform='maf'"):
        EnsembleConditionalFlow(2, 3, transform="maf")


def test_save_and_load_roundtrip() -> None:
    flow = _flow()
    buf = io.BytesIO()
    torch.save(flow.state_dict(), buf)
    buf.seek(0)
    other = _flow(seed=1)
    other.load_state_dict(torch.load(buf))
    ctx, y = torch.randn(B, C, dtype=torch.float64), torch.randn(B, D, dtype=torch.float64)
    torch.testing.assert_close(other(ctx).log_prob(y), flow(ctx).log_prob(y))
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    torch.testing.assert_close(other(ctx).sample(generator=g1), flow(ctx).sample(generator=g2))


def test_bf16_autocast_runs_hidden_layers_low_and_everything_else_fp32() -> None:
    flow = EnsembleConditionalFlow(E, D, C, layers=2, hidden=(16,), embed_hidden=(16,), embed_dim=8)
    dtypes: dict[str, torch.dtype] = {}

    def record(name: str) -> Callable[[object, object, torch.Tensor], None]:
        def hook(module: object, inputs: object, out: torch.Tensor) -> None:
            dtypes.setdefault(name, out.dtype)

        return hook

    cond = flow.conditioners[0]
    assert isinstance(cond, EnsembleMLP)
    cond.layers[0].register_forward_hook(record("conditioner hidden"))
    cond.register_forward_hook(record("conditioner output"))
    flow.base.register_forward_hook(record("base loc / log-scale"))
    ctx, y = torch.randn(B, C), torch.randn(B, D)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        dist = flow(ctx)
        lp = dist.log_prob(y)
        s = dist.sample()
    assert dtypes == {
        "conditioner hidden": torch.bfloat16,
        "conditioner output": torch.float32,
        "base loc / log-scale": torch.float32,
    }
    assert lp.dtype == torch.float32 and s.dtype == torch.float32


def test_fits_a_bimodal_conditional_density() -> None:
    """y = +-c + small noise: a spline flow beats the best single Gaussian's NLL."""
    torch.manual_seed(0)
    flow = EnsembleConditionalFlow(
        1, 1, 1, layers=2, hidden=(32, 32), bins=8, embed_hidden=(32,), embed_dim=16
    )
    opt = torch.optim.Adam(flow.parameters(), lr=3e-3)
    for _ in range(400):
        c = torch.rand(256, 1) + 0.5
        sign = torch.randint(0, 2, (256, 1)) * 2 - 1
        y = sign * c + 0.05 * torch.randn(256, 1)
        loss = -flow(c).log_prob(y).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    # Best Gaussian for y given c: N(0, c^2 + 0.05^2), NLL ~ 0.5 log(2 pi e c^2) ~ 1.42 for c ~ 1.
    assert loss.item() < 0.5


def test_flows_package_does_not_import_mbrl() -> None:
    import subprocess
    import sys

    code = (
        "import sys, flows, flows.coupled, flows.splines; "
        "print(any(m.startswith('mbrl') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_single_flow_is_a_torch_distribution_like_one_ensemble_member() -> None:
    """ConditionalFlow: no member dimension; its log-density equals that of a one-member
    ensemble with the same weights, and samples have torch's shapes."""
    torch.manual_seed(0)
    one = ConditionalFlow(D, C, layers=2, hidden=[16])
    ens = EnsembleConditionalFlow(1, D, C, layers=2, hidden=[16])
    ens.load_state_dict(one.state_dict())
    with torch.no_grad():
        for p in one.parameters():
            p.add_(0.1 * torch.randn_like(p))
        ens.load_state_dict(one.state_dict())
    ctx, y = torch.randn(B, C), torch.randn(B, D)
    dist = one(ctx)
    assert isinstance(dist, torch.distributions.Distribution)
    assert dist.batch_shape == (B,) and dist.event_shape == (D,)
    torch.testing.assert_close(dist.log_prob(y), ens(ctx).log_prob(y)[0])
    g1, g2 = torch.Generator().manual_seed(4), torch.Generator().manual_seed(4)
    torch.testing.assert_close(dist.sample(generator=g1), ens(ctx).sample(generator=g2)[0])
    assert dist.rsample((3, 2)).shape == (3, 2, B, D)
    assert ens(ctx).sample((3,)).shape == (3, 1, B, D)
    with pytest.raises(TypeError, match="by name"):
        dist.sample(torch.Generator())  # type: ignore[arg-type]  # (positional: refused)


def test_log_prob_takes_samples_with_sample_dims() -> None:
    """``dist.log_prob(dist.sample((S,)))`` as for any torch distribution: each sample row's
    log-density equals the one computed without the sample dimension."""
    torch.manual_seed(0)
    for flow in (ConditionalFlow(D, C, layers=2, hidden=[16]), _flow()):
        ctx = torch.randn(B, C, dtype=next(flow.parameters()).dtype)
        dist = flow(ctx)
        ys = dist.sample((3,))
        lp = dist.log_prob(ys)
        assert lp.shape == (3, *dist.batch_shape)
        for i in range(3):
            torch.testing.assert_close(lp[i], dist.log_prob(ys[i]))
