"""What the terminal shows during a run: a start block, a progress bar that names the phase
the loop is in (model fit with its epoch and holdout score, rollout, evaluation, checkpoint)
with a steady ETA, and a summary at the end or on Ctrl-C.

Nothing here reads device tensors: the model fit reports its epoch through the one host read
per epoch that early stopping already makes.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from tqdm import tqdm


def duration(seconds: float) -> str:
    """``3 h 05 min``, ``4 min 12 s``, ``9.3 s``."""
    if seconds >= 3600:
        return f"{int(seconds // 3600)} h {int(seconds % 3600 // 60):02d} min"
    if seconds >= 60:
        return f"{int(seconds // 60)} min {int(seconds % 60):02d} s"
    return f"{seconds:.1f} s"


def episodes(n: int) -> str:
    return f"{n} episode{'' if n == 1 else 's'}"


def megabytes(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f} GB" if nbytes >= 2**30 else f"{nbytes / 2**20:.0f} MB"


class Progress:
    """The progress bar of one run (disabled: the text blocks still print, the bar does not).

    The ETA is the mean time per env step since learning started (model fits, rollouts and
    evaluations included) times the steps left: it does not jump when a long model fit
    starts, and it is shown once ``settle`` steps of learning have been timed.
    """

    def __init__(self, total: int, done: int, enabled: bool, init_steps: int, settle: int) -> None:
        self.enabled, self.total = enabled, total
        self.bar = tqdm(
            total=total,
            initial=done,
            unit="step",
            dynamic_ncols=True,
            disable=not enabled,
            mininterval=1.0,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]",
        )
        self._init_steps, self._settle = init_steps, settle
        self._t0: float | None = None  # when learning started (in this process)
        self._n0 = 0
        self._postfix: dict[str, str] = {}
        self.phase("")

    def write(self, text: str) -> None:
        """Print above the bar (or plainly, with the bar off)."""
        if self.enabled:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def phase(self, text: str) -> None:
        """Name what the loop is doing now ("" while it steps the env)."""
        if self.enabled:
            self.bar.set_description_str(text or "train", refresh=bool(text))

    def step(self, env_steps: int) -> None:
        self.bar.update(1)
        if env_steps >= self._init_steps and self._t0 is None:
            self._t0, self._n0 = time.perf_counter(), env_steps
        if self._t0 is not None and env_steps - self._n0 >= self._settle:
            per_step = (time.perf_counter() - self._t0) / (env_steps - self._n0)
            self._postfix["eta"] = duration(per_step * (self.total - env_steps))
            self._show()

    def eval_return(self, value: float) -> None:
        self._postfix["eval_return"] = f"{value:.1f}"
        self._show()

    def _show(self) -> None:
        if self.enabled:
            self.bar.set_postfix(self._postfix, refresh=False)

    def close(self) -> None:
        self.bar.close()


def start_block(lines: dict[str, Any]) -> str:
    """``key: value`` lines under a title, aligned."""
    width = max(len(k) for k in lines)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in lines.items())
