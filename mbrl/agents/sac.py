"""Soft actor-critic: tanh-Gaussian actor, twin critics as one batched module, automatic
entropy tuning, in-place Polyak target update. ``update`` returns detached tensors (no sync).
"""

from __future__ import annotations

import math
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from mbrl.config import SACConfig
from mbrl.nn import EnsembleMLP, adam, mlp

_LOG2 = math.log(2.0)


class Actor(nn.Module):
    """obs [B, obs_dim] -> tanh-squashed Gaussian over actions in [-1, 1]^act_dim."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        super().__init__()
        self.net = mlp(obs_dim, cfg.hidden_sizes, 2 * act_dim)
        self.log_std_min, self.log_std_max = cfg.log_std_min, cfg.log_std_max

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        mean, raw = self.net(obs).float().chunk(2, dim=-1)
        # Smooth squashing into [min, max] instead of a hard clamp (as CleanRL / SpinningUp).
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (
            torch.tanh(raw) + 1.0
        )
        return mean, log_std

    def sample(self, obs: Tensor, generator: torch.Generator | None) -> tuple[Tensor, Tensor]:
        """Reparameterised action [B, act_dim] and its log-probability [B]."""
        mean, log_std = self(obs)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        u = mean + log_std.exp() * noise
        # log N(u) - sum log(1 - tanh(u)^2), the latter in the stable form 2(log2 - u - sp(-2u)).
        log_prob = (-0.5 * noise.square() - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        log_prob = log_prob - (2.0 * (_LOG2 - u - nn.functional.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob


class TwinQ(nn.Module):
    """Two Q-networks as one ensemble: (obs [B, o], act [B, a]) -> q [2, B]."""

    def __init__(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        super().__init__()
        self.net = EnsembleMLP(2, obs_dim + act_dim, cfg.hidden_sizes, 1, act=nn.ReLU)

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        x = torch.cat([obs, act], dim=-1).expand(2, -1, -1)
        return self.net(x).squeeze(-1).float()


class SAC:
    """The agent: networks, optimizers and the update step."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: SACConfig,
        device: torch.device | str = "cpu",
        amp: str = "off",
    ) -> None:
        self.cfg, self.device = cfg, torch.device(device)
        self.actor = Actor(obs_dim, act_dim, cfg).to(self.device)
        self.critic = TwinQ(obs_dim, act_dim, cfg).to(self.device)
        self.critic_target = TwinQ(obs_dim, act_dim, cfg).to(self.device)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.critic_target.requires_grad_(False)
        self.log_alpha = torch.tensor(
            math.log(cfg.init_alpha), device=self.device, requires_grad=True
        )
        self.target_entropy = float(-act_dim if cfg.target_entropy is None else cfg.target_entropy)
        self.actor_opt = adam(self.actor.parameters(), cfg.actor_lr)
        self.critic_opt = adam(self.critic.parameters(), cfg.critic_lr)
        self.alpha_opt = adam([self.log_alpha], cfg.alpha_lr)
        self.amp_dtype = {"off": None, "bf16": torch.bfloat16, "fp16": torch.float16}[amp]
        # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=amp == "fp16")
        self.nonfinite_steps = torch.zeros((), dtype=torch.long, device=self.device)
        self._online: list[Tensor] = list(self.critic.parameters())
        self._target: list[Tensor] = list(self.critic_target.parameters())

    def _autocast(self) -> AbstractContextManager[Any]:
        return torch.autocast(
            self.device.type,
            dtype=self.amp_dtype or torch.float32,
            enabled=self.amp_dtype is not None,
        )

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] -> actions [B, act_dim] in [-1, 1]."""
        with self._autocast():
            if deterministic:
                return torch.tanh(self.actor(obs)[0])
            return self.actor.sample(obs, generator)[0]

    def update(
        self, batch: dict[str, Tensor], generator: torch.Generator | None
    ) -> dict[str, Tensor]:
        """One gradient step on critics, actor and alpha. Returns detached scalar tensors."""
        alpha = self.log_alpha.detach().exp()
        q_loss, q = self._critic_step(batch, alpha, generator)
        actor_loss, log_prob = self._actor_step(batch["obs"], alpha, generator)
        alpha_loss = self._alpha_step(log_prob)
        self.scaler.update()
        # Polyak averaging in place: target <- target + tau * (online - target).
        torch._foreach_lerp_(self._target, self._online, self.cfg.tau)
        return {
            "q_loss": q_loss.detach(),
            "actor_loss": actor_loss.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha": alpha,
            "q_mean": q.detach().mean(),
            "entropy": -log_prob.mean(),
            "nonfinite_steps": self.nonfinite_steps,
        }

    def _critic_step(
        self, b: dict[str, Tensor], alpha: Tensor, gen: torch.Generator | None
    ) -> tuple[Tensor, Tensor]:
        with torch.no_grad(), self._autocast():
            next_act, next_logp = self.actor.sample(b["next_obs"], gen)
            q_next = self.critic_target(b["next_obs"], next_act).min(dim=0).values
            # Only true terminations cut the bootstrap; time-limit truncations do not.
            not_done = (~b["terminated"]).float()
            target = b["rew"] + self.cfg.gamma * not_done * (q_next - alpha * next_logp)
        with self._autocast():
            q = self.critic(b["obs"], b["act"])
        loss = (q - target).square().mean(dim=1).sum()
        self._step(self.critic_opt, loss)
        return loss, q

    def _actor_step(
        self, obs: Tensor, alpha: Tensor, gen: torch.Generator | None
    ) -> tuple[Tensor, Tensor]:
        # Critic weights enter as constants: no gradient is computed for them here.
        frozen = {k: v.detach() for k, v in self.critic.named_parameters()}
        with self._autocast():
            act, log_prob = self.actor.sample(obs, gen)
            q = functional_call(self.critic, frozen, (obs, act)).min(dim=0).values
        loss = (alpha * log_prob - q).mean()
        self._step(self.actor_opt, loss)
        return loss, log_prob.detach()

    def _alpha_step(self, log_prob: Tensor) -> Tensor:
        loss = -(self.log_alpha * (log_prob + self.target_entropy)).mean()
        if self.cfg.autotune:
            self._step(self.alpha_opt, loss)
        return loss

    def _step(self, opt: torch.optim.Optimizer, loss: Tensor) -> None:
        opt.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        # A non-finite loss must not reach the weights or Adam's moments: its gradients are
        # replaced by zeros on the device (no host sync to decide whether to skip) and counted.
        bad = ~torch.isfinite(loss.detach())
        self.nonfinite_steps += bad.long()
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.copy_(torch.where(bad, torch.zeros_like(p.grad), p.grad))
        self.scaler.step(opt)

    def state_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "critic_target": self.critic_target.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "actor_opt": self.actor_opt.state_dict(),
            "critic_opt": self.critic_opt.state_dict(),
            "alpha_opt": self.alpha_opt.state_dict(),
            "scaler": self.scaler.state_dict(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.actor_opt.load_state_dict(state["actor_opt"])
        self.critic_opt.load_state_dict(state["critic_opt"])
        self.alpha_opt.load_state_dict(state["alpha_opt"])
        self.scaler.load_state_dict(state["scaler"])
