"""Soft actor-critic (Haarnoja et al. 2018, v2: automatic entropy tuning) as MBPO runs it
(softlearning): tanh-Gaussian actor, twin critics, in-place Polyak target update.

The losses are defined once, below, as autograd code: ``critic_loss``, ``actor_loss``,
``alpha_loss`` (and ``target_q``). One update takes the gradients of all three from the same
parameters and makes one optimizer step, as softlearning runs the critic, policy and alpha
training ops together; the actor's loss sees the critics' weights as constants, so each loss
moves only its own parameters. These losses are what runs, on every device and whatever
the shapes (to change one, override or edit its method): compiled (``compile=True``:
``torch.compile`` of :meth:`SAC.losses`, forward and backward), and on a GPU one CUDA graph
per env step's G updates (``mbrl.agents.updates``).

A variant is a subclass and its config in one file, registered with ``register_agent``
(``agent=<name>``). Besides a loss it may override the networks (``build_actor``,
``build_critic``), the target network (``build_target``, ``update_target``; it may have
none), the ensemble's reduction (``reduce_q``), the critics' pass in the actor's loss
(``frozen_q``) and what an update reports (``metrics``).
"""

from __future__ import annotations

import copy
import math
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from mbrl.agents.agent_registry import register_agent
from mbrl.agents.networks import Actor, TwinQ, frozen_call
from mbrl.buffer import random_transitions
from mbrl.compiled import Compiled
from mbrl.config import AgentConfig
from mbrl.optim import AMP_DTYPES, GuardedStep, adam, autocast

SAC_INITS = ("glorot", "torch")
LOG_STD_MODES = {"clip": -20.0, "squash": -5.0}  # each mode's default log_std_min


@dataclass
class SACConfig(AgentConfig):
    """``agent=sac``: soft actor-critic (Haarnoja et al. 2018, v2: automatic entropy tuning)."""

    _target_: str = "mbrl.agents.sac.SAC"
    hidden_sizes: list[int] = field(default_factory=lambda: [256, 256])  # actor and critics
    actor_lr: float = 3e-4  # Adam
    critic_lr: float = 3e-4  # Adam
    alpha_lr: float = 3e-4  # Adam, on log alpha
    gamma: float = 0.99  # discount
    tau: float = 0.005  # target-network Polyak step
    init_alpha: float = 1.0  # initial entropy temperature
    autotune: bool = True  # learn alpha towards target_entropy
    target_entropy: float | None = None  # None: -act_dim (SAC v2 heuristic)
    # The actor's log-std in [log_std_min, log_std_max]: clip (softlearning's clip_by_value, as
    # MBPO) | squash (smoothly, min + (max - min)(tanh(raw) + 1) / 2, as CleanRL / SpinningUp)
    log_std_mode: str = "clip"
    # None: the mode's own, -20 (clip, softlearning) or -5 (squash)
    log_std_min: float | None = None
    log_std_max: float = 2.0  # upper end of the range (softlearning: 2)
    # Initial weights: glorot (softlearning's Keras Dense default: glorot-uniform weights, zero
    # biases) | torch (nn.Linear's default: weights and biases uniform in +-1/sqrt(fan_in)).
    init: str = "glorot"

    def log_std_range(self) -> tuple[float, float]:
        """The actor's (min, max) log-std: ``log_std_min`` or, when None, the mode's own."""
        low = LOG_STD_MODES.get(self.log_std_mode, 0.0)
        return (low if self.log_std_min is None else self.log_std_min), self.log_std_max

    def check(self) -> str | None:
        """What is wrong with SAC's own keys, or None."""
        if not self.hidden_sizes or min(self.hidden_sizes) < 1:
            return f"agent.hidden_sizes={self.hidden_sizes!r}: need one or more widths >= 1"
        for key in ("actor_lr", "critic_lr", "alpha_lr", "init_alpha"):
            if not getattr(self, key) > 0:
                return f"agent.{key}={getattr(self, key)!r} is not allowed; it must be > 0"
        if not 0 <= self.gamma < 1:
            return f"agent.gamma={self.gamma!r} is not allowed; it must be in [0, 1)"
        if not 0 < self.tau <= 1:
            return f"agent.tau={self.tau!r} is not allowed; it must be in (0, 1]"
        for key, allowed in (("init", SAC_INITS), ("log_std_mode", tuple(LOG_STD_MODES))):
            if getattr(self, key) not in allowed:
                value = getattr(self, key)
                return f"agent.{key}={value!r} is not allowed; choose one of: {', '.join(allowed)}"
        low, high = self.log_std_range()
        if not low < high:
            return f"agent.log_std_min={low} must be below agent.log_std_max={high}"
        return None


