"""Acting device: the CPU copy of the actor, its refresh schedule, and its state."""

from __future__ import annotations

import copy
import os

import pytest
import torch

from mbrl.agents import SAC, ActingPolicy, SACConfig, resolve_act_device
from mbrl.runtime.checkpoint import load
from mbrl.runtime.speed import resolve_amp
from mbrl.trainer import Trainer

from test_sac import _batch
from test_trainer import tiny_config

OBS, ACT = 5, 2


def _agent() -> SAC:
    torch.manual_seed(0)
    return SAC(OBS, ACT, SACConfig(hidden_sizes=[32, 32]))


def test_auto_choices_on_cpu() -> None:
    cpu = torch.device("cpu")
    assert resolve_act_device("auto", cpu) == cpu
    assert resolve_act_device("train", cpu) == cpu
    assert resolve_act_device("cpu", cpu) == cpu
    assert resolve_amp("auto", cpu) == "off"
    assert resolve_amp("bf16", cpu) == "bf16"


def test_copy_is_refreshed_every_k_steps() -> None:
    agent = _agent()
    acting = ActingPolicy(agent, torch.device("cpu"), sync_every=3, separate=True)
    obs = torch.randn(4, OBS)

    def greedy_gap() -> float:
        a = acting.act(obs, deterministic=True, generator=None)
        b = agent.act(obs, deterministic=True, generator=None)
        return float((a - b).abs().max())

    assert greedy_gap() == 0.0
    agent.update(_batch(), torch.Generator().manual_seed(0))
    acting.step()
    acting.step()
    assert greedy_gap() > 0.0  # two steps after the update: still the old weights
    acting.step()
    assert greedy_gap() == 0.0  # the third step refreshed the copy


def test_stale_copy_survives_a_checkpoint() -> None:
    agent = _agent()
    acting = ActingPolicy(agent, torch.device("cpu"), sync_every=5, separate=True)
    agent.update(_batch(), torch.Generator().manual_seed(0))
    acting.step()
    state = copy.deepcopy(acting.state_dict())
    other = ActingPolicy(agent, torch.device("cpu"), sync_every=5, separate=True)
    other.load_state_dict(state)
    obs = torch.randn(4, OBS)
    torch.testing.assert_close(
        other.act(obs, deterministic=True, generator=None),
        acting.act(obs, deterministic=True, generator=None),
    )
    assert other._since_sync == 1
    assert other.copy is not None and acting.copy is not None
    for p in other.copy.parameters():
        assert not p.requires_grad


def test_sampled_actions_match_the_agent_when_fresh() -> None:
    agent = _agent()
    acting = ActingPolicy(agent, torch.device("cpu"), sync_every=1, separate=True)
    obs = torch.randn(8, OBS)
    a = acting.act(obs, deterministic=False, generator=torch.Generator().manual_seed(4))
    b = agent.act(obs, deterministic=False, generator=torch.Generator().manual_seed(4))
    torch.testing.assert_close(a, b)


@pytest.mark.cuda
@pytest.mark.parametrize("act_device", ["cpu", "train"])
def test_cuda_training_acts_where_asked(act_device: str, tmp_path: str) -> None:
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(
        tiny_config(total_steps=200, device="cuda", **{"agent.act_device": act_device}), run
    )
    expected = "cpu" if act_device == "cpu" else "cuda"
    assert trainer.algo.acting.device.type == expected
    # amp=auto: fp32 for SAC, bf16 for the model (where supported)
    assert trainer.speed.sac_amp == "off"
    assert trainer.speed.model_amp == ("bf16" if torch.cuda.is_bf16_supported() else "off")
    trainer.run()
    Trainer(
        tiny_config(total_steps=300, device="cuda", resume=run, **{"agent.act_device": act_device}),
        run,
    ).run()
    assert load(os.path.join(run, "ckpt", "last.pt"))["step"] == 300
