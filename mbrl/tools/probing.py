"""``scripts/probe.py``'s probes: the policy's own episodes in the real env, the model's
one-step predictions on them, and the critics' Q(s, a) beside the discounted soft return that
followed (what SAC's target estimates: r + γ (Q(s', a') − α log π(a'|s')))."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from mbrl.agents import SAC
from mbrl.config import Config
from mbrl.envs import env_spec, make_env
from mbrl.models.dynamics import DynamicsModel
from mbrl.tools.eval_checkpoint import build_actor


@dataclass
class Episodes:
    """The policy's transitions, episodes one after another: obs/act/next_obs [N, .];
    rew, log_prob (of the action taken), terminated, last (an episode's last row) [N]."""

    obs: Tensor
    act: Tensor
    rew: Tensor
    next_obs: Tensor
    log_prob: Tensor
    terminated: Tensor
    last: Tensor

    @property
    def returns(self) -> list[float]:
        ends = torch.nonzero(self.last).flatten().tolist()  # sync-ok: CPU tensors, offline
        starts = [0] + [e + 1 for e in ends[:-1]]
        return [float(self.rew[s : e + 1].sum()) for s, e in zip(starts, ends, strict=True)]


def policy_episodes(cfg: Config, agent: SAC, episodes: int, seed: int) -> Episodes:
    """``episodes`` episodes, episode i from env seed ``seed + i``, actions drawn from the
    policy by a generator seeded with ``seed``."""
    env = make_env(cfg.env.name, cfg.env.max_episode_steps, version=cfg.env.version)
    gen = torch.Generator().manual_seed(seed)
    keys = ("obs", "act", "rew", "nobs", "lp", "term", "last")
    rows: dict[str, list[Any]] = {k: [] for k in keys}
    try:
        for i in range(episodes):
            obs, _ = env.reset(seed=seed + i)
            done = False
            while not done:
                o = torch.as_tensor(obs, dtype=torch.float32)[None]
                noise = torch.randn(1, agent.act_dim, generator=gen)
                with torch.no_grad():
                    act, log_prob = agent.actor.squash(o, noise)
                obs, rew, term, trunc, _ = env.step(act[0].numpy())
                done = bool(term or trunc)
                row = (o[0], act[0], rew, obs, float(log_prob[0]), term, done)
                for k, v in zip(keys, row, strict=True):
                    rows[k].append(v)
    finally:
        env.close()
    as_t = lambda x: torch.as_tensor(np.array(x), dtype=torch.float32)  # noqa: E731
    return Episodes(
        torch.stack(rows["obs"]),
        torch.stack(rows["act"]),
        as_t(rows["rew"]),
        as_t(rows["nobs"]),
        as_t(rows["lp"]),
        as_t(rows["term"]).bool(),
        as_t(rows["last"]).bool(),
    )


def soft_returns(ep: Episodes, alpha: float, gamma: float) -> Tensor:
    """G_t = r_t + γ (−α log π(a_{t+1}|s_{t+1}) + G_{t+1}), cut at a termination; at a
    truncation (the time limit) nothing follows, so the rows near it are underestimated."""
    out = torch.zeros_like(ep.rew)
    after = 0.0
    for t in range(len(ep.rew) - 1, -1, -1):
        if ep.last[t]:
            after = 0.0
        out[t] = ep.rew[t] + gamma * after
        after = float(out[t] - alpha * ep.log_prob[t])  # what step t is worth to step t - 1
    return out


def first_halves(ep: Episodes) -> Tensor:
    """Rows in the first half of their episode (far from a truncation's missing tail)."""
    mask = torch.zeros_like(ep.last)
    start = 0
    for end in torch.nonzero(ep.last).flatten().tolist():  # sync-ok: CPU tensors, offline
        mask[start : start + (end - start + 1 + 1) // 2] = True
        start = end + 1
    return mask


def model_report(model: DynamicsModel, cfg: Config, ep: Episodes, draws: int) -> dict[str, float]:
    """The model's one-step predictions on the episodes' (s, a), ``draws`` samples per row."""
    term_fn = env_spec(cfg.env.name).termination_fn
    nobs, rew, term = [], [], []
    for k in range(draws):
        n, r = model.sample(ep.obs, ep.act, torch.Generator().manual_seed(k))
        nobs.append(n)
        rew.append(r)
        term.append(term_fn(ep.obs, ep.act, n).float())
    n, r, d = torch.stack(nobs), torch.stack(rew), torch.stack(term)
    went_on = ~ep.terminated
    return {
        "rew_env": float(ep.rew.mean()),
        "rew_model": float(r.mean()),
        "rew_bias": float((r.mean(0) - ep.rew).mean()),
        "rew_abs_err": float((r.mean(0) - ep.rew).abs().mean()),
        "rew_spread": float(r.std(0).mean()),
        "obs_abs_err": float((n.mean(0) - ep.next_obs).abs().mean()),
        "obs_spread": float(n.std(0).mean()),
        "obs_change": float((ep.next_obs - ep.obs).abs().mean()),
        "term_env": int(ep.terminated.sum()),
        "term_model": float(d.mean()),
        "term_model_where_env_went_on": float(d[:, went_on].mean()) if went_on.any() else 0.0,
        "term_model_where_env_ended": float(d[:, ep.terminated].mean())
        if ep.terminated.any()
        else float("nan"),
    }


def critic_report(agent: SAC, ep: Episodes, gamma: float) -> dict[str, float]:
    alpha = float(agent.log_alpha.detach().exp())
    with torch.no_grad():
        q = agent.reduce_q(agent.critic(ep.obs, ep.act))
    g = soft_returns(ep, alpha, gamma)
    rows = first_halves(ep)
    return {"alpha": alpha, "q": float(q[rows].mean()), "soft_return": float(g[rows].mean())}


def probe(cfg: Config, state: dict[str, Any], episodes: int, seed: int, draws: int) -> str:
    agent = build_actor(cfg, state, torch.device("cpu"))  # (as evaluate.py loads it)
    agent.critic.load_state_dict(state["agent"]["critic"])  # and its critics and temperature
    agent.log_alpha.data.copy_(torch.as_tensor(state["agent"]["log_alpha"]))
    ep = policy_episodes(cfg, agent, episodes, seed)
    rets = ep.returns
    lines = [
        f"{episodes} episodes with actions drawn from the policy (env seeds {seed}.."
        f"{seed + episodes - 1}): return {np.mean(rets):.1f} ± {np.std(rets):.1f}, mean length "
        f"{len(ep.rew) / episodes:.0f}"
    ]
    fits = int((state["algorithm"].get("model_trainer") or {}).get("fits", 1))
    if state["algorithm"].get("model") is not None and cfg.algorithm.name == "mbpo" and not fits:
        lines.append("model: not fitted yet at this step (its first fit ends the random steps)")
    elif state["algorithm"].get("model") is not None and cfg.algorithm.name == "mbpo":
        model = DynamicsModel(agent.obs_dim, agent.act_dim, cfg.model)
        model.load_state_dict(state["algorithm"]["model"])
        m = model_report(model, cfg, ep, draws)
        ended = m["term_model_where_env_ended"]
        lines += [
            f"model, one step on the policy's transitions ({draws} draws per row):",
            f"  reward       env {m['rew_env']:.3f}, model {m['rew_model']:.3f} (bias "
            f"{m['rew_bias']:+.4f}, mean |error| {m['rew_abs_err']:.4f}; spread over draws "
            f"{m['rew_spread']:.4f})",
            f"  next state   mean |error| {m['obs_abs_err']:.4f} per dimension; spread over draws "
            f"{m['obs_spread']:.4f}; the env's own mean |s' - s| {m['obs_change']:.4f}",
            f"  termination  the env ended {m['term_env']} of {len(ep.rew)} rows; the model's "
            f"next states end {100 * m['term_model']:.2f} % of draws ("
            f"{100 * m['term_model_where_env_went_on']:.2f} % where the env went on"
            + ("" if np.isnan(ended) else f", {100 * ended:.0f} % where it ended")
            + ")",
        ]
    if not int(state.get("updates", 1)):
        return "\n".join([*lines, "critics: not trained yet at this step (no SAC update yet)"])
    c = critic_report(agent, ep, agent.gamma)
    lines += [
        f"critics (alpha {c['alpha']:.3f}, gamma {agent.gamma}), rows in each episode's first "
        "half:",
        f"  Q(s, a) {c['q']:.1f} against the discounted soft return that followed "
        f"{c['soft_return']:.1f}: {_misjudged(c['q'], c['soft_return'])}",
    ]
    return "\n".join(lines)


def _misjudged(q: float, ret: float) -> str:
    """How far the critics' value is off the return, with its sign said in words (a ratio of
    two negative numbers, as on Pendulum, hides which way)."""
    way = "over-estimate" if q > ret else "under-estimate"
    share = f" ({abs(q - ret) / abs(ret):.0%} of the return's size)" if ret else ""
    return f"the critics {way} it by {abs(q - ret):.1f}{share}"
