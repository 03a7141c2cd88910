"""Models and agents as plug-ins: a model and two agents defined in this file (each its class
and its config, registered here, no library file touched) train runs selected by a hydra
override (``model=<name>``, ``agent=<name>``), the agents compiled: a CrossQ-style agent
(batch-norm critics, one joint forward of (s, a) and (s', a'), no target network) and a
distributional one (quantile critics). A SAC subclass named by ``agent._target_`` runs too;
the deterministic ensemble built in."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

import pytest
import torch
from hydra import compose, initialize_config_dir
from test_cli import run_started
from torch import Tensor, nn

from flows.nn import EnsembleLinear, EnsembleMLP
from mbrl.agents import SAC, SACConfig, SACUpdates, register_agent
from mbrl.bench.update_bench import RealRows
from mbrl.buffer import random_transitions
from mbrl.config import Config, ConfigError, ModelConfig
from mbrl.launch import resolve
from mbrl.model_side import ModelSide
from mbrl.models import DynamicsModel, ModelTrainer, register_model, weighted_mean
from mbrl.runtime.checkpoint import load
from mbrl.runtime.validate import to_yaml, validate
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
    shared = ()  # (every parameter has a member dimension)

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


# --- a CrossQ-style agent: batch-norm critics, no target network ----------------------------


@dataclass
class CrossQConfig(SACConfig):
    """CrossQ (Bhatt, Palenicek et al., ICLR 2024): SAC with batch-norm critics and no
    target network."""

    _target_: str = f"{__name__}.CrossQ"
    # Its own key: the critics' batch-norm momentum (CrossQ's flax momentum 0.99 is torch's
    # 0.01: the weight of each new batch in the running statistics)
    bn_momentum: float = 0.01

    def check(self) -> str | None:
        if not 0 < self.bn_momentum <= 1:
            return f"agent.bn_momentum={self.bn_momentum!r} is not allowed; it must be in (0, 1]"
        return super().check()


class MemberNorm(nn.Module):
    """Batch norm of each member's features on its own: [E, B, F] -> [E, B, F]."""

    def __init__(self, members: int, features: int, momentum: float) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(members * features, momentum=momentum)

    def forward(self, h: Tensor) -> Tensor:
        members, rows, features = h.shape
        flat = h.transpose(0, 1).reshape(rows, members * features)
        return self.norm(flat).reshape(rows, members, features).transpose(0, 1)