class SAC:
    """The agent: networks, the optimizer and the update step. ``compile=True`` runs
    :meth:`losses` (and its backward) through ``torch.compile``, eager if compiling fails."""

    config = SACConfig  # (agent=sac; a subclass names its own)

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        cfg: SACConfig,
        device: torch.device | str = "cpu",
        amp: str = "off",
        compile: bool = False,
    ) -> None:
        self.cfg, self.device = cfg, torch.device(device)
        self.obs_dim, self.act_dim = obs_dim, act_dim
        self.gamma, self.autotune = cfg.gamma, cfg.autotune
        self.actor = self.build_actor(obs_dim, act_dim, cfg).to(self.device)
        self.critic = self.build_critic(obs_dim, act_dim, cfg).to(self.device)
        self.critic_target = self.build_target(obs_dim, act_dim, cfg)
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
        self.amp_dtype = AMP_DTYPES[amp]
        # fp16 gradients underflow without loss scaling; bf16 has fp32's exponent range.
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=amp == "fp16")
        # A non-finite loss must not reach the weights or Adam's moments: the step is skipped.
        self._step = GuardedStep(self.opt, self.scaler)
        self.nonfinite_steps = self._step.skipped
        # (The class's function, so that a copy of the agent runs the same compiled code.)
        self.compiled = Compiled(type(self).losses, "the SAC update") if compile else None

    def build_actor(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> Actor:
        """The policy network (a subclass may return another one of the same interface)."""
        log_std = (cfg.log_std_mode, cfg.log_std_range())
        return Actor(obs_dim, act_dim, cfg.hidden_sizes, cfg.init, *log_std)

    def build_critic(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> nn.Module:
        """The critic ensemble: (obs [B, o], act [B, a]) -> q [N, B]; SAC's twins, N = 2."""
        return TwinQ(obs_dim, act_dim, cfg.hidden_sizes, cfg.init)

    def build_target(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> nn.Module | None:
        """The critic's target copy that ``target_q`` bootstraps from, Polyak-averaged
        towards the critic (``update_target``); None: no target network (``target_q``
        bootstraps from the critic itself)."""
        target = self.build_critic(obs_dim, act_dim, cfg).to(self.device)
        target.load_state_dict(self.critic.state_dict())
        return target.requires_grad_(False)

    @torch.no_grad()
    def update_target(self) -> None:
        """Polyak averaging in place, after each step: target += tau * (online - target)."""
        if self.critic_target is None:
            return
        online = self.critic.parameters()
        for target, param in zip(self.critic_target.parameters(), online, strict=True):
            target.lerp_(param, self.cfg.tau)

    def warm_up(self) -> Compiled | None:
        """Compile now, on a copy of the agent and a random batch (the agent itself is left
        as it was): the first real update then reuses the compiled code. Returns the
        :class:`Compiled` (its ``seconds`` and ``failure``), or None when not compiling."""
        if self.compiled is None:
            return None
        twin = copy.deepcopy(self)  # (its compiled losses are this agent's)
        gen = torch.Generator(device=self.device).manual_seed(0)
        batch = random_transitions(self.cfg.batch_size, self.obs_dim, self.act_dim, gen)
        self.compiled.warm_up(lambda: twin.update(batch, gen))
        return self.compiled

    def autocast(self) -> AbstractContextManager[Any]:
        """bf16/fp16 autocast for the hidden layers under AMP (a no-op without it)."""
        return autocast(self.device, self.amp_dtype)

    @torch.no_grad()
    def act(self, obs: Tensor, deterministic: bool, generator: torch.Generator | None) -> Tensor:
        """obs [B, obs_dim] -> actions [B, act_dim] in [-1, 1]."""
        with self.autocast():
            return self.actor.act(obs, deterministic, generator)

    def update(
        self, batch: dict[str, Tensor], generator: torch.Generator | None
    ) -> dict[str, Tensor]:
        """One gradient step on critics, actor and alpha. Returns detached scalar tensors
        (the same tensors a CUDA graph's replays overwrite: copy them to keep them)."""
        obs = batch["obs"]
        # noise[0] reparameterises the actor's loss, noise[1] the bootstrap target's action.
        noise = torch.randn((2, obs.shape[0], self.act_dim), generator=generator, device=obs.device)
        args = (obs, batch["act"], batch["rew"], batch["next_obs"], batch["terminated"], noise)
        out = self.losses(*args) if self.compiled is None else self.compiled(self, *args)
        q_loss, actor_loss, alpha_loss, metrics = out
        self._step(q_loss + actor_loss + alpha_loss)
        self.update_target()
        return {**metrics, "nonfinite_steps": self.nonfinite_steps}

    # --- the losses ---------------------------------------------------------------------------

    def losses(
        self, obs: Tensor, act: Tensor, rew: Tensor, next_obs: Tensor, term: Tensor, noise: Tensor
    ) -> tuple[Tensor, Tensor, Tensor, dict[str, Tensor]]:
        """(q_loss, actor_loss, alpha_loss, the update's metrics); the losses carry gradients
        to the critics, the actor and log_alpha respectively."""
        alpha = self.log_alpha.detach().exp()
        q_loss, q = self.critic_loss(obs, act, rew, next_obs, term, alpha, noise[1])
        actor_loss, log_prob = self.actor_loss(obs, alpha, noise[0])
        log_prob = log_prob.detach()
        alpha_loss = self.alpha_loss(log_prob)
        metrics = self.metrics((q_loss, actor_loss, alpha_loss), alpha, q.detach(), log_prob)
        return q_loss, actor_loss, alpha_loss, metrics

    def metrics(
        self, losses: tuple[Tensor, ...], alpha: Tensor, q: Tensor, log_prob: Tensor
    ) -> dict[str, Tensor]:
        """What an update reports (a subclass adds its own): the losses, alpha, the mean of
        the critics' values ``q`` and the policy's entropy (-mean log pi)."""
        names = ("q_loss", "actor_loss", "alpha_loss")
        out = {name: loss.detach() for name, loss in zip(names, losses, strict=True)}
        return {**out, "alpha": alpha, "q_mean": q.mean(), "entropy": -log_prob.mean()}

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
        mean_squared_error(weights=0.5)), summed over the ensemble; and q [N, B]."""
        with self.autocast():
            q = self.critic(obs, act)
        td_error = q - self.target_q(rew, next_obs, term, alpha, noise)
        return 0.5 * td_error.square().mean(dim=1).sum(), q

    @torch.no_grad()
    def target_q(
        self, rew: Tensor, next_obs: Tensor, term: Tensor, alpha: Tensor, noise: Tensor
    ) -> Tensor:
        """r + gamma * (1 - terminated) * (reduce_q(Q_target(s', a')) - alpha * log pi(a'|s'))."""
        critic = self.critic if self.critic_target is None else self.critic_target
        with self.autocast():
            next_act, next_logp = self.actor.squash(next_obs, noise)
            q_next = self.reduce_q(critic(next_obs, next_act))
        # Only true terminations cut the bootstrap; time-limit truncations do not.
        return rew + self.gamma * (~term).float() * (q_next - alpha * next_logp)

    def actor_loss(self, obs: Tensor, alpha: Tensor, noise: Tensor) -> tuple[Tensor, Tensor]:
        """mean(alpha * log pi(a|s) - reduce_q(Q(s, a))), a reparameterised; and log pi [B]."""
        with self.autocast():
            action, log_prob = self.actor.squash(obs, noise)
            q = self.reduce_q(self.frozen_q(obs, action))
        return (alpha * log_prob - q).mean(), log_prob

    def alpha_loss(self, log_prob: Tensor) -> Tensor:
        """-mean(log_alpha * (log pi + target_entropy)), log pi held constant."""
        return -(self.log_alpha * (log_prob + self.target_entropy)).mean()

    def reduce_q(self, q: Tensor) -> Tensor:
        """The critic ensemble's values q [N, B] -> one per row [B]: the minimum over the
        members (clipped double Q: Fujimoto et al. 2018, as SAC v2)."""
        return q.min(dim=0).values

    def frozen_q(self, obs: Tensor, action: Tensor) -> Tensor:
        """q [N, B] for the actor's loss: the critics' weights as constants (gradients reach
        the action only) and in inference mode (batch norm leaves its statistics alone)."""
        return frozen_call(self.critic, obs, action)

    # --- state ----------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        state = {
            "actor": self.actor.state_dict(),
            "critic": self.critic.state_dict(),
            "log_alpha": self.log_alpha.detach().clone(),
            "opt": self.opt.state_dict(),
            "scaler": self.scaler.state_dict(),
            "nonfinite_steps": self.nonfinite_steps.clone(),
        }
        if self.critic_target is not None:
            state["critic_target"] = self.critic_target.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        if self.critic_target is not None:
            self.critic_target.load_state_dict(state["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self.opt.load_state_dict(state["opt"])
        self.scaler.load_state_dict(state["scaler"])
        self.nonfinite_steps.copy_(state["nonfinite_steps"])


register_agent("sac", SACConfig)
