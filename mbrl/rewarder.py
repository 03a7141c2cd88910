"""The coupled-flow rewarder on transitions z = (s, a, ds, r): x(z) ~ log(d_model / d_real).

Trained at every model fit on real transitions (P) against the model's one-step predictions
for the same (s, a) (Q), so x measures how un-real the model's output looks; a perfect model
gives x = 0. The Donsker-Varadhan objective fixes x only up to a constant, so after each fit x
is shifted so that log mean exp(x) = 0 on real transitions (``CoupledFlows.calibrate``): then
x ~ log(d_model / d_real) itself, the penalty adds no drifting offset to the reward (in
terminating envs that would change the alive bonus) and ``threshold`` has a fixed meaning.
At rollout time every model transition is scored once and the score is stored in the model
pool; ``penalty`` subtracts ``penalty * x`` from the reward, ``filter`` stops a rollout row
whose x exceeds ``threshold``.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from flows.coupled import CoupledFlows
from mbrl import collectives
from mbrl.config import RewarderConfig
from mbrl.models.dynamics import DynamicsModel
from mbrl.optim import GuardedStep, adam

CALIBRATION_ROWS = 16384  # real rows drawn per fit to estimate log mean exp(x)


def _quantiles(x: Tensor, prefix: str) -> dict[str, Tensor]:
    q = torch.quantile(x.float(), torch.tensor([0.1, 0.5, 0.9], device=x.device))
    return {
        f"{prefix}_mean": x.mean(),
        f"{prefix}_p10": q[0],
        f"{prefix}_p50": q[1],
        f"{prefix}_p90": q[2],
    }


class Rewarder:
    def __init__(
        self, obs_dim: int, act_dim: int, cfg: RewarderConfig, device: torch.device
    ) -> None:
        self.cfg = cfg
        self.flows = CoupledFlows(
            2 * obs_dim + act_dim + 1,
            layers=cfg.flow.layers,
            transform=cfg.flow.transform,
            hidden=cfg.flow.hidden,
            bins=cfg.flow.bins,
            tail_bound=cfg.flow.tail_bound,
        ).to(device)
        self.opt = adam(self.flows.parameters(), cfg.lr)
        self._step = GuardedStep(self.opt, torch.amp.GradScaler(device.type, enabled=False))

    @staticmethod
    def features(model: DynamicsModel, obs: Tensor, act: Tensor, target: Tensor) -> Tensor:
        """z in the dynamics model's normalised units: [in_norm(s, a), out_norm(ds, r)]."""
        return torch.cat([model.in_norm(torch.cat([obs, act], -1)), model.out_norm(target)], -1)

    def score(
        self, model: DynamicsModel, obs: Tensor, act: Tensor, next_obs: Tensor, rew: Tensor
    ) -> Tensor:
        """x for a batch of transitions [B]; no grad."""
        with torch.no_grad():
            z = self.features(model, obs, act, model.targets(obs, next_obs, rew))
            return self.flows(z)

    def fit(
        self, model: DynamicsModel, real: dict[str, Tensor], gen: torch.Generator
    ) -> dict[str, Any]:
        """``cfg.steps`` DV steps; ``real``: a large batch of real transitions to draw from."""
        n = real["obs"].shape[0]
        loss = x_p = x_q = torch.zeros(())
        for _ in range(self.cfg.steps):
            idx = torch.randint(
                0, n, (self.cfg.batch_size,), generator=gen, device=real["obs"].device
            )
            obs, act = real["obs"][idx], real["act"][idx]
            target = model.targets(obs, real["next_obs"][idx], real["rew"][idx])
            with torch.no_grad():
                pred_next, pred_rew = model.sample(obs, act, gen)
            z_real = self.features(model, obs, act, target)
            z_model = self.features(model, obs, act, model.targets(obs, pred_next, pred_rew))
            loss, x_p, x_q = self.flows.dv_loss(z_real, z_model)
            self._step(loss)  # a non-finite loss (a corrupt row in the batch) is skipped
        shift = self._calibrate(model, real, gen)
        if collectives.active():  # every rank's real rows: log mean exp over all of them
            pooled = collectives.log_mean_exp(shift)
            self.flows.offset.add_(pooled - shift)
            shift = pooled
        return {
            "rewarder/loss": loss.detach(),
            "rewarder/offset": self.flows.offset.clone(),
            **_quantiles(x_p.detach() - shift, "rewarder/x_real"),
            **_quantiles(x_q.detach() - shift, "rewarder/x_model"),
        }

    def _calibrate(
        self, model: DynamicsModel, real: dict[str, Tensor], gen: torch.Generator
    ) -> Tensor:
        """Shift x so that log mean exp(x) = 0 on (at most CALIBRATION_ROWS) real rows."""
        n = real["obs"].shape[0]
        idx = torch.randint(
            0, n, (min(n, CALIBRATION_ROWS),), generator=gen, device=real["obs"].device
        )
        obs, act = real["obs"][idx], real["act"][idx]
        target = model.targets(obs, real["next_obs"][idx], real["rew"][idx])
        return self.flows.calibrate(self.features(model, obs, act, target))

    def state_dict(self) -> dict[str, Any]:
        return {"flows": self.flows.state_dict(), "opt": self.opt.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.flows.load_state_dict(state["flows"])
        self.opt.load_state_dict(state["opt"])
