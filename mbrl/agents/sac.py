"""Soft actor-critic: tanh-Gaussian actor, twin critics as one batched module, automatic
entropy tuning, in-place Polyak target update. ``update`` returns detached tensors (no sync).

One update takes the gradients of all three losses, computed from the same parameters, and
makes one fused optimizer step, as in the SAC used by MBPO (softlearning runs the critic, policy
and alpha training ops together). The actor's loss sees the critic's weights as constants, so
each loss only moves its own parameters. The gradients are written out by hand
(``sac_grads.py``, the default) or taken by autograd from ``SAC._compute_losses``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn

from mbrl.agents.sac_grads import Fresh, Workspace, joint_grads, tanh_gaussian
from mbrl.config import SACConfig
from mbrl.nn import EnsembleLinear, EnsembleMLP, fp32, full, mlp
from mbrl.optim import GuardedStep, adam

_FRESH = Fresh()
_METRICS = ("q_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")


class Actor(nn.Module):
    """obs [B, obs_dim] -> tanh-squashed Gaussian over actions in [-1, 1]^act_dim."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        super().__init__()
        self.act_dim = act_dim
        self.net = mlp(obs_dim, cfg.hidden_sizes, 2 * act_dim)
        self.linears = [m for m in self.net if isinstance(m, nn.Linear)]
        self.log_std_min, self.log_std_max = cfg.log_std_min, cfg.log_std_max

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        mean, raw = self.heads(self.hidden(obs)[-1])
        return mean, self.log_std(torch.tanh(raw))

    def hidden(self, obs: Tensor, ws: Fresh = _FRESH) -> list[Tensor]:
        """The input and each hidden layer's output. The same computation as self.net with
        in-place ReLUs and no per-layer module calls: Python overhead is a large share of an
        update's time on a CPU. ``ws``: where the matmuls write (``sac_grads.Workspace``)."""
        hs = [obs]
        for layer in self.linears[:-1]:
            hs.append(ws.mm(hs[-1], layer.weight.t()).add_(layer.bias).relu_())
        return hs

    def heads(self, h: Tensor, ws: Fresh = _FRESH) -> tuple[Tensor, Tensor]:
        """Last hidden layer -> (mean, raw log-std) [B, act_dim] each, always in fp32: under
        AMP only the hidden layers run in bf16/fp16 (a bf16 mean carries ~3 significant
        digits)."""
        last = self.linears[-1]
        with fp32(h):
            # W @ h^T rather than h @ W^T: with 2 * act_dim outputs, ~2.5x faster on a CPU.
            out = ws.mm(last.weight, full(h).t()).add_(last.bias.unsqueeze(1)).t()
        mean, raw = out.chunk(2, dim=-1)
        return mean, raw

    def log_std(self, tanh_raw: Tensor) -> Tensor:
        # Smooth squashing into [min, max] instead of a hard clamp (as CleanRL / SpinningUp).
        return self.log_std_min + self.half_range * (tanh_raw + 1.0)

    @property
    def half_range(self) -> float:
        return 0.5 * (self.log_std_max - self.log_std_min)

    def sample(self, obs: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Reparameterised action [B, act_dim] and its log-probability [B]."""
        shape = (obs.shape[0], self.act_dim)
        return self.squash(obs, torch.randn(shape, generator=generator, device=obs.device))

    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """Env actions [B, act_dim]: the squashed mean, or a sample."""
        if deterministic:
            return torch.tanh(self(obs)[0])
        return self.sample(obs, generator)[0]

    def squash(self, obs: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """``sample`` with the standard-normal ``noise`` [B, act_dim] given."""
        mean, log_std = self(obs)
        action, log_prob, _ = tanh_gaussian(mean, log_std, noise)
        return action, log_prob


class TwinQ(nn.Module):
    """Two Q-networks as one ensemble: (obs [B, o], act [B, a]) -> q [2, B]."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        super().__init__()
        self.net = EnsembleMLP(2, obs_dim + act_dim, cfg.hidden_sizes, 1, act=nn.ReLU)
        self.linears = [m for m in self.net.layers if isinstance(m, EnsembleLinear)]

    def forward(self, obs: Tensor, act: Tensor, frozen: bool = False) -> Tensor:
        """``frozen``: weights as constants, gradients flow to ``act`` (and ``obs``) only."""
        x = torch.cat([obs, act], dim=-1).expand(2, -1, -1)
        return self.activations(x, frozen)[-1].squeeze(-1).float()

    def activations(self, x: Tensor, frozen: bool = False, ws: Fresh = _FRESH) -> list[Tensor]:
        """x [2, N, obs+act] -> [x, each hidden layer's output, q [2, N, 1]]; ``ws``: where
        the matmuls write (``sac_grads.Workspace``)."""
        hs = [x]
        layers = self.linears
        for i, layer in enumerate(layers):
            w: Tensor = layer.weight
            b: Tensor = layer.bias
            if frozen:
                w, b = w.detach(), b.detach()
            if i == len(layers) - 1:
                # The Q head in fp32 under AMP: at Q ~ 300 bf16's spacing is 2, as large as
                # the TD errors it would carry.
                with fp32(x):
                    hs.append(ws.bmm(full(x), w).add_(b))
                break
            # bmm then the bias in place (not baddbmm, which first copies the bias into its
            # output): compiled, the bias and the ReLU become one pass over the bmm's result.
            x = torch.relu_(ws.bmm(x, w).add_(b))  # (as self.net; bmm keeps only its inputs)
            hs.append(x)
        return hs


class SAC:
    """The agent: networks, the optimizer and the update step.

    The update's gradients are written out by hand (``cfg.grads="analytic"``,
    ``mbrl.agents.sac_grads``) or taken by autograd (``"autograd"``, also used with fp16,
    whose loss scaling lives in autograd's backward). ``compile=True`` runs the loss and
    gradient computation through ``torch.compile``; on CUDA with CUDA-graph capture
    (``mode="reduce-overhead"``).
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: SACConfig,
        device: torch.device | str = "cpu",
        amp: str = "off",
        compile: bool = False,
    ) -> None:
        self.cfg, self.device, self.act_dim = cfg, torch.device(device), act_dim
        self.actor = Actor(obs_dim, act_dim, cfg).to(self.device)
        self.critic = TwinQ(obs_dim, act_dim, cfg).to(self.device)
        self.critic_target = TwinQ(obs_dim, act_dim, cfg).to(self.device)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        self.log_alpha = torch.tensor(
            math.log(cfg.init_alpha), device=self.device, requires_grad=cfg.autotune
        )
        self.target_entropy = float(-act_dim if cfg.target_entropy is None else cfg.target_entropy)
        groups = [
            {"params": list(self.actor.parameters()), "lr": cfg.actor_lr},
            {"params": list(self.critic.parameters()), "lr": cfg.critic_lr},
        ]
        if cfg.autotune:
            groups.append({"params": [self.log_alpha], "lr": cfg.alpha_lr})
        self.opt = adam(groups, cfg.actor_lr)
        self.amp_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=amp == "fp16")
        # A non-finite loss must not reach the weights or Adam's moments: the step is skipped.
        self._step = GuardedStep(self.opt, self.scaler, direct=True)
        self.nonfinite_steps = self._step.skipped
        self._online: list[Tensor] = list(self.critic.parameters())
        self._target: list[Tensor] = list(self.critic_target.parameters())
        self.analytic = cfg.grads == "analytic" and amp != "fp16"
        # Reused matmul outputs pay off on a CPU; compiled graphs plan their own buffers and
        # autocast has no out= variants.
        reuse = self.device.type == "cpu" and self.amp_dtype is None and not compile
        self.workspace = Workspace() if reuse else _FRESH
        losses = self._analytic_losses if self.analytic else self._compute_losses
        self._losses: Callable[..., Any] = losses
        self._graphs = compile and self.device.type == "cuda"
        if compile:
            # CUDA: graph capture; CPU: a C++ wrapper calls the kernels (less overhead per call).
            how: dict[str, Any] = (
                {"mode": "reduce-overhead"} if self._graphs else {"options": {"cpp_wrapper": True}}
            )
            self._losses = torch.compile(losses, dynamic=False, **how)

    def _autocast(self) -> AbstractContextManager[Any]:
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] -> actions [B, act_dim] in [-1, 1]."""
        with self._autocast():
            return self.actor.act(obs, deterministic, generator)

    def update(
        self, batch: dict[str, Tensor], generator: torch.Generator | None
    ) -> dict[str, Tensor]:
        """One gradient step on critics, actor and alpha. Returns detached scalar tensors."""
        obs = batch["obs"]
        if self._graphs:  # each update is one step of the CUDA-graph tree
            torch.compiler.cudagraph_mark_step_begin()
        # noise[0] reparameterises the actor's loss, noise[1] the bootstrap target's action.
        noise = torch.randn((2, obs.shape[0], self.act_dim), generator=generator, device=obs.device)
        args = (obs, batch["act"], batch["rew"], batch["next_obs"], batch["terminated"], noise)
        out, grads = self._losses(*args) if self.analytic else (self._losses(*args), None)
        self._step(out[0] + out[1] + out[2], grads)
        # Polyak averaging in place: target <- target + tau * (online - target).
        torch._foreach_lerp_(self._target, self._online, self.cfg.tau)
        # (Graph outputs are overwritten by the next replay: metrics kept past it are copies.)
        keep = Tensor.clone if self._graphs else Tensor.detach
        metrics = {k: keep(v.detach()) for k, v in zip(_METRICS, out, strict=True)}
        metrics["nonfinite_steps"] = self.nonfinite_steps
        return metrics

    def _compute_losses(
        self, obs: Tensor, act: Tensor, rew: Tensor, next_obs: Tensor, term: Tensor, noise: Tensor
    ) -> tuple[Tensor, ...]:
        """(q_loss, actor_loss, alpha_loss, alpha, q_mean, entropy); the first three carry
        gradients to the critic, the actor and log_alpha respectively."""
        alpha = self.log_alpha.detach().exp()
        with self._autocast():
            q = self.critic(obs, act)
            new_act, log_prob = self.actor.squash(obs, noise[0])
            q_pi = self.critic(obs, new_act, frozen=True).min(dim=0).values
        # Each critic's loss is 0.5 * mean squared TD error (softlearning's
        # mean_squared_error(weights=0.5)); the twin critics' losses are summed.
        q_loss = (q - self._target_q(rew, next_obs, term, alpha, noise[1])).square()
        q_loss = 0.5 * q_loss.mean(dim=1).sum()
        actor_loss = (alpha * log_prob - q_pi).mean()
        log_prob = log_prob.detach()
        alpha_loss = -(self.log_alpha * (log_prob + self.target_entropy)).mean()
        return q_loss, actor_loss, alpha_loss, alpha, q.detach().mean(), -log_prob.mean()

    def _analytic_losses(
        self, obs: Tensor, act: Tensor, rew: Tensor, next_obs: Tensor, term: Tensor, noise: Tensor
    ) -> tuple[tuple[Tensor, ...], list[Tensor]]:
        """``_compute_losses``' values and the gradients of their sum, by hand."""
        return joint_grads(self, obs, act, rew, next_obs, term, noise)

    @torch.no_grad()
    def _target_q(
        self, rew: Tensor, next_obs: Tensor, term: Tensor, alpha: Tensor, noise: Tensor
    ) -> Tensor:
        with self._autocast():
            next_act, next_logp = self.actor.squash(next_obs, noise)
            q_next = self.critic_target(next_obs, next_act).min(dim=0).values
        # Only true terminations cut the bootstrap; time-limit truncations do not.
        return rew + self.cfg.gamma * (~term).float() * (q_next - alpha * next_logp)

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "opt": self.opt.state_dict(),
            "scaler": self.scaler.state_dict(),
            "nonfinite_steps": self.nonfinite_steps.clone(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.opt.load_state_dict(state["opt"])
        self._step.sync()
        self.scaler.load_state_dict(state["scaler"])
        self.nonfinite_steps.copy_(state["nonfinite_steps"])
