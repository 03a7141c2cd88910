"""Soft actor-critic (Haarnoja et al. 2018, v2: automatic entropy tuning) as MBPO runs it
(softlearning): tanh-Gaussian actor, twin critics, in-place Polyak target update.

The losses are defined once, below, as autograd code: ``critic_loss``, ``actor_loss``,
``alpha_loss`` (and ``target_q``). One update takes the gradients of all three from the same
parameters and makes one optimizer step, as softlearning runs the critic, policy and alpha
training ops together; the actor's loss sees the critics' weights as constants, so each loss
moves only its own parameters.

To change a loss, override or edit its method: the update then runs through autograd. The
hand-written gradients in ``mbrl/fastpath/sac_grads.py`` are a fast path for these exact
losses, used only while none of them is changed (``agent.grads=auto``: on a CPU, where it is
measured faster).
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import torch
from torch import Tensor

from mbrl.agents.networks import Actor, TwinQ
from mbrl.config import SACConfig
from mbrl.fastpath.adam_step import FusedAdamStep, direct_adam_supported
from mbrl.fastpath.sac_grads import joint_grads
from mbrl.fastpath.workspace import Fresh, Workspace
from mbrl.optim import GuardedStep, adam

METRICS = ("q_loss", "actor_loss", "alpha_loss", "alpha", "q_mean", "entropy")
# The methods the hand-written gradients implement: a subclass that overrides one of them
# trains through autograd.
LOSS_METHODS = ("losses", "critic_loss", "target_q", "actor_loss", "alpha_loss")


class SAC:
    """The agent: networks, the optimizer and the update step. ``compile=True`` runs the
    losses (and gradients) through ``torch.compile``; on CUDA with CUDA-graph capture."""

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
        self.gamma, self.autotune = cfg.gamma, cfg.autotune
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
        self.handwritten = self._use_handwritten(cfg.grads, amp)
        fast_adam = self.handwritten and direct_adam_supported(self.opt)
        # A non-finite loss must not reach the weights or Adam's moments: the step is skipped.
        self._step = GuardedStep(
            self.opt, self.scaler, direct=FusedAdamStep(self.opt) if fast_adam else None
        )
        self.nonfinite_steps = self._step.skipped
        self._online: list[Tensor] = list(self.critic.parameters())
        self._target: list[Tensor] = list(self.critic_target.parameters())
        # Reused matmul outputs pay off on a CPU; compiled graphs plan their own buffers and
        # autocast has no out= variants.
        reuse = self.device.type == "cpu" and self.amp_dtype is None and not compile
        self.workspace = Workspace() if reuse else Fresh()
        step = self.handwritten_losses if self.handwritten else self.losses
        self._losses: Callable[..., Any] = step
        self._graphs = compile and self.device.type == "cuda"
        if compile:
            # CUDA: graph capture; CPU: a C++ wrapper calls the kernels (less overhead per call).
            how: dict[str, Any] = (
                {"mode": "reduce-overhead"} if self._graphs else {"options": {"cpp_wrapper": True}}
            )
            self._losses = torch.compile(step, dynamic=False, **how)

    def uses_own_losses(self) -> bool:
        """Whether the losses are SAC's own (no subclass overrides one of them)."""
        return all(getattr(type(self), m) is getattr(SAC, m) for m in LOSS_METHODS)

    def _use_handwritten(self, grads: str, amp: str) -> bool:
        """``agent.grads``: auto (hand-written on a CPU while they compute the losses defined
        here, else autograd) | handwritten | autograd."""
        if grads == "autograd" or (grads == "auto" and self.device.type != "cpu"):
            return False
        why = ""
        if amp == "fp16":  # fp16's loss scaling lives in autograd's backward
            why = "amp=fp16"
        elif not self.uses_own_losses():
            why = f"{type(self).__name__}'s changed losses"
        elif not self.fast_path_agrees():
            why = "losses or networks that differ from the ones the gradients were derived for"
        if why and grads == "handwritten":
            raise ValueError(
                f"agent.grads=handwritten cannot run with {why}: the hand-written gradients "
                "are those of SAC's own losses and networks; use agent.grads=auto or autograd"
            )
        if why and self.uses_own_losses() and amp != "fp16":
            logging.getLogger(__name__).warning(
                "agent.grads=auto: the hand-written SAC gradients disagree with autograd on the "
                "losses and networks as defined now (edited?); training through autograd"
            )
        return not why

    def fast_path_agrees(self) -> bool:
        """Whether the hand-written gradients equal autograd's on the losses and networks as
        defined now, on one small random batch (fp32): an edited loss or network, which a
        subclass check cannot see, turns the fast path off."""
        g = torch.Generator(device=self.device).manual_seed(0)
        obs_dim, n = self.actor.linears[0].in_features, 16

        def rand(*shape: int) -> Tensor:
            return torch.randn(shape, generator=g, device=self.device)

        term = torch.rand(n, generator=g, device=self.device) < 0.3
        args = (rand(n, obs_dim), rand(n, self.act_dim).tanh(), rand(n), rand(n, obs_dim), term)
        noise = rand(2, n, self.act_dim)
        dtype, self.amp_dtype = self.amp_dtype, None  # (the check runs in fp32)
        try:
            out, grads = joint_grads(self, Fresh(), *args, noise)
            params = [p for group in self.opt.param_groups for p in group["params"]]
            with torch.enable_grad():  # (SAC may be built under no_grad)
                ref = self.losses(*args, noise)
                want = torch.autograd.grad(ref[0] + ref[1] + ref[2], params, allow_unused=True)
        finally:
            self.amp_dtype = dtype
        close = [torch.allclose(a, b.detach(), 1e-3, 1e-5) for a, b in zip(out, ref, strict=True)]
        for got, exp in zip(grads, want, strict=True):
            close.append(exp is not None and torch.allclose(got, exp, 1e-3, 1e-5))
        return all(close)

    def autocast(self) -> AbstractContextManager[Any]:
        """bf16/fp16 autocast for the hidden layers under AMP (a no-op without it)."""
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.amp_dtype)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] -> actions [B, act_dim] in [-1, 1]."""
        with self.autocast():
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
        out, grads = self._losses(*args) if self.handwritten else (self._losses(*args), None)
        self._step(out[0] + out[1] + out[2], grads)
        # Polyak averaging in place: target <- target + tau * (online - target).
        torch._foreach_lerp_(self._target, self._online, self.cfg.tau)
        # (Graph outputs are overwritten by the next replay: metrics kept past it are copies.)
        keep = Tensor.clone if self._graphs else Tensor.detach
        metrics = {k: keep(v.detach()) for k, v in zip(METRICS, out, strict=True)}
        metrics["nonfinite_steps"] = self.nonfinite_steps
        return metrics

    # --- the losses ---------------------------------------------------------------------------

    def losses(
        self, obs: Tensor, act: Tensor, rew: Tensor, next_obs: Tensor, term: Tensor, noise: Tensor
    ) -> tuple[Tensor, ...]:
        """(q_loss, actor_loss, alpha_loss, alpha, q_mean, entropy); the first three carry
        gradients to the critics, the actor and log_alpha respectively."""
        alpha = self.log_alpha.detach().exp()
        q_loss, q = self.critic_loss(obs, act, rew, next_obs, term, alpha, noise[1])
        actor_loss, log_prob = self.actor_loss(obs, alpha, noise[0])
        log_prob = log_prob.detach()
        alpha_loss = self.alpha_loss(log_prob)
        return q_loss, actor_loss, alpha_loss, alpha, q.detach().mean(), -log_prob.mean()

    def critic_loss(
        self,
        obs: Tensor,
        act: Tensor,
        rew: Tensor,
        next_obs: Tensor,
        term: Tensor,
        alpha: Tensor,
        noise: Tensor,
    ) -> tuple[Tensor, Tensor]:
        """Each critic's 0.5 * mean squared TD error (softlearning's
        mean_squared_error(weights=0.5)), summed over the twins; and q [2, B]."""
        with self.autocast():
            q = self.critic(obs, act)
        td_error = q - self.target_q(rew, next_obs, term, alpha, noise)
        return 0.5 * td_error.square().mean(dim=1).sum(), q

    @torch.no_grad()
    def target_q(
        self, rew: Tensor, next_obs: Tensor, term: Tensor, alpha: Tensor, noise: Tensor
    ) -> Tensor:
        """r + gamma * (1 - terminated) * (min_i Q_target_i(s', a') - alpha * log pi(a'|s'))."""
        with self.autocast():
            next_act, next_logp = self.actor.squash(next_obs, noise)
            q_next = self.critic_target(next_obs, next_act).min(dim=0).values
        # Only true terminations cut the bootstrap; time-limit truncations do not.
        return rew + self.gamma * (~term).float() * (q_next - alpha * next_logp)

    def actor_loss(self, obs: Tensor, alpha: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """mean(alpha * log pi(a|s) - min_i Q_i(s, a)), a reparameterised; and log pi [B]."""
        with self.autocast():
            action, log_prob = self.actor.squash(obs, noise)
            q = self.critic(obs, action, frozen=True).min(dim=0).values
        return (alpha * log_prob - q).mean(), log_prob

    def alpha_loss(self, log_prob: Tensor) -> Tensor:
        """-mean(log_alpha * (log pi + target_entropy)), log pi held constant."""
        return -(self.log_alpha * (log_prob + self.target_entropy)).mean()

    def handwritten_losses(
        self, obs: Tensor, act: Tensor, rew: Tensor, next_obs: Tensor, term: Tensor, noise: Tensor
    ) -> tuple[tuple[Tensor, ...], list[Tensor]]:
        """``losses``' values and the gradients of their sum, by hand (the fast path)."""
        return joint_grads(self, self.workspace, obs, act, rew, next_obs, term, noise)

    # --- state ----------------------------------------------------------------------------

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
