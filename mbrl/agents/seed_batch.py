"""S independent SAC agents, one per seed, updated as one: the agent side of seeds batched in
one process (docs/scaling.md, "Seeds batched in one process").

Every weight, the entropy temperature and Adam's moments carry a leading seed dimension
[S, ...]. An update runs the agent's own losses (:meth:`SAC.losses`, unchanged: a loss is
still defined once) for all seeds at once through ``torch.func``: ``vmap`` over the seeds of
``grad`` of the summed loss, so each kernel launches once for S seeds instead of once per
seed and process (what CUDA MPS cannot remove: its processes each launch their own).

Nothing is shared between the seeds: each has its own batch, noise (drawn from its own
generator, as a solo run draws it), weights, target, alpha, Adam moments and count of
non-finite steps. The optimizer is one fused Adam over the stacked tensors; Adam works element
by element, so that is S Adams (whose step counts advance together, as the seeds update
together). Seed s's state (:meth:`SeedBatch.state_dicts`) is a SAC state dict: a solo agent
loads it, and a batch is built from solo agents (:meth:`SeedBatch.__init__`).

A non-finite loss: a solo agent skips the step (its fused Adam's ``found_inf``). Here only the
seeds whose loss is not finite get a zero gradient for that step, as ``GuardedStep`` does for
an optimizer without a fused kernel (their Adam moments decay by one step); the other seeds
step as usual, and ``nonfinite_steps[s]`` counts the seed's skipped steps.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from flows.nn import ReLU
from mbrl.agents.networks import tanh_gaussian
from mbrl.agents.sac import SAC
from mbrl.agents.updates import BatchSource, SACUpdates
from mbrl.buffer import random_transitions
from mbrl.compiled import Compiled
from mbrl.optim import adam

FIELDS = ("obs", "act", "rew", "next_obs", "terminated")


class _Nets(nn.Module):
    """The agent's networks as one module, so that ``functional_call`` can run the agent's
    own methods on one seed's weights (the template agent's modules hold none of their own)."""

    def __init__(self, agent: SAC) -> None:
        super().__init__()
        self.agent = agent
        self.actor, self.critic = agent.actor, agent.critic
        self.critic_target = agent.critic_target

    def forward(self, log_alpha: Tensor, *args: Tensor) -> Any:
        """SAC.losses' outputs, with ``log_alpha`` as the agent's temperature for the call."""
        agent, before = self.agent, self.agent.log_alpha
        agent.log_alpha = log_alpha
        try:
            return agent.losses(*args)
        finally:
            agent.log_alpha = before


class SeedBatch:
    """S SAC agents (``agents``, one per seed: their weights, alpha and optimizer state are
    copied in, then their weights read the batch's: :meth:`_bind`) updated as one.
    ``update`` and ``act`` take tensors with a leading seed dimension and one generator per
    seed."""

    def __init__(self, agents: Sequence[SAC], compile: bool = False) -> None:
        """``compile``: the seeds' vmapped losses and their backward through
        ``torch.compile`` (:class:`~mbrl.compiled.Compiled`: eager if compiling fails)."""
        _check_alike(agents)
        first = agents[0]
        self.seeds, self.cfg, self.device = len(agents), first.cfg, first.device
        self.obs_dim, self.act_dim = first.obs_dim, first.act_dim
        self.template = copy.deepcopy(first)  # runs every seed's weights; holds none itself
        self._nets = _Nets(self.template)
        for module in self._nets.modules():  # (vmap cannot run its compiled custom backward)
            if isinstance(module, ReLU):
                module.from_output = False
        names = [n for n, _ in self._nets.named_parameters()]
        self.online = {n: self._stack(agents, n).requires_grad_() for n in names if _online(n)}
        self.target = {n: self._stack(agents, n) for n in names if not _online(n)}
        self.log_alpha = torch.stack([a.log_alpha.detach() for a in agents]).clone()
        self.log_alpha.requires_grad_(self.cfg.autotune)
        groups = [
            {"params": _of(self.online, "actor."), "lr": self.cfg.actor_lr},
            {"params": _of(self.online, "critic."), "lr": self.cfg.critic_lr},
        ]
        if self.cfg.autotune:
            groups.append({"params": [self.log_alpha], "lr": self.cfg.alpha_lr})
        self.opt = adam(groups, self.cfg.actor_lr)
        self.nonfinite_steps = torch.zeros(self.seeds, dtype=torch.long, device=self.device)
        grads = vmap(grad(self._loss, argnums=(0, 1), has_aux=True))
        self.compiled = Compiled(grads, "the batched SAC update") if compile else None
        self._grads = grads if self.compiled is None else self.compiled
        self.template.compiled = self.compiled  # (what the update block reports as run)
        self.load_state_dicts([a.state_dict() for a in agents])
        self._bind(agents)

    def _bind(self, agents: Sequence[SAC]) -> None:
        """Each agent's weights and log_alpha become views of its seed's slice of the stacked
        tensors: what reads an agent (acting, model rollouts, evaluation) sees its seed's
        current weights, with no copy. The agents' own optimizers are left behind: a seed's
        state is :meth:`state_dicts`' (``agents[s].state_dict()`` has a stale ``opt``)."""
        stacked = self.online | self.target
        for s, agent in enumerate(agents):
            nets = _Nets(agent)
            for name, _ in list(nets.named_parameters()):
                owner, _, attr = name.rpartition(".")
                view = nn.Parameter(stacked[name].detach()[s], requires_grad=False)
                nets.get_submodule(owner)._parameters[attr] = view
            agent.log_alpha = self.log_alpha.detach()[s]

    def _stack(self, agents: Sequence[SAC], name: str) -> Tensor:
        return torch.stack([dict(_Nets(a).named_parameters())[name].detach() for a in agents])

    def warm_up(self) -> Compiled | None:
        """Compile now, on a copy and random batches (this batch is left as it was); the
        :class:`Compiled`, or None when not compiling."""
        if self.compiled is None:
            return None
        twin = copy.deepcopy(self)
        gens = [torch.Generator(device=self.device).manual_seed(s) for s in range(self.seeds)]
        size = (self.cfg.batch_size, self.obs_dim, self.act_dim)
        rows = [random_transitions(*size, g) for g in gens]
        batch = {k: torch.stack([r[k] for r in rows]) for k in FIELDS}
        self.compiled.warm_up(lambda: twin.update(batch, gens))
        return self.compiled

    # --- one seed's functions (vmapped over the seeds) ----------------------------------

    def _loss(
        self, online: dict[str, Tensor], log_alpha: Tensor, target: dict[str, Tensor], *args: Tensor
    ) -> tuple[Tensor, tuple[Tensor, dict[str, Tensor]]]:
        """One seed's summed loss, and (that loss, the update's metrics) as aux."""
        weights = {**online, **target}
        q_loss, actor_loss, alpha_loss, metrics = functional_call(
            self._nets, weights, (log_alpha, *args)
        )
        loss = q_loss + actor_loss + alpha_loss
        return loss, (loss.detach(), metrics)

    def _act(self, actor: dict[str, Tensor], obs: Tensor, noise: Tensor | None = None) -> Tensor:
        """One seed's actions: its squashed mean (``noise`` None) or a reparameterised sample."""
        weights = {n.removeprefix("actor."): p for n, p in actor.items()}
        mean, log_std = functional_call(self.template.actor, weights, (obs,))
        if noise is None:
            return torch.tanh(mean)
        return tanh_gaussian(mean, log_std, noise)[0]

    # --- what a run calls -----------------------------------------------------------------

    def noise(self, shape: tuple[int, ...], generators: Sequence[torch.Generator]) -> Tensor:
        """[S, *shape] standard normals, seed s's from ``generators[s]`` (as its solo run
        draws them: one draw per seed, so a seed's numbers do not depend on S)."""
        if len(generators) != self.seeds:
            raise ValueError(f"{len(generators)} generators for {self.seeds} seeds: need one each")
        draws = [torch.randn(shape, generator=g, device=self.device) for g in generators]
        return torch.stack(draws)

    @torch.no_grad()
    def act(
        self, obs: Tensor, deterministic: bool, generators: Sequence[torch.Generator] | None
    ) -> Tensor:
        """obs [S, B, obs_dim] -> actions [S, B, act_dim] in [-1, 1]: each seed's squashed
        mean, or a sample with seed s's noise from ``generators[s]``."""
        with self.template.autocast():
            if deterministic:
                return vmap(self._act)(self._actor(), obs)
            if generators is None:
                raise ValueError("sampled actions need one generator per seed")
            noise = self.noise((obs.shape[1], self.act_dim), generators)
            return vmap(self._act)(self._actor(), obs, noise)

    def _actor(self) -> dict[str, Tensor]:
        return {n: p.detach() for n, p in self.online.items() if n.startswith("actor.")}

    def update(
        self, batch: dict[str, Tensor], generators: Sequence[torch.Generator]
    ) -> dict[str, Tensor]:
        """One gradient step per seed on its critics, actor and alpha; ``batch`` [S, B, ...]
        per field. Returns the metrics as [S] tensors (``nonfinite_steps`` included)."""
        obs = batch["obs"]
        # Per seed, noise[0] reparameterises the actor's loss, noise[1] the target's action.
        noise = self.noise((2, obs.shape[1], self.act_dim), generators)
        args = (obs, batch["act"], batch["rew"], batch["next_obs"], batch["terminated"], noise)
        (grads, alpha_grad), (loss, metrics) = self._grads(
            self.online, self.log_alpha, self.target, *args
        )
        finite = torch.isfinite(loss)
        self.nonfinite_steps += ~finite
        for name, param in self.online.items():
            param.grad = _where_seed(finite, grads[name])
        if self.cfg.autotune:
            self.log_alpha.grad = _where_seed(finite, alpha_grad)
        self.opt.step()
        self.update_target()
        return {**metrics, "nonfinite_steps": self.nonfinite_steps}

    @torch.no_grad()
    def update_target(self) -> None:
        """Each seed's Polyak step: target += tau * (online - target), all seeds at once."""
        if not self.target:
            return
        online = [self.online[n.replace("critic_target.", "critic.", 1)] for n in self.target]
        torch._foreach_lerp_(list(self.target.values()), online, self.cfg.tau)

    # --- state: one SAC state dict per seed ------------------------------------------------

    def state_dicts(self) -> list[dict[str, Any]]:
        """Seed s's state as :meth:`SAC.state_dict` writes it (a solo agent loads it)."""
        return [self._seed_state(s) for s in range(self.seeds)]

    def _seed_state(self, s: int) -> dict[str, Any]:
        agent = self.template
        with torch.no_grad():
            for name, param in self._nets.named_parameters():
                param.copy_((self.online | self.target)[name][s])
            agent.log_alpha.copy_(self.log_alpha[s])
        state = copy.deepcopy(agent.state_dict())  # (a state dict's tensors are the weights)
        state["opt"] = _opt_slice(self.opt.state_dict(), s)
        state["nonfinite_steps"] = self.nonfinite_steps[s].clone()
        return state

    def slot(self, s: int) -> SeedSlot:
        """Seed s's state as one agent's (``MBPO.learner`` of its run)."""
        return SeedSlot(self, s)

    def load_state_dicts(self, states: Sequence[dict[str, Any]]) -> None:
        """Load one SAC state dict per seed (their optimizers must have taken as many steps)."""
        if len(states) != self.seeds:
            raise ValueError(f"{len(states)} states for {self.seeds} seeds: need one each")
        solo = [_Nets(copy.deepcopy(self.template)) for _ in states]
        for nets, state in zip(solo, states, strict=True):
            nets.agent.load_state_dict(state)
        with torch.no_grad():
            for name, stacked in (self.online | self.target).items():
                stacked.copy_(torch.stack([dict(n.named_parameters())[name] for n in solo]))
            self.log_alpha.copy_(torch.stack([n.agent.log_alpha for n in solo]))
            self.nonfinite_steps.copy_(torch.stack([s["nonfinite_steps"] for s in states]))
        self.opt.load_state_dict(_opt_stack([s["opt"] for s in states]))


class SeedSlot:
    """One seed of a :class:`SeedBatch`, saved and loaded as an agent: its state dict is a
    solo SAC's."""

    def __init__(self, batch: SeedBatch, seed: int) -> None:
        self.batch, self.seed = batch, seed

    def state_dict(self) -> dict[str, Any]:
        return self.batch._seed_state(self.seed)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        states = self.batch.state_dicts()
        states[self.seed] = state
        self.batch.load_state_dicts(states)


class SeedUpdates(SACUpdates):
    """The G updates after an env step, for S seeds: seed s's batches from ``data[s]`` drawn
    with ``generators[s]``; eager, or on CUDA with ``graphs`` one CUDA graph for all seeds."""

    def __init__(
        self,
        agents: SeedBatch,
        data: Sequence[BatchSource],
        batch_size: int,
        generators: Sequence[torch.Generator],
        graphs: bool = False,
        tf32: bool = False,
    ) -> None:
        if not len(data) == len(generators) == agents.seeds:
            raise ValueError(
                f"{len(data)} batch sources and {len(generators)} generators for "
                f"{agents.seeds} seeds: need one of each per seed"
            )
        super().__init__(agents.template, data[0], batch_size, generators[0], graphs, tf32)
        self.seed_batch, self.sources, self.generators = agents, list(data), list(generators)

    def batch_layout(self) -> tuple[Any, ...]:
        return tuple(d.batch_layout() for d in self.sources)

    def block(self, n: int) -> dict[str, Tensor]:
        metrics: dict[str, Tensor] = {}
        for _ in range(n):
            pairs = zip(self.sources, self.generators, strict=True)
            batches = [d.batch(self.batch_size, g) for d, g in pairs]
            batch = {k: torch.stack([b[k] for b in batches]) for k in FIELDS}
            metrics = self.seed_batch.update(batch, self.generators)
        return metrics


def _online(name: str) -> bool:
    return not name.startswith("critic_target.")


def _of(params: dict[str, Tensor], prefix: str) -> list[Tensor]:
    return [p for n, p in params.items() if n.startswith(prefix)]


def _where_seed(keep: Tensor, grads: Tensor) -> Tensor:
    """``grads`` [S, ...] with the seeds not in ``keep`` [S] zeroed (NaN included)."""
    keep = keep.view(-1, *([1] * (grads.dim() - 1)))
    return torch.where(keep, grads, 0.0)


def _opt_slice(state: dict[str, Any], s: int) -> dict[str, Any]:
    """Seed s's part of the stacked optimizer's state dict: a solo agent's optimizer's."""
    per_param = {
        i: {k: (v if k == "step" else v[s]).clone() for k, v in st.items()}
        for i, st in state["state"].items()
    }
    return {"state": per_param, "param_groups": copy.deepcopy(state["param_groups"])}


def _opt_stack(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The stacked optimizer's state dict from one solo optimizer's per seed."""
    first = states[0]
    if any(s["state"].keys() != first["state"].keys() for s in states):
        raise ValueError("the seeds' optimizers are at different points: some have no Adam state")
    per_param: dict[int, dict[str, Tensor]] = {}
    for i, st in first["state"].items():
        steps = {float(s["state"][i]["step"]) for s in states}
        if len(steps) > 1:
            raise ValueError(f"the seeds' optimizers took different numbers of steps: {steps}")
        per_param[i] = {
            k: v if k == "step" else torch.stack([s["state"][i][k] for s in states])
            for k, v in st.items()
        }
    return {"state": per_param, "param_groups": copy.deepcopy(first["param_groups"])}


def _check_alike(agents: Sequence[SAC]) -> None:
    """The agents must be one kind at one size: a clear error before any work."""
    if not agents:
        raise ValueError("a seed batch needs at least one agent")
    first = agents[0]
    for i, a in enumerate(agents):
        if type(a) is not type(first) or a.cfg != first.cfg:
            raise ValueError(f"agent {i} is not configured as agent 0: seeds differ in seed only")
        if (a.obs_dim, a.act_dim, a.device) != (first.obs_dim, first.act_dim, first.device):
            raise ValueError(f"agent {i} has other sizes or another device than agent 0")
    if first.scaler.is_enabled():
        raise ValueError(
            "amp=fp16 is not supported for batched seeds (one loss scale would "
            "be shared); use amp=bf16 or amp=off"
        )
