"""A policy whose weights a finite step made huge computes NaN from finite observations. Its
action must reach neither the env nor the buffer: the collector acts with zeros in its place
(what MuJoCo applies when a control is NaN), the run warns once, and counts those env steps
in ``collector/nonfinite_actions`` and its summary; a resume counts on."""

from __future__ import annotations

import os
import re
import signal

import numpy as np
import pytest
import torch

from mbrl.agents.networks import Actor
from mbrl.trainer import Trainer

from test_trainer import _rows, tiny_config

WARNING = "the policy gave a non-finite action (NaN or inf) at "


def _diverge(actor: Actor) -> None:
    """Weights of ±1e30 (finite): the second layer's products overflow to +inf and -inf, whose
    sum is NaN."""
    with torch.no_grad():
        for layer in actor.linears:
            layer.weight.fill_(1e30)
            layer.weight[:, ::2] *= -1.0


def _expected_nan(actor: Actor, obs: torch.Tensor) -> np.ndarray:
    """Which of ``obs``'s rows the actor maps to a non-finite action (the noise is finite and
    the std bounded, so zero noise tells the same as any). One row at a time, as the one env
    copy acted: a batch's matmul takes another path, on which the overflows differ."""
    with torch.no_grad():
        actions = [actor.squash(row[None], torch.zeros(1, actor.act_dim))[0] for row in obs]
    return (~torch.isfinite(torch.cat(actions)).all(-1)).numpy()


def test_a_diverged_policy_acts_with_zeros_and_the_buffer_stays_finite(
    tmp_path: str, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    run = os.path.join(tmp_path, "run")
    trainer = Trainer(tiny_config(), run)
    actor = trainer.algo.agent.actor
    poisoned: dict[str, torch.Tensor] = {}

    def poison() -> None:
        if trainer.env_steps == 250:  # (steps 251-400 act with it)
            _diverge(actor)
            poisoned.update({k: v.clone() for k, v in actor.state_dict().items()})

    trainer.step_hook = poison
    with caplog.at_level("WARNING", logger="mbrl.trainer"):
        trainer.run()
    # Every SAC update since had a NaN loss and was skipped: the actor is the poisoned one.
    assert all(torch.equal(v, poisoned[k]) for k, v in actor.state_dict().items())
    rows = trainer.algo.buffer.rows()
    assert all(bool(torch.isfinite(v).all()) for v in rows.values())
    bad = _expected_nan(actor, rows["obs"][250:400])
    assert 10 <= bad.sum() <= 140  # (the premise: some of its actions are NaN, some finite)
    act = rows["act"][250:400].numpy()
    assert (act[bad] == 0.0).all() and (act[~bad] != 0.0).any(axis=1).all()
    assert (rows["act"][:250] != 0.0).any(dim=1).all()  # (before it, no zero row)
    logged = {
        r["step"]: r["collector/nonfinite_actions"]
        for r in _rows(run)
        if "collector/nonfinite_actions" in r
    }
    assert logged[200] == 0 and logged[300] == bad[:50].sum() and logged[400] == bad.sum()
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith(WARNING)]
    assert warned == [
        WARNING + f"{bad[:50].sum()} env steps between steps 200 and 300: each acted with "
        "zeros instead (as MuJoCo does with a NaN control), so no NaN reaches the "
        "buffers; its weights have diverged and will not recover by themselves: lower "
        "agent.actor_lr / agent.critic_lr, or check an edited actor; the count goes on in "
        "collector/nonfinite_actions"
    ]
    summary = capsys.readouterr().err
    assert re.search(rf"\n  zeroed +{bad.sum()} env steps acted with zeros \(", summary)

    caplog.clear()  # resumed: counts on from the checkpoint's total, and warns in this process
    resumed = Trainer(tiny_config(total_steps=500, resume=run), run)
    with caplog.at_level("WARNING", logger="mbrl.trainer"):
        resumed.run()
    more = _expected_nan(resumed.algo.agent.actor, resumed.algo.buffer.rows()["obs"][400:500])
    last = [r for r in _rows(run) if "collector/nonfinite_actions" in r][-1]
    assert last["step"] == 500 and last["collector/nonfinite_actions"] == bad.sum() + more.sum()
    warned = [r.getMessage() for r in caplog.records if r.getMessage().startswith(WARNING)]
    assert len(warned) == 1 and warned[0].startswith(
        WARNING + f"{more.sum()} env steps between steps 400 and 500"
    )
    capsys.readouterr()  # stopped by Ctrl-C at 550, between log lines: the summary counts to it
    again = Trainer(tiny_config(total_steps=600, resume=run), run)
    again.step_hook = lambda: (
        os.kill(os.getpid(), signal.SIGINT) if again.env_steps == 550 else None
    )
    again.run()
    assert again.stopped == "Ctrl-C" and again.env_steps == 550
    late = _expected_nan(again.algo.agent.actor, again.algo.buffer.rows()["obs"][500:550])
    assert late.sum() > 0 and _rows(run)[-1]["step"] == 500  # (no line at 550)
    total = bad.sum() + more.sum() + late.sum()
    assert torch.load(os.path.join(run, "ckpt", "last.pt"), weights_only=False)["step"] == 550
    summary = capsys.readouterr().err
    assert re.search(rf"\n  zeroed +{total} env steps acted with zeros \(", summary), summary
