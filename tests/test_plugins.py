"""Models and agents as plug-ins: a model defined in this file (its class and its config,
registered here, no library file touched) trains an MBPO run selected by a hydra override,
as does a SAC subclass named by ``agent._target_``; the deterministic ensemble built in."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import pytest
import torch
from hydra import compose, initialize_config_dir
from torch import Tensor, nn

from mbrl.agents import SAC
from mbrl.config import Config, ConfigError, ModelConfig
from mbrl.models import DynamicsModel, ModelTrainer, register_model
from mbrl.models.base import weighted_mean
from mbrl.runtime.validate import validate
from mbrl.trainer import Trainer

from tests_support import tiny_model_config

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
TINY = [
    "env=pendulum",
    "total_steps=300",
    "eval.every=300",
    "eval.episodes=1",
    "logger.every=100",
    "logger.progress=false",
    "agent.hidden_sizes=[16,16]",
    "agent.batch_size=16",
    "algorithm.init_steps=100",
    "algorithm.updates_per_step=1",
    "mbpo.model_train_freq=100",
    "rollout.batch_size=50",
    "model.members=3",
    "model.elites=2",
    "model.max_epochs=3",
    "compile=false",
    "device=cpu",
]


@dataclass
class LinearConfig(ModelConfig):
    """A linear-Gaussian ensemble with a fixed noise scale: a model of the test's own."""

    _target_: str = f"{__name__}.LinearModel"
    name: str = "linear"
    select_by: str = "mse"
    noise: float = 0.1  # its own key: the std of the samples, in model units


class LinearModel(nn.Module):
    config = LinearConfig
    scores = ("mse",)

    def __init__(self, dim: int, context_dim: int, cfg: LinearConfig) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(cfg.members, context_dim, dim))
        self.bias = nn.Parameter(torch.zeros(cfg.members, 1, dim))
        self.noise = cfg.noise

    def forward(self, x: Tensor, members: Tensor | None = None) -> Tensor:
        w, b = (
            (self.weight, self.bias)
            if members is None
            else (self.weight[members], self.bias[members])
        )
        if x.dim() == 2:
            x = x.expand(w.shape[0], *x.shape)
        return torch.baddbmm(b, x, w)

    def loss(self, x: Tensor, y: Tensor, weight: Tensor | None) -> tuple[Tensor, Tensor]:
        mse = weighted_mean((self(x) - y).square().mean(-1), weight)
        return mse.sum(), mse

    def score(self, name: str, x: Tensor, y: Tensor, raw: object) -> Tensor:
        return (self(x) - y).square().mean(-1)

    def sample(self, x: Tensor, members: Tensor, generator: torch.Generator | None) -> Tensor:
        mean = self(x, members)
        return mean + self.noise * torch.randn(mean.shape, generator=generator)


register_model("linear_test", LinearConfig)


class ScaledCriticSAC(SAC):
    """A SAC subclass of the test's own: the critic loss halved."""

    def critic_loss(self, *args: Tensor) -> tuple[Tensor, Tensor]:  # type: ignore[override]
        loss, q = super().critic_loss(*args)
        return 0.5 * loss, q


def composed(*overrides: str) -> Config:
    with initialize_config_dir(
        config_dir=os.path.abspath(os.path.join(ROOT, "conf")), version_base=None
    ):
        return validate(compose("config", overrides=[*TINY, *overrides]))


def _metrics(run_dir: str) -> list[dict[str, float]]:
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_a_model_defined_in_a_test_file_trains_an_mbpo_run(tmp_path: str) -> None:
    cfg = composed("model=linear_test", "model.noise=0.05")
    assert isinstance(cfg.model, LinearConfig) and cfg.model.noise == 0.05
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(cfg, run)
    model = trainer.data.model
    assert isinstance(model.density, LinearModel)
    trainer.run()
    assert float(model.density.weight.abs().sum()) > 0  # the fit moved it from zero
    fits = [r for r in _metrics(run) if "model/holdout_mse" in r]
    assert fits and all(r["model/epochs"] >= 1 for r in fits)
    assert "model/holdout_nll" not in fits[0]  # a score it does not have is not logged
    rows = [r for r in _metrics(run) if "rollout/length" in r]
    assert rows and rows[-1]["rollout/length"] >= 1


