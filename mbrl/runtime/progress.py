"""What the terminal shows during a run: a start block, a progress bar that names the phase
the loop is in (``explore`` during the random steps, ``train`` after, or a model fit with its
epoch and holdout score, rollout, evaluation, checkpoint) with an ETA from per-phase rates
(:mod:`mbrl.runtime.eta`), and a summary at the end or on Ctrl-C.

Nothing here reads device tensors: the model fit reports its epoch through the one host read
per epoch that early stopping already makes.
"""

from __future__ import annotations

import sys
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
    With a ``label`` (a job of a parallel sweep, whose bars would all draw on one terminal
    line) there is no bar: each evaluation prints one line, ``label: step n/total, ...``."""

    def __init__(
        self, total: int, done: int, enabled: bool, init_steps: int, label: str = ""
    ) -> None:
        self.label, self.n = label, done
        enabled = enabled and not label
        self.enabled, self.total, self._init_steps = enabled, total, init_steps
        self._idle = "explore" if done < init_steps else "train"
        self.bar = tqdm(
            total=total,
            initial=done,
            desc=self._idle,
            unit="step",
            dynamic_ncols=True,
            disable=not enabled,
            mininterval=1.0,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]",
        )
        self._postfix: dict[str, str] = {}
        self.current = ""  # the phase named now

    def waiting_for(self) -> str:
        """What a stop waits for now: the model fit's epoch, or the step."""
        if self.current.startswith("model fit"):
            return "this model-fit epoch (the fit goes on from there on resume)"
        return "the current step"

    def write(self, text: str) -> None:
        """Print above the bar (or plainly, with the bar off)."""
        if self.enabled:
            self.bar.write(text, file=sys.stderr)
        else:
            print(text, file=sys.stderr, flush=True)

    def phase(self, text: str) -> None:
        """Name what the loop is doing now ("": it steps the env and trains)."""
        self.current = text
        if self.enabled:
            self.bar.set_description_str(text or self._idle, refresh=bool(text))

    def step(self, env_steps: int) -> None:
        """The run is at ``env_steps`` (all env copies together)."""
        if self._idle == "explore" and env_steps >= self._init_steps:
            self._idle = "train"
            self.phase("")
        self.bar.update(env_steps - self.n)
        self.n = env_steps

    def eta(self, seconds: float) -> None:
        self._postfix["eta"] = duration(seconds)
        self._show()

    def eval_return(self, value: float) -> None:
        self._postfix["eval_return"] = f"{value:.1f}"
        self._show()
        if self.label:
            going = "eta" in self._postfix and self.n < self.total
            left = f", about {self._postfix['eta']} left" if going else ""
            line = f"{self.label}: step {self.n:,}/{self.total:,}, eval return {value:.1f}{left}"
            print(line, file=sys.stderr, flush=True)

    def _show(self) -> None:
        if self.enabled:
            self.bar.set_postfix(self._postfix, refresh=False)

    def close(self) -> None:
        self.bar.close()


def start_block(lines: dict[str, Any]) -> str:
    """``key: value`` lines under a title, aligned."""
    width = max(len(k) for k in lines)
    return "\n".join(f"  {k:<{width}}  {v}" for k, v in lines.items())
