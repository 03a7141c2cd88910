"""Run logging: metrics.jsonl, one TensorBoard stream, a text log per component, and wandb
(optional).

Metric values may be device tensors: they are converted together, with one host sync per
:meth:`Logger.log` call (once per log interval, never inside an update loop). Each file (and
its folder) is made with its first line: a run stopped before it logs anything leaves no
empty files behind.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from typing import IO, Any, cast

import torch

from mbrl.config import LoggerConfig

COMPONENTS = ("collector", "evaluator", "learner", "buffer", "model")
# Metric-key prefix -> the component whose text log gets the line ("eval/..." -> log/evaluator/;
# a prefix not named here: the component of its name, if any)
TEXT_LOG_OF = {"eval": "evaluator", "rollout": "model", "rewarder": "model"}


def to_numbers(metrics: dict[str, Any]) -> dict[str, float | int]:
    """Tensors -> floats (one device->host transfer for all of them); ints stay ints."""
    keys = [k for k, v in metrics.items() if isinstance(v, torch.Tensor)]
    out: dict[str, float | int] = {
        k: v if isinstance(v, int) else float(v)
        for k, v in metrics.items()
        if not isinstance(v, torch.Tensor)
    }
    if keys:
        stacked = torch.stack([metrics[k].detach().float().reshape(()) for k in keys])
        out.update(zip(keys, stacked.tolist(), strict=True))  # the one sync of this log call
    return {k: out[k] for k in metrics}


class Logger:
    """Writes every metric to ``metrics.jsonl`` and TensorBoard, and a line per component."""

    def __init__(self, run_dir: str, tensorboard: bool, wandb: WandbSink | None = None) -> None:
        self.run_dir = run_dir
        self.jsonl_path = os.path.join(run_dir, "metrics.jsonl")
        self._text = {c: os.path.join(run_dir, "log", c, f"{c}.log") for c in COMPONENTS}
        self._tb: Any = None
        self.wandb = wandb
        self._tensorboard = tensorboard
        self._jsonl: IO[str] | None = None  # opened with the first line
        self.dropped = (0, 0)  # a resume's: lines logged after the checkpoint, the last's step

    def _writer(self, purge_step: int | None = None) -> Any:
        if self._tb is None and self._tensorboard:
            from torch.utils.tensorboard import SummaryWriter  # (imported once it is needed)

            self._tb = SummaryWriter(os.path.join(self.run_dir, "log", "tb"), purge_step=purge_step)
        return self._tb

    def log(self, step: int, metrics: dict[str, Any]) -> dict[str, float | int]:
        """Record ``{"component/name": value}`` at ``step`` (env steps). Returns the numbers.
        A text value (``speed/sac_update``: what ran) goes to ``metrics.jsonl`` alone."""
        texts = {k: v for k, v in metrics.items() if isinstance(v, str)}
        values = to_numbers({k: v for k, v in metrics.items() if k not in texts})
        row: dict[str, float | int | str | None] = {"step": step, "time": round(time.time(), 3)}
        row.update({k: (v if math.isfinite(v) else None) for k, v in values.items()})
        row.update(texts)
        if self._jsonl is None:
            self._jsonl = open(self.jsonl_path, "a", encoding="utf-8")  # noqa: SIM115 (kept open)
        self._jsonl.write(json.dumps(row) + "\n")
        self._jsonl.flush()
        writer = self._writer()
        if writer is not None:
            for key, value in values.items():
                writer.add_scalar(key, value, step)
        self._write_text(step, values)
        if self.wandb is not None:
            self.wandb.log(step, values)
        return values

    def _write_text(self, step: int, values: dict[str, float | int]) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        by_comp: dict[str, list[str]] = {}
        for key, value in values.items():
            prefix, _, name = key.partition("/")
            comp = TEXT_LOG_OF.get(prefix, prefix)
            if comp in self._text:
                by_comp.setdefault(comp, []).append(f"{name} {value:.6g}")
        for comp, parts in by_comp.items():
            os.makedirs(os.path.dirname(self._text[comp]), exist_ok=True)
            with open(self._text[comp], "a", encoding="utf-8") as f:
                f.write(f"[{stamp}] step {step} | " + " | ".join(parts) + "\n")

    def state_dict(self) -> dict[str, Any]:
        """File positions, so a resumed run drops whatever was logged after its checkpoint."""
        if self._jsonl is not None:
            self._jsonl.flush()
        sizes = {comp: _size(path) for comp, path in self._text.items()}
        return {"jsonl": _size(self.jsonl_path), "text": sizes}

    def load_state_dict(self, state: dict[str, Any], step: int) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
            self._jsonl = None
        self.dropped = _dropped_lines(self.jsonl_path, state["jsonl"])
        _truncate(self.jsonl_path, state["jsonl"])
        for comp, size in state["text"].items():
            if comp in self._text:
                _truncate(self._text[comp], size)
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        # TensorBoard hides events at or after purge_step that an earlier writer left behind.
        self._writer(purge_step=step + 1)

    def close(self) -> None:
        if self._jsonl is not None:
            self._jsonl.close()
        if self._tb is not None:
            self._tb.close()
        if self.wandb is not None:
            self.wandb.close()


EARLIER = ("config.yaml", "metrics.jsonl", "log")  # what a run writes besides checkpoints


def set_aside_logs(run_dir: str) -> str:
    """Before a new run writes into ``run_dir``: the files of a run there that saved no
    checkpoint (stopped before its first: a full disk, a crash) go to ``earlier_run_<k>/``,
    so that they are kept and not mixed with the new run's. Returns what it said, or ""."""
    if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):  # (written with any log)
        return ""  # (log/ alone may be this run's own: a profiling window's log/profile/)
    k = 1
    while os.path.exists(os.path.join(run_dir, f"earlier_run_{k}")):
        k += 1
    target = os.path.join(run_dir, f"earlier_run_{k}")
    os.makedirs(target)
    for name in EARLIER:
        if os.path.exists(os.path.join(run_dir, name)):
            os.replace(os.path.join(run_dir, name), os.path.join(target, name))
    return (
        f"note: {run_dir} held the logs of a run that saved no checkpoint: moved to {target} "
        "(this run starts its own)"
    )


