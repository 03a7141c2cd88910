"""SAC's networks: the tanh-Gaussian actor and the twin critics (one batched module). Plain
modules run by their ``forward``; under AMP the hidden layers run in bf16/fp16 and the output
heads in fp32. Hidden activations are ReLU (softlearning's default), as ``flows.nn.ReLU``:
the same function and gradient, with a backward that compiles well. They take their sizes
and settings as arguments (the agent reads them from its config)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn
from torch.func import functional_call

from flows.nn import EnsembleLinear, EnsembleMLP, ReLU, fp32, full

_LOG2 = math.log(2.0)


def mlp(
    in_dim: int, hidden: Sequence[int], out_dim: int, act: type[nn.Module] = ReLU
) -> nn.Sequential:
    """``in -> hidden... -> out`` with ``act`` between layers and a linear output."""
    layers: list[nn.Module] = []
    last = in_dim
    for width in hidden:
        layers += [nn.Linear(last, width), act()]
        last = width
    layers.append(nn.Linear(last, out_dim))
    return nn.Sequential(*layers)


def tanh_gaussian(mean: Tensor, log_std: Tensor, noise: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(a = tanh(u), log pi(a), std) for u = mean + std * noise, noise ~ N(0, I)."""
    std = log_std.exp()
    u = mean + std * noise
    # log N(u) - sum log(1 - tanh(u)^2), the latter in the stable form 2(log2 - u - sp(-2u)).
    log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
    log_prob = log_prob - (2.0 * (_LOG2 - u - nn.functional.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), log_prob, std


@torch.no_grad()
def init_layer(weight: Tensor, bias: Tensor, fan_in: int, fan_out: int, how: str) -> None:
    """``glorot``: Keras ``Dense``'s default, as softlearning builds SAC's networks: weights
    uniform in ±sqrt(6 / (fan_in + fan_out)), zero biases. ``torch``: ``nn.Linear``'s default,
    weights and biases uniform in ±1/sqrt(fan_in)."""
    if how == "glorot":
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        weight.uniform_(-bound, bound)
        bias.zero_()
    elif how == "torch":
        bound = 1.0 / math.sqrt(fan_in)
        weight.uniform_(-bound, bound)
        bias.uniform_(-bound, bound)
    else:
        raise ValueError(f"agent.init={how!r} is not allowed; choose glorot or torch")


class Actor(nn.Module):
    """obs [B, obs_dim] -> tanh-squashed Gaussian over actions in [-1, 1]^act_dim."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int],
        init: str,
        log_std_mode: str,
        log_std_range: tuple[float, float],
    ) -> None:
        """``init``: see :func:`init_layer`; ``log_std_mode``: clip | squash, into
        ``log_std_range`` (min, max)."""
        super().__init__()
        self.act_dim = act_dim
        self.net = mlp(obs_dim, hidden, 2 * act_dim)
        self.log_std_mode = log_std_mode
        self.log_std_min, self.log_std_max = log_std_range
        for layer in self.linears:
            init_layer(layer.weight, layer.bias, layer.in_features, layer.out_features, init)

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, log_std) [B, act_dim] each."""
        h = self.net[:-1](obs)
        with fp32(h):  # the head in fp32 under AMP: a bf16 mean carries ~3 significant digits
            mean, raw = self.net[-1](full(h)).chunk(2, dim=-1)
        return mean, self.log_std(raw)

    def log_std(self, raw: Tensor) -> Tensor:
        """The head's raw log-std output -> the log-std in [min, max]."""
        if self.log_std_mode == "clip":  # softlearning: tf.clip_by_value(log_scale_diag, -20, 2)
            return raw.clamp(self.log_std_min, self.log_std_max)
        # squash: smoothly, with a gradient everywhere (as CleanRL / SpinningUp)
        half_range = 0.5 * (self.log_std_max - self.log_std_min)
        return self.log_std_min + half_range * (torch.tanh(raw) + 1.0)

    @property
    def linears(self) -> list[nn.Linear]:
        return [m for m in self.net if isinstance(m, nn.Linear)]

    def squash(self, obs: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """Reparameterised action [B, act_dim] and its log-probability [B], for the
        standard-normal ``noise`` [B, act_dim]."""
        mean, log_std = self(obs)
        action, log_prob, _ = tanh_gaussian(mean, log_std, noise)
        return action, log_prob

    def sample(self, obs: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        shape = (obs.shape[0], self.act_dim)
        return self.squash(obs, torch.randn(shape, generator=generator, device=obs.device))

    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """Env actions [B, act_dim]: the squashed mean, or a sample."""
        if deterministic:
            return torch.tanh(self(obs)[0])
        return self.sample(obs, generator)[0]


class TwinQ(nn.Module):
    """Two Q-networks as one ensemble: (obs [B, o], act [B, a]) -> q [2, B]. The Q head runs in
    fp32 under AMP: at Q ~ 300 bf16's spacing is 2, as large as the TD errors it would carry."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int], init: str) -> None:
        super().__init__()
        self.net = EnsembleMLP(2, obs_dim + act_dim, hidden, 1, act=ReLU)
        for layer in self.linears:  # (each member's [in, out] slice gets the layer's bounds)
            init_layer(layer.weight, layer.bias, layer.in_dim, layer.out_dim, init)

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        x = torch.cat([obs, act], dim=-1).expand(2, -1, -1)
        return self.net(x).squeeze(-1)

    @property
    def linears(self) -> list[EnsembleLinear]:
        return [m for m in self.net.layers if isinstance(m, EnsembleLinear)]


def frozen_call(module: nn.Module, *args: Tensor) -> Tensor:
    """``module(*args)`` with its weights as constants, so that gradients reach ``args`` only
    (the actor's loss must not move the critics), and in inference mode, so that batch norm
    normalises with its running statistics and leaves them as they are (CrossQ's actor loss;
    a plain MLP computes the same either way)."""
    params = {k: v.detach() for k, v in module.named_parameters()}
    training = module.training
    module.train(False)
    try:
        out: Tensor = functional_call(module, params, args)
    finally:
        module.train(training)
    return out
