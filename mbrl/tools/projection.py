"""``profile=true``'s projection of a whole run: the window's seconds per unit of work and its
fits' epochs, through the one projection the training ETA uses too
(:func:`mbrl.runtime.eta.time_left`).

The window is short, so its shares say little about a real run, where the fits grow with the
data; the projection scales each phase's measured cost per unit of work by the work the whole
run does. How many epochs a fit takes is measured as the run's estimate measures it: the
window's first fit starts from random weights and its second from the first, as a run's
later fits do, each until early stopping ends it.
"""

from __future__ import annotations

from mbrl.config import Config
from mbrl.runtime.eta import Work, time_left
from mbrl.runtime.progress import duration


def project(
    cfg: Config, work: Work, grand: dict[str, float], cap: int | None
) -> tuple[dict[str, float], str]:
    """Seconds per phase of the whole run ``cfg`` describes, from a window's ``work`` and
    timers (compile warm-up not included), and where its epochs per fit come from (``cap``:
    the window's own, ``profile.model_epochs``)."""
    epochs = work.epochs()
    how = f"the first fit {epochs.first:.0f} epochs, later fits {epochs.later:.0f}, as the "
    how += "window's two fits took" if cap is None else f"window's, capped at {cap}: fewer"
    return time_left(cfg, 0, work.rates(grand, least=1), epochs), how


def projection_text(cfg: Config, seconds: dict[str, float], epochs: str) -> str:
    """The projected whole run, phase by phase, with what it assumes."""
    total = sum(seconds.values())
    lines = [
        f"a whole run of this config ({cfg.total_steps:,} env steps), projected from the "
        "window's rates and the run's schedule:",
        f"{'phase':<11}{'time':>14}{'share':>8}",
        "-" * 33,
    ]
    for name, secs in sorted(seconds.items(), key=lambda kv: -kv[1]):
        lines.append(f"{name:<11}{duration(secs):>14}{100 * secs / max(total, 1e-9):>7.0f}%")
    lines += ["-" * 33, f"{'total':<11}{duration(total):>14}"]
    if cfg.algorithm.name == "mbpo":
        lines.append(
            f"(model: a fit's time is its rows x epochs, {epochs}. rollout: full-length "
            "rollouts, an upper bound. Compile warm-up not included. A training run "
            "estimates its time left the same way, from its own rates and fits.)"
        )
    return "\n".join(lines)
