"""The hydra side of ``scripts/train.py``: config checks before any folder exists, resume.

Hydra creates the run folder before it calls the task function, so the checks run in a hydra
callback (``on_run_start``) instead: a bad value exits with a clear message and no folder.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from mbrl import collectives, plugins
from mbrl.agents import AGENTS
from mbrl.compiled import strict
from mbrl.config import Config, ConfigError
from mbrl.envs import ENVS, env_dims, make_env
from mbrl.models import MODELS
from mbrl.overrides import CONFIG_GROUPS, fail, override_key
from mbrl.runtime import distributed, interrupt, runlock
from mbrl.runtime.capacity import check_disk, check_memory
from mbrl.runtime.checkpoint import CheckpointError, check_layout, load
from mbrl.runtime.inert_settings import given_warnings, inert_sweeps, swept_values
from mbrl.runtime.report import disk_full_text, quit_text, resume_all_command, resume_command
from mbrl.runtime.utils import resolve_device
from mbrl.runtime.validate import validate

# Config groups select a file or a registered config; a resumed run cannot switch them (the
# key that names each choice in a saved config).
GROUPS = {"env": "name", "algorithm": "name", "model": "name", "agent": "_target_"}


def import_plugins() -> None:
    """Import the modules ``$FLOWMBPO_PLUGINS`` names before hydra composes the config: a
    model, agent or env of your own registers itself there (docs/model.md)."""
    try:
        plugins.import_plugins(plugins.requested())
    except plugins.PluginError as err:
        fail(err)


def rank_argv(argv: list[str]) -> list[str]:
    """Under torchrun, ranks other than 0 leave no trace of their own: hydra's folder for
    them is a temporary one without .hydra/ or a log file (rank 0's run folder is the run's,
    and its name, with a timestamp, may differ by a second between ranks)."""
    if distributed.rank() == 0:
        return argv
    own = tempfile.mkdtemp(prefix="flowmbpo_rank")
    atexit.register(shutil.rmtree, own, True)
    keep = [a for a in argv if not a.startswith(("hydra.run.dir=", "hydra.output_subdir="))]
    return [
        *keep,
        f"hydra.run.dir={own}",
        "hydra.output_subdir=null",
        "hydra/job_logging=disabled",
        "~hydra.job_logging.handlers.file",  # (conf/config.yaml's train.log setting)
        "hydra/hydra_logging=disabled",
    ]


def register_resolvers() -> None:
    """Resolvers used by ``conf/config.yaml`` (its ``hydra:`` section, ``--help``)."""
    resolvers: dict[str, Callable[..., str | None]] = {
        "run_dir": run_folder,
        "short_dirname": short_dirname,
        "hydra_subdir": subdir,
    }
    # --help lists the envs, models and agents registered, a plug-in's too.
    for group, registered in (("env", ENVS), ("model", MODELS), ("agent", AGENTS)):
        resolvers[f"{group}_choices"] = lambda r=registered: ", ".join(sorted(r))
    for name, resolver in resolvers.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)


def run_folder(resume: str | None, profile: bool, root: str, name: str) -> str:
    """A resumed run writes into its own folder; a new run gets runs/<env>/<date_time>, a
    profiling window runs/profile/<env>/<date_time>."""
    if resume is not None:
        return str(resume)
    return os.path.join(root, "profile", name) if profile else os.path.join(root, name)


def subdir(resume: str | None, output_dir: str | None = None) -> str | None:
    """Keep the original .hydra/ of a resumed run; the resume's own goes beside it. A new run
    into ``output_dir`` holding a run's checkpoint gets none (None: hydra saves nothing): it
    is refused, a sweep's job only once hydra has saved its record, which would replace the
    run's own."""
    if resume is not None:
        return f".hydra/resume_{time.strftime('%Y%m%d_%H%M%S')}"
    if output_dir is not None and os.path.isfile(os.path.join(output_dir, "ckpt", "last.pt")):
        return None
    return ".hydra"


