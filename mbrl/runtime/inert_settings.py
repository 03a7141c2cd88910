"""Settings that cannot act before a run ends (a rollout schedule whose ``max_length`` is first
used after ``total_steps``, a model phase or an evaluation due only past the end, ...), named
when a run starts, and before a multirun's jobs when a swept key acts in none of them:
otherwise two "different" runs of a sweep are silently the same run (docs/usage.md).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from mbrl.config import Config, ConfigError
from mbrl.runtime.validate import validate
from mbrl.schedule import first_model_phase, model_phase_steps, rollout_length, run_length

MAX_JOBS = 512  # sweeps larger than this are not checked job by job
SCHEDULE = ("rollout.max_length", "rollout.max_epoch")  # inert while rollouts keep min_length
MODEL_SIDE = ("mbpo", "model", "rollout", "rewarder")  # the config groups of the model side


@dataclass(frozen=True)
class Inert:
    """``keys`` (and every key under them, for config nodes) have no effect in this run."""

    keys: tuple[str, ...]
    what: str  # how the warning names them
    why: str
    # True where it holds for every run of its kind (the model side of a SAC run): then named
    # only for the keys a command sets (:func:`given_warnings`), not at every start
    given_only: bool = False

    def covers(self, key: str) -> bool:
        return any(key == k or key.startswith(k + ".") for k in self.keys)


def _past_min_epoch(cfg: Config) -> int:
    """The first model phase past MBPO's epoch ``rollout.min_epoch`` (epochs counted after
    init_steps): up to it the rollout length is min_length whatever max_length is."""
    after = cfg.algorithm.init_steps + (cfg.rollout.min_epoch + 1) * cfg.mbpo.epoch_length
    return model_phase_steps(cfg, after).start  # (a step past the run's end too)


def schedule_moves_at(cfg: Config) -> int | None:
    """The env step of the first model phase whose rollout length (``rollout_length``, the
    schedule itself) is not ``rollout.min_length``; None when it never leaves it. MBPO's
    Hopper schedule, 1 -> 15 over epochs 20 -> 150, first gives 2 at epoch 30: step 35000."""
    r, freq = cfg.rollout, cfg.mbpo.model_train_freq
    end = cfg.algorithm.init_steps + (max(r.max_epoch, r.min_epoch) + 1) * cfg.mbpo.epoch_length
    for step in range(_past_min_epoch(cfg), end + freq + 1, freq):  # (constant past max_epoch)
        if rollout_length(step, cfg) != r.min_length:
            return step
    return None


def _schedule_inert(cfg: Config, total: int, end: str) -> Inert | None:
    """rollout.max_length (and max_epoch) when the run ends before they can change a rollout
    length: before the schedule moves, or, for a constant schedule (max_length ==
    min_length), before any other max_length could act."""
    r, moves = cfg.rollout, schedule_moves_at(cfg)
    if (moves if moves is not None else _past_min_epoch(cfg)) < total:
        return None
    schedule = (
        f"the rollout length follows MBPO's schedule, rollout.min_length={r.min_length} up to "
        f"epoch rollout.min_epoch={r.min_epoch}, then towards rollout.max_length={r.max_length} "
        f"at epoch rollout.max_epoch={r.max_epoch} (epochs of mbpo.epoch_length="
        f"{cfg.mbpo.epoch_length} steps after algorithm.init_steps={cfg.algorithm.init_steps})"
    )
    if moves is None:
        later = f"another max_length would act from step {_past_min_epoch(cfg)} at the earliest"
        why = f"{schedule}, so it stays {r.min_length}; {later}; {end}"
    else:
        first = f"whose first length other than {r.min_length} is {rollout_length(moves, cfg)}"
        why = f"{schedule}, {first}, at step {moves}; {end}"
    return Inert(SCHEDULE, "rollout.max_length", why)


def inert_settings(cfg: Config) -> list[Inert]:
    """The settings of ``cfg`` that cannot act before the run ends (none for a profiling
    window, which is cut short on purpose)."""
    if cfg.profile.enabled:
        return []
    total, init = run_length(cfg), cfg.algorithm.init_steps
    end = f"the run ends at total_steps={cfg.total_steps}"
    out = []
    if init >= total:
        why = f"algorithm.init_steps={init} random steps fill the whole run ({end})"
        out.append(Inert(("agent",), "SAC (agent.*)", f"no SAC update: {why}"))
    if cfg.algorithm.name == "sac":
        why = "algorithm=sac trains no model (its batches come from D_env alone)"
        out.append(Inert(MODEL_SIDE, "the model side", why, given_only=True))
    if cfg.algorithm.name == "mbpo":
        first, freq = first_model_phase(cfg), cfg.mbpo.model_train_freq
        if first >= total:
            keys = MODEL_SIDE
            why = (
                f"the first model phase would be at step {first} (every mbpo.model_train_freq="
                f"{freq} steps from algorithm.init_steps={init}), and {end}"
            )
            out.append(Inert(keys, "the model side (model.*, rollout.*, rewarder.*, mbpo.*)", why))
        elif (schedule := _schedule_inert(cfg, total, end)) is not None:
            out.append(schedule)
    for key, every in (("eval.every", cfg.eval.every), ("logger.every", cfg.logger.every)):
        if every > total:
            why = f"its first step would be {every}, and {end} (logging and evaluating anyway)"
            out.append(Inert((key,), f"{key}={every}", why))
    return out


def warnings_for(cfg: Config) -> list[str]:
    """The start-up warnings, one per group of inert settings (a rollout schedule that never
    leaves min_length only where max_length differs from it: else it means what it does)."""
    r = cfg.rollout
    return [
        f"warning: {i.what} cannot act in this run: {i.why}"
        for i in inert_settings(cfg)
        if not i.given_only and not (i.keys == SCHEDULE and r.max_length == r.min_length)
    ]


@dataclass(frozen=True)
class Warned:
    """A campaign's start-up warning: its text, and the variants it holds for (None: all)."""

    text: str
    labels: tuple[str, ...] | None

    def line(self) -> str:
        """As the console says it: ``warning (a, b): text`` or ``warning: text``."""
        return "warning" + ("" if self.labels is None else f" ({self._for()})") + f": {self.text}"

    def listed(self) -> str:
        """As the report lists it."""
        return self.text if self.labels is None else f"in the runs of {self._for()}: {self.text}"

    def _for(self) -> str:
        return ", ".join(self.labels or ())