class BatchNormTwinQ(nn.Module):
    """Twin critics with batch norm on their input and after each hidden layer (CrossQ's
    critic): (obs [B, o], act [B, a]) -> q [2, B]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: list[int], momentum: float) -> None:
        super().__init__()
        widths = [obs_dim + act_dim, *hidden]
        self.norms = nn.ModuleList(MemberNorm(2, w, momentum) for w in widths)
        self.layers = nn.ModuleList(
            EnsembleLinear(2, a, b) for a, b in zip(widths[:-1], hidden, strict=True)
        )
        self.head = EnsembleLinear(2, widths[-1], 1)

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        h = self.norms[0](torch.cat([obs, act], dim=-1).expand(2, -1, -1))
        for layer, norm in zip(self.layers, self.norms[1:], strict=True):
            h = norm(torch.relu(layer(h)))
        return self.head(h).squeeze(-1)


class CrossQ(SAC):
    config = CrossQConfig

    # (an agent is built with its own config: the narrower cfg is what build_critic gets)
    def build_critic(  # type: ignore[override]
        self, obs_dim: int, act_dim: int, cfg: CrossQConfig
    ) -> nn.Module:
        return BatchNormTwinQ(obs_dim, act_dim, cfg.hidden_sizes, cfg.bn_momentum)

    def build_target(self, obs_dim: int, act_dim: int, cfg: SACConfig) -> None:
        return None  # the critic bootstraps from itself

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
        """SAC's TD loss, Q(s, a) and Q(s', a') from one forward of both batches: batch norm
        normalises them with the statistics of their mixture (CrossQ's point)."""
        with torch.no_grad():
            next_act, next_logp = self.actor.squash(next_obs, noise)
        q_both = self.critic(torch.cat([obs, next_obs]), torch.cat([act, next_act]))
        q, q_next = q_both.chunk(2, dim=1)  # [2, B] each
        soft_next = self.reduce_q(q_next.detach()) - alpha * next_logp
        target = rew + self.gamma * (~term).float() * soft_next
        return 0.5 * (q - target).square().mean(dim=1).sum(), q

    def metrics(
        self, losses: tuple[Tensor, ...], alpha: Tensor, q: Tensor, log_prob: Tensor
    ) -> dict[str, Tensor]:
        """SAC's, and the running variance the critic's input norm has reached (1 at first)."""
        critic = self.critic
        assert isinstance(critic, BatchNormTwinQ)
        first = critic.norms[0]
        assert isinstance(first, MemberNorm) and first.norm.running_var is not None
        running_var = first.norm.running_var
        return {**super().metrics(losses, alpha, q, log_prob), "bn_var": running_var.mean()}


register_agent("crossq_test", CrossQConfig)


# --- a distributional agent: quantile critics, its own critic and critic loss alone -------


@dataclass
class QuantileConfig(SACConfig):
    """Twin critics of quantiles, fit by quantile regression (QR-DQN: Dabney et al. 2018)."""

    _target_: str = f"{__name__}.QuantileSAC"
    quantiles: int = 8  # its own key: quantiles per critic


class QuantileTwinQ(nn.Module):
    """Twin critics of K quantiles each: ``quantiles(obs, act)`` -> [2, B, K]; called, their
    mean q [2, B] (the value the actor's loss maximises)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: list[int], k: int) -> None:
        super().__init__()
        self.net = EnsembleMLP(2, obs_dim + act_dim, hidden, k, act=nn.ReLU)

    def quantiles(self, obs: Tensor, act: Tensor) -> Tensor:
        return self.net(torch.cat([obs, act], dim=-1).expand(2, -1, -1))

    def forward(self, obs: Tensor, act: Tensor) -> Tensor:
        return self.quantiles(obs, act).mean(-1)


class QuantileSAC(SAC):
    config = QuantileConfig
    critic: QuantileTwinQ  # (build_critic's; the target is built by it too)
    critic_target: QuantileTwinQ

    # (an agent is built with its own config: the narrower cfg is what build_critic gets)
    def build_critic(  # type: ignore[override]
        self, obs_dim: int, act_dim: int, cfg: QuantileConfig
    ) -> nn.Module:
        return QuantileTwinQ(obs_dim, act_dim, cfg.hidden_sizes, cfg.quantiles)

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
        """Each critic's quantile Huber loss (QR-DQN, kappa = 1) towards the soft target
        r + gamma (1 - d) (min over the twins of each target quantile - alpha log pi')."""
        with torch.no_grad():
            next_act, next_logp = self.actor.squash(next_obs, noise)
            z_next = self.critic_target.quantiles(next_obs, next_act).min(dim=0).values
            keep = self.gamma * (~term).float()[:, None]
            target = rew[:, None] + keep * (z_next - alpha * next_logp[:, None])  # [B, K]
        z = self.critic.quantiles(obs, act)  # [2, B, K]
        k = z.shape[-1]
        tau = (torch.arange(k, device=z.device) + 0.5) / k  # each quantile's level
        u = target[None, :, None, :] - z[..., None]  # [2, B, K (predicted), K (target)]
        huber = torch.where(u.abs() <= 1.0, 0.5 * u.square(), u.abs() - 0.5)
        weight = (tau[:, None] - (u < 0).float()).abs()
        return (weight * huber).mean(dim=(1, 3)).sum(), z.mean(-1)


register_agent("quantile_test", QuantileConfig)


class ScaledCriticSAC(SAC):
    """A SAC subclass of the test's own: the critic loss halved."""

    def critic_loss(self, *args: Tensor) -> tuple[Tensor, Tensor]:
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
    side = trainer.algo.model_side
    assert isinstance(side, ModelSide)
    model = side.model
    assert isinstance(model.ensemble, LinearModel)
    trainer.run()
    assert float(model.ensemble.weight.detach().abs().sum()) > 0  # the fit moved it from zero
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
    assert type(trainer.algo.agent) is ScaledCriticSAC
    trainer.run()
    with pytest.raises(ConfigError, match=r"has no `config` \(an AgentConfig subclass"):
        composed("agent._target_=torch.nn.Linear")


def test_an_agents_own_keys_are_checked() -> None:
    cfg = composed("agent=crossq_test", "agent.bn_momentum=0.05")
    assert isinstance(cfg.agent, CrossQConfig) and cfg.agent.bn_momentum == 0.05
    assert cfg.agent.hidden_sizes == [16, 16]  # SAC's keys too, as the command line set them
    with pytest.raises(ConfigError, match=r"did you mean agent\.bn_momentum"):
        composed("agent=crossq_test", "+agent.bn_momentm=0.05")
    with pytest.raises(ConfigError, match=r"agent\.bn_momentum=0\.0 is not allowed; it must be"):
        composed("agent=crossq_test", "agent.bn_momentum=0")
    with pytest.raises(ConfigError, match=r"agent\.gamma=1\.5 is not allowed"):
        composed("agent=crossq_test", "agent.gamma=1.5")  # SAC's own check still runs
    with pytest.raises(ConfigError, match=r"unknown config key 'agent\.bn_momentum'"):
        composed("+agent.bn_momentum=0.05")  # SAC has no such key


def test_the_actor_loss_leaves_the_critics_batch_norm_statistics_alone() -> None:
    """The critics' pass in the actor's loss (``SAC.frozen_q``) runs them in inference mode
    with constant weights: batch norm normalises with its running statistics and leaves them
    (and its batch count) as they are; the critic loss's joint forward updates them."""
    torch.manual_seed(0)
    agent = CrossQ(3, 1, CrossQConfig(hidden_sizes=[16, 16], batch_size=32))
    assert agent.critic_target is None and "critic_target" not in agent.state_dict()
    batch = random_transitions(32, 3, 1, torch.Generator().manual_seed(0))
    agent.update(batch, torch.Generator().manual_seed(1))  # (running statistics away from 0, 1)

    def stats() -> dict[str, Tensor]:
        return {k: v.clone() for k, v in agent.critic.named_buffers()}

    before, obs = stats(), batch["obs"]
    action, _ = agent.actor.sample(obs, torch.Generator().manual_seed(2))
    with torch.no_grad():
        agent.critic.eval()
        expected = agent.critic(obs, action)  # inference mode: the running statistics
        agent.critic.train()
    agent.opt.zero_grad(set_to_none=True)
    q = agent.frozen_q(obs, action)
    torch.testing.assert_close(q, expected)
    q.sum().backward()
    assert agent.critic.training  # (the mode it was in, restored)
    assert all(p.grad is None for p in agent.critic.parameters())  # its weights as constants
    assert all(p.grad is not None for p in agent.actor.parameters())  # through the action
    assert all(torch.equal(v, stats()[k]) for k, v in before.items())
    agent.update(batch, torch.Generator().manual_seed(3))
    assert not all(torch.equal(v, stats()[k]) for k, v in before.items())


def test_a_resumed_run_keeps_its_agent_and_its_keys(tmp_path: str) -> None:
    """``resume=`` continues with the saved agent and its own keys; a command line that
    picks another agent is refused, one that sets a key of the saved agent applies."""
    run = os.path.join(tmp_path, "run")
    os.makedirs(os.path.join(run, "ckpt"))
    with open(os.path.join(run, "config.yaml"), "w", encoding="utf-8") as f:
        f.write(to_yaml(composed("agent=crossq_test", "agent.bn_momentum=0.05")))
    with open(os.path.join(run, "ckpt", "last.pt"), "wb") as fb:
        fb.write(b"(read later, when the checkpoint is loaded)")

    def resumed(*overrides: str) -> Config:
        conf = os.path.abspath(os.path.join(ROOT, "conf"))
        with initialize_config_dir(config_dir=conf, version_base=None):
            raw = compose("config", overrides=[f"resume={run}", *overrides])
        return resolve(raw, [f"resume={run}", *overrides])

    cfg = resumed("agent.gamma=0.9")
    assert isinstance(cfg.agent, CrossQConfig) and cfg.agent.bn_momentum == 0.05
    assert cfg.agent.gamma == 0.9 and cfg.agent.hidden_sizes == [16, 16]
    with pytest.raises(ConfigError, match=r"cannot continue as agent=mbrl\.agents\.sac\.SAC"):
        resumed("agent=sac")


def _plugin_env(**extra: str) -> dict[str, str]:
    """The environment of a command line that imports this file (FLOWMBPO_PLUGINS)."""
    path = os.pathsep.join([os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "FLOWMBPO_PLUGINS": __name__, "PYTHONPATH": path, **extra}


def _train_compiled(train_cmd: list[str], run: str, *overrides: str) -> list[dict[str, Any]]:
    """A short model-free Pendulum run of an agent of this file, compiled: FLOWMBPO_STRICT=1
    makes a compile fallback an error, and metrics.jsonl must say the update ran compiled.
    Returns its metric lines."""
    args = [a for a in TINY if a not in ("logger.progress=false", "compile=false")]
    cmd = [*train_cmd, *args, "algorithm=sac", "eval.every=150", "compile=true", *overrides]
    env = _plugin_env(FLOWMBPO_STRICT="1")
    proc = run_started([*cmd, f"hydra.run.dir={run}"], env=env, timeout=900)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = _metrics(run)
    assert {r["speed/sac_update"] for r in rows if "speed/sac_update" in r} == {"compiled"}
    learner = [r for r in rows if "learner/q_loss" in r]
    losses = ("learner/q_loss", "learner/actor_loss", "learner/alpha_loss")
    assert learner and all(math.isfinite(r[k]) for r in learner for k in losses)
    return rows


def _snapshots(run: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The agent's state at the two evaluations (150 and 300 env steps)."""
    first, last = (load(os.path.join(run, "ckpt", f"iteration_{n}.pt")) for n in (150, 300))
    return first["agent"], last["agent"]


def _moved(first: dict[str, Tensor], last: dict[str, Tensor]) -> bool:
    return any(not torch.equal(first[k], last[k]) for k in last if last[k].is_floating_point())


def test_a_crossq_agent_defined_here_trains_compiled(train_cmd: list[str], tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    rows = _train_compiled(train_cmd, run, "agent=crossq_test", "agent.bn_momentum=0.05")
    bn_var = [r["learner/bn_var"] for r in rows if "learner/bn_var" in r]  # its own metric
    assert bn_var and all(math.isfinite(v) and v != 1.0 for v in bn_var)  # (1: initial value)
    first, last = _snapshots(run)
    assert "critic_target" not in last  # no target network, in the checkpoint either
    assert _moved(first["actor"], last["actor"]) and _moved(first["critic"], last["critic"])
    key = "norms.0.norm.running_mean"  # the statistics of the joint batches moved on
    assert not torch.equal(first["critic"][key], last["critic"][key])


def test_a_distributional_agent_defined_here_trains_compiled(
    train_cmd: list[str], tmp_path: str
) -> None:
    run = os.path.join(tmp_path, "run")
    _train_compiled(train_cmd, run, "agent=quantile_test", "agent.quantiles=5")
    first, last = _snapshots(run)
    assert last["critic"]["net.layers.2.weight"].shape[-1] == 5  # its 5 quantiles per critic
    assert _moved(first["critic"], last["critic"]) and _moved(first["actor"], last["actor"])
    # SAC's target network, Polyak-averaged as SAC's: it moved, and is not the critic
    assert _moved(first["critic_target"], last["critic_target"])
    assert _moved(last["critic"], last["critic_target"])


@pytest.mark.cuda
@pytest.mark.parametrize(("cls", "config"), [(CrossQ, CrossQConfig), (QuantileSAC, QuantileConfig)])
def test_the_agents_defined_here_run_as_cuda_graphs(
    cls: type[SAC], config: type[SACConfig]
) -> None:
    """On a GPU each agent's block of updates is compiled and replayed as one CUDA graph
    (strict mode, set for cuda tests: a fallback fails the test), and computes what its eager
    updates compute: the same weights and batch-norm statistics, to within the compiled
    kernels' rounding. Skipped without CUDA."""
    dev, obs_dim, act_dim = torch.device("cuda"), 11, 3

    def blocks(compile: bool) -> tuple[SAC, SACUpdates]:
        torch.manual_seed(0)
        cfg = config(hidden_sizes=[64, 64], batch_size=64)
        agent = cls(obs_dim, act_dim, cfg, dev, "off", compile)
        agent.warm_up()
        gen = torch.Generator(device=dev).manual_seed(1)
        rows = RealRows(dev, 2000, obs_dim, act_dim)
        updates = SACUpdates(agent, rows, 64, gen, graphs=compile)
        for _ in range(8):  # 3 uncaptured blocks, a capture, replays
            updates(5)
        return agent, updates

    eager, _ = blocks(compile=False)
    graphed, updates = blocks(compile=True)
    assert updates.ran == "compiled, graphed" and updates.replays == 8 - 3
    for net in ("actor", "critic"):
        mine, theirs = getattr(graphed, net).state_dict(), getattr(eager, net).state_dict()
        for key, value in theirs.items():
            torch.testing.assert_close(mine[key], value, rtol=1e-2, atol=1e-3)


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
        model.ensemble(model.in_norm(torch.cat([obs[:50], act[:50]], -1)))
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
    env = _plugin_env()
    args = [a for a in TINY if a != "logger.progress=false"]
    cmd = [*train_cmd, *args, "model=linear_test", "model.noise=0.05", f"hydra.run.dir={run}"]
    proc = run_started(cmd, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "MBPO + linear model (3 members, 2 elites)" in proc.stderr
    assert any("model/holdout_mse" in r for r in _metrics(run))
    typo = run_started(
        [*train_cmd, "model=linear_test", "model.nois=1", f"hydra.run.dir={run}2"],
        env=env, timeout=600,
    )  # fmt: skip
    assert typo.returncode == 2 and "did you mean model.noise?" in typo.stderr
    assert not os.path.exists(f"{run}2")


def test_a_typo_in_a_plugin_agents_own_key_names_it(train_cmd: list[str], tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    typo = run_started(
        [*train_cmd, "agent=crossq_test", "agent.bn_momentm=0.1", f"hydra.run.dir={run}"],
        env=_plugin_env(), timeout=600,
    )  # fmt: skip
    assert typo.returncode == 2, typo.stderr[-2000:]
    lines = typo.stderr.strip().splitlines()
    assert len(lines) == 1 and "did you mean agent.bn_momentum?" in lines[0]
    assert not os.path.exists(run)