def short_dirname(name: str, limit: int = 120) -> str:
    """``name`` if it is short enough for a folder name, else a prefix plus a short hash
    (multirun job folders are named after their overrides: long override lists would exceed
    the file-name limit)."""
    name = name.replace("/", "_")
    if len(name) <= limit:
        return name
    digest = hashlib.sha1(name.encode()).hexdigest()[:8]
    return f"{name[: limit - 9]}~{digest}"


def resolve(cfg: DictConfig, overrides: list[str]) -> Config:
    """The validated config of this run; for ``resume=DIR`` the saved one plus ``overrides``."""
    resume = cfg.get("resume")
    if resume is not None and OmegaConf.select(cfg, "profile.enabled"):
        # (a window sets its own steps, evaluations and checkpoints: in the run's folder they
        # would replace the run's config.yaml and last.pt)
        raise ConfigError(
            f"profile=true with resume={resume!r}: a profiling window is a run of its own, in "
            "runs/profile/; profile the run's settings with the command that started it plus "
            "profile=true"
        )
    config = validate(cfg) if resume is None else _resumed(cfg, overrides, resume)
    config.plugins = {**config.plugins, **plugins.IMPORTED}  # (kept in its config.yaml)
    return config


def _resumed(cfg: DictConfig, overrides: list[str], resume: Any) -> Config:
    """The saved config of the run ``resume`` names, with this start's ``overrides``."""
    saved_path = os.path.join(str(resume), "config.yaml")
    if not os.path.isfile(saved_path):
        raise ConfigError(f"resume={resume!r}: {_no_run_here(str(resume))}")
    if not os.path.isfile(os.path.join(str(resume), "ckpt", "last.pt")):
        raise ConfigError(
            f"resume={resume!r}: nothing was saved yet in this run (it stopped before its first "
            "checkpoint, ckpt/last.pt): start it afresh with the command that made it (this "
            "folder can be removed)"
        )
    saved = OmegaConf.load(saved_path)
    assert isinstance(saved, DictConfig)
    for override in overrides:
        key = override_key(override)
        if key == "resume" or key.startswith("hydra"):
            continue
        if key in GROUPS:
            path = f"{key}.{GROUPS[key]}"
            new, old = OmegaConf.select(cfg, path), OmegaConf.select(saved, path)
            if new != old:
                raise ConfigError(
                    f"resume={resume!r} is a run with {key}={old}; it cannot continue as "
                    f"{key}={new}"
                )
            continue
        OmegaConf.update(saved, key, OmegaConf.select(cfg, key), force_add=True)
    saved.resume = str(resume)
    try:
        plugins.import_saved(saved, f"resume={resume!r}")
        return validate(saved)
    except plugins.PluginError:  # (a module of the run's is missing, not a version mismatch)
        raise
    except ConfigError as err:
        raise ConfigError(
            f"resume={resume!r}: the run's saved config does not fit this code ({err}); it was "
            "written by another version of FlowMBPO (older, or one with keys this one lacks): "
            "resume it with the code that wrote it"
        ) from None


def _no_run_here(path: str) -> str:
    """Why ``path`` (a resume= without config.yaml) is no run folder, and what to give."""
    from mbrl.tools.eval_checkpoint import not_a_run
    from mbrl.tools.seed_report import CAMPAIGN

    if os.path.isfile(os.path.join(path, CAMPAIGN)):
        return (
            "a scripts/seeds.py campaign, not a run: the seeds.py command that made it "
            "continues every run in it (or give one run's folder, runs/<variant>/seed_<k>)"
        )
    return not_a_run(path).replace(f"{path!r} ", "", 1)


def _literal_run_dir(config: DictConfig, cfg: Config) -> str | None:
    """The run folder when it is known before hydra makes it: a resume's folder, or a
    ``hydra.run.dir`` given as a plain path (a new run's default has a timestamp in it)."""
    if cfg.resume is not None:
        return cfg.resume
    raw = OmegaConf.to_container(config.hydra.run, resolve=False)
    run_dir = raw.get("dir") if isinstance(raw, dict) else None
    return run_dir if isinstance(run_dir, str) and "${" not in run_dir else None