def campaign_warnings(configs: list[tuple[str, Config]], steps: int, variants: int) -> list[Warned]:
    """``scripts/seeds.py``'s start-up warnings: :func:`warnings_for` of each variant's config
    (label, config) run to ``steps``, each said once, with the variants it holds for unless it
    holds for all ``variants`` of the campaign (a campaign shorter than the random steps
    learns nothing)."""
    holds: dict[str, list[str]] = {}
    for label, cfg in configs:
        for line in warnings_for(dataclasses.replace(cfg, total_steps=steps)):
            said = line.removeprefix("warning: ").replace(" in this run: ", " in these runs: ")
            holds.setdefault(said, []).append(label)
    return [Warned(t, None if len(ls) == variants else tuple(ls)) for t, ls in holds.items()]


def given_warnings(cfg: Config, keys: list[str]) -> list[str]:
    """One warning per group of the command's ``keys`` (``model``, ``mbpo.real_ratio``) that
    no run of this kind can act on (those :func:`warnings_for` leaves out)."""
    out = []
    for i in inert_settings(cfg):
        named = [k for k in keys if i.given_only and i.covers(k)]
        if named:
            out.append(f"warning: {', '.join(named)} cannot act in this run: {i.why}")
    return out


def inert_sweeps(base: Config, sweeps: dict[str, list[object]]) -> list[str]:
    """For a multirun: one warning per swept key that acts in none of its jobs (every
    combination of the swept values applied to ``base``)."""
    combos = list(itertools.islice(itertools.product(*sweeps.values()), MAX_JOBS + 1))
    if not sweeps or len(combos) > MAX_JOBS:
        return []
    acting: set[str] = set()
    reasons: dict[str, str] = {}
    for values in combos:
        job = OmegaConf.structured(base)
        for key, value in zip(sweeps, values, strict=True):
            OmegaConf.update(job, key, value, force_add=True)
        try:
            inert = inert_settings(validate(job))
        except ConfigError:  # a job whose values are refused: its own run says why
            return []
        for key in sweeps:
            hit = next((i for i in inert if i.covers(key)), None)
            if hit is None:
                acting.add(key)
            else:
                reasons.setdefault(key, hit.why)
    return [
        f"warning: the sweep over {key} ({', '.join(map(str, sweeps[key]))}) changes nothing: "
        f"{key} cannot act in any of its jobs ({reasons[key]})"
        for key in sweeps
        if key not in acting
    ]


def swept_values(overrides: list[str], groups: tuple[str, ...]) -> dict[str, list[object]]:
    """A multirun's swept keys and their values (``key=a,b``, ``range(...)``, ``choice(...)``);
    none when a config group is swept (each group's files change the base config) or a
    sweep cannot be listed (``interval(...)``)."""
    out: dict[str, list[object]] = {}
    for o in OverridesParser.create().parse_overrides(overrides):
        if not o.is_sweep_override() or o.is_hydra_override():
            continue
        if o.key_or_group.split(".")[0] in groups or o.value_type is None:
            return {}
        try:
            out[o.key_or_group] = list(o.sweep_iterator())
        except Exception:  # hydra: only choice and range sweeps can be listed
            return {}
    return out