def _size(path: str) -> int:
    return os.path.getsize(path) if os.path.exists(path) else 0


def _dropped_lines(path: str, size: int) -> tuple[int, int]:
    """The metric lines past ``size`` in ``metrics.jsonl`` (logged after the checkpoint,
    by a run killed or quit before its next one) and the last one's step."""
    if not os.path.exists(path) or os.path.getsize(path) <= size:
        return 0, 0
    with open(path, "rb") as f:
        f.seek(size)
        lines = [line for line in f.read().splitlines() if line.strip()]
    for line in reversed(lines):
        try:
            return len(lines), int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):  # (a line cut short by the kill)
            continue
    return len(lines), 0


def _truncate(path: str, size: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) > size:
        with open(path, "r+b") as f:
            f.truncate(size)


class SilentLogger:
    """The logger of ranks other than 0: they log nothing (rank 0 logs for the run)."""

    dropped = (0, 0)

    def log(self, step: int, metrics: dict[str, Any]) -> dict[str, float | int]:
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any], step: int) -> None:
        pass

    def close(self) -> None:
        pass


_log = logging.getLogger(__name__)


class WandbSink:
    """The optional wandb backend. A failing wandb never stops training: the first error is
    reported once as a warning and wandb is switched off for the rest of the run."""

    def __init__(self, run_dir: str, lc: LoggerConfig, config: dict[str, Any]) -> None:
        """A wandb run with the ``logger.wandb_*`` settings ``lc`` (mode None: WANDB_MODE or
        online; the trainer makes one where ``logger.wandb``)."""
        self.run: Any = None
        try:
            import wandb

            id_file = os.path.join(run_dir, "wandb_run_id.txt")
            run_id = None
            if os.path.exists(id_file):
                with open(id_file, encoding="utf-8") as f:
                    run_id = f.read().strip()
            self.run = wandb.init(
                project=lc.wandb_project,
                entity=lc.wandb_entity,
                group=lc.wandb_group,
                tags=list(lc.wandb_tags or []),
                name=lc.wandb_name,
                mode=cast(Any, lc.wandb_mode),  # (wandb checks it: a bad one disables wandb)
                dir=run_dir,
                config=config,
                id=run_id,
                resume="allow" if run_id else None,
                # A run of its own even beside others in the process (batch_seeds: one per seed)
                reinit="create_new",
            )
            with open(id_file, "w", encoding="utf-8") as f:  # a resumed run continues this one
                f.write(self.run.id)
        except Exception as err:  # no package, no network, no account: log without wandb
            self._disable(err)

    def _disable(self, err: Exception) -> None:
        _log.warning("wandb disabled (%s: %s); the other loggers go on", type(err).__name__, err)
        self.run = None

    def log(self, step: int, values: dict[str, float | int]) -> None:
        if self.run is None:
            return
        try:
            self.run.log(dict(values), step=step)
        except Exception as err:
            self._disable(err)

    def close(self) -> None:
        if self.run is not None:
            try:
                self.run.finish()
            except Exception as err:
                self._disable(err)
            self.run = None