def test_a_models_own_keys_are_checked(tmp_path: str) -> None:
    with pytest.raises(ConfigError, match=r"did you mean model\.noise"):
        composed("model=linear_test", "+model.nois=0.05")
    with pytest.raises(ConfigError, match=r"select_by='nll' is not allowed with model=linear"):
        composed("model=linear_test", "model.select_by=nll")
    with pytest.raises(ConfigError, match=r"unknown config key 'model\.noise'"):
        composed("+model.noise=0.05")  # the flow has no such key


def test_an_agent_subclass_is_selected_by_config(tmp_path: str) -> None:
    cfg = composed(f"agent._target_={__name__}.ScaledCriticSAC")
    trainer = Trainer(cfg, os.path.join(tmp_path, "run"))
    assert type(trainer.agent) is ScaledCriticSAC
    trainer.run()
    with pytest.raises(ConfigError, match=r"has no `config` \(an AgentConfig subclass"):
        composed("agent._target_=torch.nn.Linear")


def test_the_deterministic_ensemble_fits_and_predicts_without_noise() -> None:
    torch.manual_seed(0)
    cfg = tiny_model_config("deterministic", members=3, elites=2, max_epochs=30, batch_size=64)
    model = DynamicsModel(2, 1, cfg)
    obs, act = torch.randn(600, 2), torch.rand(600, 1) * 2 - 1
    next_obs = obs + 0.3 * torch.tanh(obs) * act
    rew = obs.sum(-1) - act.squeeze(-1)
    trainer = ModelTrainer(model, cfg)
    metrics = trainer.fit(obs, act, next_obs, rew, torch.Generator().manual_seed(0))
    assert metrics is not None and "model/holdout_nll" not in metrics
    # Holdout MSE well below the targets' variance: it learned the dynamics.
    variance = float(torch.cat([next_obs - obs, rew[:, None]], -1).var(0).mean())
    assert float(metrics["model/holdout_mse"]) < 0.2 * variance
    # No sampling noise: two generators give the same rows; each row is its elite's output.
    a = model.sample(obs[:50], act[:50], torch.Generator().manual_seed(1))
    b = model.sample(obs[:50], act[:50], torch.Generator().manual_seed(2))
    preds = model.out_norm.inverse(
        model.density(model.in_norm(torch.cat([obs[:50], act[:50]], -1)))
    )
    for out in (a, b):
        got = torch.cat([out[0] - obs[:50], out[1][:, None]], -1)
        err = (preds[model.elites] - got).abs().amax(-1)  # [elites, rows]
        assert bool((err.min(0).values < 1e-5).all())
    with pytest.raises(ConfigError, match=r"select_by='nll' is not allowed with model=det"):
        validate({"model": {"_target_": cfg._target_, "select_by": "nll"}, "device": "cpu"})


def test_the_command_line_takes_a_model_from_a_plugin_module(
    train_cmd: list[str], tmp_path: str
) -> None:
    run = os.path.join(tmp_path, "run")
    env = {
        **os.environ,
        "FLOWMBPO_PLUGINS": __name__,
        "PYTHONPATH": os.pathsep.join(
            [os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]
        ),
    }
    args = [a for a in TINY if a != "logger.progress=false"]
    cmd = [*train_cmd, *args, "model=linear_test", "model.noise=0.05", f"hydra.run.dir={run}"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MBPO + linear model (3 members, 2 elites)" in proc.stderr
    assert any("model/holdout_mse" in r for r in _metrics(run))
    typo = subprocess.run(
        [*train_cmd, "model=linear_test", "model.nois=1", f"hydra.run.dir={run}2"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert typo.returncode == 2 and "did you mean model.noise?" in typo.stderr
    assert not os.path.exists(f"{run}2")