def check_before_start(config: DictConfig, lock: bool = True, multirun: bool = False) -> Config:
    """Everything that must fail before a file is written: the config, the checkpoint to
    resume, whether the buffers fit in memory and the checkpoints on the disk, and whether
    another run holds the folder (``multirun``: the jobs' folders are checked by each job,
    and ``hydra.run.dir`` is not theirs)."""
    cfg = resolve(config, list(config.hydra.overrides.task))
    strict()  # FLOWMBPO_STRICT must be 0 or 1 (a fallback is met mid-run, too late to say)
    world = distributed.world_size()
    distributed.check_world(cfg, world)
    if cfg.resume is not None:  # a bad checkpoint must fail before hydra writes there
        path = os.path.join(cfg.resume, "ckpt", "last.pt")
        state = load(path, env_name=cfg.env.name, mmap=True)
        check_layout(state, cfg.resume, world, cfg.env.num_envs)
        step = int(state["step"])
        if cfg.total_steps <= step:  # (it would stop at once, after compiling)
            raise ConfigError(
                f"resume={cfg.resume!r} is at step {step:,} and total_steps={cfg.total_steps} "
                f"leaves nothing to do; to extend it: {resume_command(cfg.resume)} "
                f"total_steps=<more than {step}>"
            )
    env = make_env(cfg.env.name, cfg.env.max_episode_steps, version=cfg.env.version)
    dims = env_dims(env)
    env.close()
    check_memory(cfg, *dims, resolve_device(cfg.device))
    folder = _literal_run_dir(config, cfg) if not multirun or cfg.resume else None
    written = cfg
    if cfg.profile.enabled:  # (a window writes a window's checkpoints)
        from mbrl.tools.profiling import window_config

        written = window_config(cfg)
    folders = [] if folder is None else [folder]
    if cfg.batch_seeds > 1 and folder is not None:  # (a timestamped folder: new ones beside)
        from mbrl.seed_trainer import check_folders

        folders = check_folders(cfg, folder)
    check_disk(written, *dims, folder or os.path.join("runs", cfg.env.name), folders)
    if lock and distributed.is_main():
        for held in folders:  # this run's folder (and a batch's others)
            runlock.acquire(held)  # held until the process ends (the trainer reuses it)
    if cfg.resume is None and folder is not None:  # (after the lock: a live run says so)
        _refuse_a_run_folder(folder)
    return cfg


def _refuse_a_run_folder(folder: str, what: str = "hydra.run.dir=") -> None:
    """A new run may not write into a folder that holds another run's checkpoint: its
    config, metrics and checkpoints would be overwritten or mixed with the new run's."""
    if os.path.isfile(os.path.join(folder, "ckpt", "last.pt")):
        raise ConfigError(
            f"{what}{folder!r} holds a run (ckpt/last.pt): "
            f"{resume_command(folder)} continues it; a new run needs a folder of its own"
        )


class ValidateCallback(Callback):
    """Runs :func:`check_before_start` before hydra writes anything (the run folder included)."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            check_before_start(config)
        except (ConfigError, CheckpointError, runlock.RunFolderBusy) as err:
            fail(err)

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        # Sweep values are applied per job (each job's trainer checks and locks its folder);
        # the shared part can be checked now.
        try:
            base = check_before_start(config, lock=False, multirun=True)
        except (ConfigError, CheckpointError) as err:
            fail(err)
        sweeps = swept_values(list(config.hydra.overrides.task), CONFIG_GROUPS)
        for line in inert_sweeps(base, sweeps):  # before the jobs: they would all be one run
            print(line, file=sys.stderr, flush=True)


def parallel_job_label(run_dir: str) -> str:
    """A job of a multirun whose launcher runs jobs side by side (joblib, submitit): ``job 3
    (seed=3)``, its number and swept values, which its progress lines start with (their bars
    would share one terminal line); "" for a single run or hydra's own launcher."""
    hydra = HydraConfig.get()
    target = str(hydra.launcher.get("_target_", ""))
    if hydra.mode != RunMode.MULTIRUN or target.endswith(".BasicLauncher"):
        return ""
    swept = _swept_keys(os.path.dirname(os.path.normpath(run_dir)))
    mine = [o for o in hydra.overrides.task if override_key(o) in swept]
    return f"job {hydra.job.num}" + (f" ({', '.join(mine)})" if mine else "")


