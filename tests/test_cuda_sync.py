"""On a GPU, the hot functions never wait for the device: CUDA's sync debug mode turns any
synchronising call (``.item()``, ``.cpu()``, a data-dependent shape, a blocking copy) inside
them into an error. On a CPU the same property is checked by the ``host_reads`` spy tests."""

from __future__ import annotations

import pytest
import torch

from mbrl.agents import SAC, SACConfig
from mbrl.buffer import ReplayBuffer, transition_fields
from mbrl.envs import env_spec
from mbrl.models import DynamicsModel, ModelTrainer
from mbrl.rollout import rollout

from tests_support import tiny_model_config

OBS, ACT = 11, 3

pytestmark = pytest.mark.cuda


@pytest.mark.parametrize("amp", ["off", "bf16"])
@pytest.mark.parametrize(
    "model_name", [pytest.param("flow", marks=pytest.mark.mechanism), "gaussian"]
)
def test_update_rollout_and_fit_epoch_never_sync(amp: str, model_name: str) -> None:
    dev = torch.device("cuda")
    gen = torch.Generator(device=dev).manual_seed(0)
    real = ReplayBuffer(1000, transition_fields(OBS, ACT), dev)
    real.add(
        {
            "obs": torch.randn(500, OBS, device=dev),
            "act": torch.rand(500, ACT, device=dev) * 2 - 1,
            "rew": torch.randn(500, device=dev),
            "next_obs": torch.randn(500, OBS, device=dev),
            "terminated": torch.zeros(500, dtype=torch.bool, device=dev),
            "truncated": torch.zeros(500, dtype=torch.bool, device=dev),
        }
    )
    agent = SAC(OBS, ACT, SACConfig(hidden_sizes=[64, 64]), dev, amp)
    cfg = tiny_model_config(model_name, members=3, elites=2)
    model = DynamicsModel(OBS, ACT, cfg).to(dev)
    trainer = ModelTrainer(model, cfg, amp)
    fields = {**transition_fields(OBS, ACT), "score": ((), torch.float32)}
    pool = ReplayBuffer(4000, fields, dev)
    term = env_spec("hopper").termination_fn
    d = real.sample(400, gen)
    y = model.targets(d["obs"], d["next_obs"], d["rew"])
    model.fit_normalizers(torch.cat([d["obs"], d["act"]], -1), y)
    x, y = model.in_norm(torch.cat([d["obs"], d["act"]], -1)), model.out_norm(y)
    boot = torch.randint(0, 400, (3, 400), device=dev, generator=gen)

    def hot() -> None:
        agent.update(real.sample(64, gen), gen)
        start = real.sample(256, gen, ("obs",))["obs"]
        rollout(model, agent, term, start, 3, pool, gen)
        trainer._epoch(x, y, boot, gen)

    hot()  # first calls allocate optimizer state and warm caches
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        hot()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
