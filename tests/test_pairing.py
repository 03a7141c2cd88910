"""Seeds are paired across arms: runs that differ only in the model, with the same seed, take
the same random-phase actions and env resets, start from the same agent and evaluate on the
same episodes, whatever the model's construction consumes of the random streams."""

from __future__ import annotations

import json
import os

import pytest
import torch
from test_fidelity import composed

from mbrl.model_side import ModelSide
from mbrl.trainer import Trainer


def _arm(model: str, run_dir: str) -> Trainer:
    cfg = composed(
        "env=pendulum",
        f"model={model}",
        "seed=3",
        "device=cpu",
        "compile=false",
        "threads=1",
        "total_steps=300",
        "algorithm.init_steps=300",  # the whole run is the random phase: no update
        "eval.every=150",
        "eval.episodes=2",
        "logger.progress=false",
        "logger.tensorboard=false",
        "rollout.batch_size=64",
    )
    return Trainer(cfg, run_dir)


def _evals(run_dir: str) -> list[tuple[int, float]]:
    with open(os.path.join(run_dir, "metrics.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return [(r["step"], r["eval/return_mean"]) for r in rows if "eval/return_mean" in r]


@pytest.mark.parametrize("other", ["gaussian", "deterministic"])
def test_runs_differing_only_in_the_model_are_paired(tmp_path: str, other: str) -> None:
    runs = {m: _arm(m, os.path.join(tmp_path, m)) for m in ("flow", other)}
    flow, rival = runs["flow"], runs[other]
    # the models themselves differ (what their construction draws differs too) ...
    sides = flow.algo.model_side, rival.algo.model_side
    assert isinstance(sides[0], ModelSide) and isinstance(sides[1], ModelSide)
    models = sides[0].model, sides[1].model
    assert models[0].state_dict().keys() != models[1].state_dict().keys()
    # ... but the agents start from the same weights
    for name in ("actor", "critic", "critic_target"):
        mine, theirs = flow.algo.agent.state_dict()[name], rival.algo.agent.state_dict()[name]
        for key, value in mine.items():
            assert torch.equal(value, theirs[key]), f"{name}.{key}"
    for run in runs.values():
        run.run()
    # the same random-phase transitions reached the real buffer, in the same order
    a, b = flow.algo.buffer.rows(), rival.algo.buffer.rows()
    assert a.keys() == b.keys() and a["obs"].shape[0] > 0
    for key in a:
        assert torch.equal(a[key], b[key]), key
    # and the untrained policy scored the same on the same evaluation episodes
    evals = _evals(os.path.join(tmp_path, "flow"))
    assert [s for s, _ in evals] == [150, 300]
    assert evals == _evals(os.path.join(tmp_path, other))


def test_different_seeds_give_different_agents(tmp_path: str) -> None:
    """(The check above could pass if the agent's weights ignored the seed altogether.)"""
    first = _arm("flow", os.path.join(tmp_path, "a"))
    cfg = first.config
    cfg.seed = 4
    second = Trainer(cfg, os.path.join(tmp_path, "b"))
    w1, w2 = first.algo.agent.actor.linears[0].weight, second.algo.agent.actor.linears[0].weight
    assert not torch.equal(w1, w2)