def _swept_keys(sweep_dir: str) -> set[str]:
    """The keys a multirun sweeps, from the ``multirun.yaml`` hydra saved in its sweep folder
    (none if it cannot be read)."""
    try:
        saved = OmegaConf.load(os.path.join(sweep_dir, "multirun.yaml"))
        parsed = OverridesParser.create().parse_overrides(list(saved.hydra.overrides.task))
    except Exception:  # (a label without the values is still a label)
        return set()
    return {o.key_or_group for o in parsed if o.is_sweep_override()}


def run(cfg: DictConfig) -> float:
    """The task function: train in hydra's run folder; returns the final eval return."""
    from mbrl.seed_trainer import SeedTrainer  # heavy imports only once the config is good
    from mbrl.trainer import Trainer

    run_dir = HydraConfig.get().runtime.output_dir
    interrupt.starting()  # (again, for the next job of a multirun)
    profile = bool(cfg.profile.enabled)
    interrupt.describe(lambda moment: quit_text(moment, run_dir, None, profile))
    try:
        given = list(HydraConfig.get().overrides.task)
        config = resolve(cfg, given)
        if config.resume is None:  # (a sweep run again there; a hydra.run.dir with ${...})
            multirun = HydraConfig.get().mode == RunMode.MULTIRUN
            _refuse_a_run_folder(run_dir, "the job's folder " if multirun else "hydra.run.dir=")
        for line in given_warnings(config, [override_key(o) for o in given]):
            if distributed.is_main():  # (once, not once per torchrun rank)
                print(line, file=sys.stderr)  # (a set key that a run of this kind cannot use)
        # Under torchrun: join the process group; every rank uses rank 0's run folder.
        distributed.start(resolve_device(config.device))
        run_dir = collectives.broadcast_object(run_dir)
        if config.profile.enabled:
            from mbrl.tools.profiling import run_profile

            return float(run_profile(config, run_dir)["wall"])
        # batch_seeds > 1: S seeds in this process, their SAC updates batched
        batched = config.batch_seeds > 1
        trainer = SeedTrainer(config, run_dir) if batched else Trainer(config, run_dir)
        lead = trainer.trainers[0] if isinstance(trainer, SeedTrainer) else trainer
        lead.line_label = parallel_job_label(run_dir)
    except (ConfigError, CheckpointError, runlock.RunFolderBusy) as err:
        fail(err)
    try:
        out = trainer.run()
        result = out[0] if isinstance(out, list) else out  # (batched: the first seed's)
    except CheckpointError as err:  # e.g. the disk ran full: last.pt holds the last good state
        fail(err, code=1)
    except OSError as err:  # the disk ran full while a log was written (else raised as it is)
        again = ""
        if isinstance(trainer, SeedTrainer):
            again = resume_all_command(run_dir, len(trainer.trainers), trainer.batch_dirs)
        if (text := disk_full_text(err, run_dir, again)) is None:
            raise
        fail(OSError(text), code=1)
    finally:
        distributed.stop()
    if trainer.stopped == "Ctrl-C":
        sys.exit(interrupt.EXIT_CODE)  # stopped by Ctrl-C, checkpoint written
    if trainer.stopped == interrupt.TERM:
        sys.exit(interrupt.TERM_EXIT_CODE)  # likewise, by SIGTERM
    return result
