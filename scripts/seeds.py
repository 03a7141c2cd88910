"""Run one config over many seeds and variants, and report mean ± std over the seeds.

    python scripts/seeds.py OUT --seeds 0-4 --vary model=gaussian,flow --steps 20000 \\
        [--stage 5000] [--budget 2h] [--procs P] [--batch S] [--mps auto] [--reference CSV] \\
        -- env=hopper

Every (variant, seed) is a ``scripts/train.py`` run in ``OUT/runs/<variant>/seed_<k>``, P
at a time (``--batch S``: up to S seeds of a variant per process). The same command again
continues every run where it stopped; ``--budget`` and Ctrl-C, SIGINT or SIGTERM stop every
run with its checkpoint. As runs end it rewrites the report (metrics.tar.gz, summary.md,
summary.json, curves.png/.svg). Each option, the report and how runs stop: docs/usage.md
("Many seeds"); CUDA MPS (``--mps``): docs/scaling.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shlex
import signal
import sys
import time
from typing import Any

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.envs.vector import CORES_ENV
from mbrl.runtime.inert_settings import campaign_warnings
from mbrl.runtime.utils import write_atomic
from mbrl.tools.campaign_eta import campaign
from mbrl.tools.mps import MODES, Mps, wanted
from mbrl.tools.mps import start as start_mps
from mbrl.tools.published import reference_for
from mbrl.tools.seed_args import (
    OneLineParser,
    check_budget,
    overridden,
    parse_seeds,
    variants,
    whole_number,
)
from mbrl.tools.seed_report import (
    CAMPAIGN,
    campaign_steps,
    commit,
    load_now,
    load_settings,
    plural,
    report_header,
    report_only,
    write_report,
)
from mbrl.tools.seed_runs import (
    ROOT,
    Job,
    Pool,
    Variant,
    batches,
    stages,
)
from mbrl.tools.seed_speed import GpuMemory, run_speed

# Runs at a time on a GPU: under MPS ten Hopper runs made 4.1x one run's throughput in ~40 GB
# (an H100 holds them), twenty only 1.25x more (docs/benchmarks.md, "Many runs on one GPU").
GPU_PROCS = 10


def arguments() -> argparse.Namespace:
    p = OneLineParser(
        description=__doc__.split("\n\n")[0],
        epilog="Overrides after OUT (or after --) apply to every run: env=hopper env.version=v4",
    )
    p.add_argument("out", help="the campaign's folder (its runs, manifest and report)")
    p.add_argument("overrides", nargs="*", help="hydra overrides for every run")
    p.add_argument("--seeds", help="0-4 or 0,1,2 (default 0-2; with --report-only, the campaign's)")
    p.add_argument(
        "--vary", action="append", default=[], help="key=v1,v2: one variant per value "
        "(several --vary: every combination)"
    )  # fmt: skip
    p.add_argument(
        "--variant", action="append", default=[], help='"k=v k2=v2": one variant, given '
        "whole (repeatable; beside --vary's)"
    )  # fmt: skip
    p.add_argument(
        "--steps", type=whole_number, help="env steps per run (default: the config's total_steps)"
    )
    p.add_argument("--stage", type=whole_number, help="take every run to N, 2N, ... in turn")
    p.add_argument("--budget", help="wall-clock budget: 2h, 90m, 1h30m, 300s (2m30s at least)")
    p.add_argument(
        "--grace", type=float, default=120.0, help="seconds from a stop request to a kill"
    )
    p.add_argument("--procs", type=int, help="runs at a time")
    p.add_argument("--threads", type=int, default=1, help="torch threads per run (default 1)")
    p.add_argument(
        "--batch", type=int, default=1, help="seeds per process, their SAC updates batched "
        "(train.py's batch_seeds; default 1: a process per run)"
    )  # fmt: skip
    p.add_argument(
        "--mps", choices=MODES, default="auto", help="CUDA MPS for the runs (default auto: "
        "on for several processes on a GPU)"
    )  # fmt: skip
    p.add_argument("--reference", help="a published curve: CSV step,mean,std")
    p.add_argument("--report", help="folder for the report (default OUT)")
    p.add_argument("--report-every", type=float, default=300.0, help="seconds between reports")
    p.add_argument(
        "--report-only", action="store_true", help="write the report and exit (overrides, "
        "variants and seeds not given: the campaign's own, from OUT/seeds.json; its warnings "
        "for the steps its runs were last taken to, unless --steps)"
    )  # fmt: skip
    return p.parse_intermixed_args(_joined(sys.argv[1:]))


def _joined(argv: list[str]) -> list[str]:
    """``--budget -5m`` as ``--budget=-5m``: argparse would read the value as an option and
    answer "expected one argument"; joined, the value gets its own check's message (and a
    flag that takes none, ``--report-only=-5m``, argparse's)."""
    out: list[str] = []
    for token in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and re.match(r"-\d", token):
            out[-1] = f"{out[-1]}={token}"
        else:
            out.append(token)
    return out


def check(
    base: list[str], arms: list[Variant], steps: int | None, report_only: bool = False
) -> tuple[int, str, set[str], list[tuple[str, Any]]]:
    """Every variant's config, validated as train.py would before anything starts; returns
    (the runs' env steps, the device they train on, their envs, each variant's label and
    config). A report alone reads files:
    its configs are validated on the CPU, so a GPU campaign's runs can be reported on a machine
    without one."""
    from hydra import compose, initialize_config_dir

    from mbrl.launch import register_resolvers
    from mbrl.overrides import check_overrides
    from mbrl.runtime.utils import resolve_device
    from mbrl.runtime.validate import validate

    register_resolvers()
    totals, device, envs, configs = set(), "cpu", set(), []
    conf = os.path.join(ROOT, "conf")
    check_overrides(base, conf)  # every run's, as train.py checks them (a typo: the closest)
    with initialize_config_dir(config_dir=conf, version_base=None):
        for arm in arms:
            try:
                check_overrides([*base, *arm.overrides], conf)
                where = ["device=cpu"] if report_only else []
                cfg = validate(compose("config", overrides=[*base, *arm.overrides, *where]))
            except Exception as err:  # (hydra's and ours: one line each)
                raise ValueError(f"variant {arm.label!r}: {err}".splitlines()[0]) from None
            totals.add(steps or cfg.total_steps)
            device = resolve_device(cfg.device).type
            envs.add(cfg.env.name)
            configs.append((arm.label, cfg))
    if len(totals) > 1:
        raise ValueError(f"the variants' total_steps differ ({sorted(totals)}); set --steps")
    return totals.pop(), device, envs, configs


def import_plugins(out: str) -> None:
    """$FLOWMBPO_PLUGINS's modules and those the campaign's runs saved in their configs
    (a campaign continued without the variable), passed on to the runs this one starts."""
    from omegaconf import OmegaConf

    from mbrl import plugins

    plugins.import_plugins(plugins.requested())
    for path in sorted(glob.glob(os.path.join(out, "runs", "*", "*", "config.yaml"))):
        plugins.import_saved(OmegaConf.load(path), path)
    os.environ.update(plugins.environment())


def manifest(
    out: str, base: list[str], arms: list[Variant], seeds: list[int], write: bool = True
) -> dict:
    """OUT/seeds.json: the campaign's base overrides (fixed), variants and seeds (growing);
    ``write=False`` (a report only): read, and joined with this command's, not written."""
    path = os.path.join(out, CAMPAIGN)
    old = _read_json(path, {"base": base, "variants": [], "seeds": []})
    if old["base"] != base:
        raise ValueError(
            f"{out} holds runs of {' '.join(old['base']) or '(no overrides)'}; "
            f"these overrides are {' '.join(base) or '(none)'}: use another folder"
        )
    known = [Variant(tuple(v)) for v in old["variants"]]
    data = {
        "base": base,
        "variants": [list(v.overrides) for v in dict.fromkeys([*known, *arms])],
        "seeds": sorted(set(old["seeds"]) | set(seeds)),
    }
    if write:
        os.makedirs(out, exist_ok=True)
        write_atomic(path, json.dumps(data, indent=1))
    return data


def _checked(args: argparse.Namespace) -> tuple[Any, ...]:
    """The command's seeds, variants, budget, steps, device and manifest, every value checked
    before anything runs (ValueError: what is wrong, in one line)."""
    if args.report_only:
        _as_the_campaign(args)
    seeds, arms = parse_seeds(args.seeds or "0-2"), variants(args.vary, args.variant)
    budget = check_budget(args.budget) if args.budget else None
    if args.steps is not None and args.steps < 1:
        raise ValueError(f"--steps {args.steps}: give a positive number of env steps per run")
    if args.procs is not None and args.procs < 1:
        raise ValueError(f"--procs {args.procs}: give 1 or more")
    if args.batch < 1:
        raise ValueError(f"--batch {args.batch}: give 1 or more seeds per process")
    import_plugins(args.out)
    steps, device, envs, configs = check(args.overrides, arms, args.steps, args.report_only)
    reference = reference_for(args.reference, envs)
    plan = manifest(args.out, args.overrides, arms, seeds, write=not args.report_only)
    warns = campaign_warnings(configs, steps, len(plan["variants"]))  # (settings that cannot act)
    return seeds, arms, budget, steps, device, reference, plan, warns


def _head(runs: int, arms: int, seeds: int) -> str:
    """``4 runs (2 variants x 2 seeds)``."""
    return f"{plural(runs, 'run')} ({plural(arms, 'variant')} x {plural(seeds, 'seed')})"


def _as_the_campaign(args: argparse.Namespace) -> None:
    """A report: overrides, variants and seeds left out are the campaign's (seeds.json)."""
    saved = _read_json(os.path.join(args.out, CAMPAIGN), None) or {}
    args.overrides = args.overrides or list(saved.get("base", []))
    if not args.vary and not args.variant:
        args.variant = [" ".join(v) for v in saved.get("variants", [])]
    if args.seeds is None and saved:
        args.seeds = ",".join(str(s) for s in saved["seeds"])
    args.steps = args.steps or campaign_steps(args.out)  # (for the warnings it gives)


def main() -> int:
    args = arguments()
    try:
        seeds, arms, budget, steps, device, reference, plan, warns = _checked(args)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    every, jobs = _jobs(args.out, plan)
    chosen = [j for j in jobs if j.variant in arms and j.seed in seeds]
    procs = args.procs or (GPU_PROCS if device == "cuda" else os.cpu_count() or 1)
    history = list(_read_json(os.path.join(args.out, "invocations.json"), []))
    record = _record(args, procs, device, steps)
    report_dir = args.report or args.out
    pool: Pool | None = None
    memory: GpuMemory | None = None

    def report() -> None:
        record["end"] = time.time()
        record.setdefault("load", []).extend(load_now())  # (shared or not)
        record["runs"] = {
            j.name: {
                "before": j.before,
                "after": j.steps(),
                "seconds": pool.seconds(j) if pool else j.seconds,
                "past_random": run_speed(j.path, record["start"]),
            }
            for j in chosen
            if j.outcome != "pending"
        }
        record["gpu_memory_mb"] = memory.figures() if memory else None
        invocations = [*history, record] if record["runs"] else history
        if not args.report_only:  # (a report writes nothing into the campaign's folder)
            write_atomic(
                os.path.join(args.out, "invocations.json"), json.dumps(invocations, indent=1)
            )
        by_variant = [(v.label, [j.path for j in jobs if j.variant == v]) for v in every]
        ran = list(dict.fromkeys(i.get("commit", "?") for i in invocations))
        size = (len(plan["seeds"]), len(every))
        header = report_header(args.overrides, size, record["commit"], ran, warns)
        write_report(report_dir, load_settings(by_variant), invocations, reference, header)

    if args.report_only:
        return report_only(args.out, report_dir, chosen, report)
    units, split = batches(chosen, args.batch)
    procs = record["procs"] = min(procs, len(units)) or procs  # (processes that run at once)
    deadline = time.time() + budget if budget else float("inf")
    pool = Pool(args.overrides, procs, args.threads, deadline, args.grace,
                os.path.join(args.out, "logs"), report, args.report_every)  # fmt: skip
    pool.outlook = campaign(units, steps, procs, deadline, jobs)
    stop_on_signals()
    mps: Mps | None = None
    try:
        mps, mps_text = _mps(args, device, procs)
        pool.env, record["mps"] = {**shares(procs), **(mps.env if mps else {})}, mps is not None
        memory = GpuMemory() if device == "cuda" else None
        head = _head(len(chosen), len(arms), len(seeds))
        print(_start(args, head, len(units), steps, procs, f"{device}, {mps_text}"), *split,
              *overridden(args.overrides, arms), *(w.line() for w in warns), sep="\n",
              file=sys.stderr)  # fmt: skip
        for target in stages(steps, args.stage):
            pool.run(units, target)
            if not pool.can_start():  # (the budget is spent, or Ctrl-C)
                break
    except KeyboardInterrupt:
        report()
        print(f"stopped; the same command continues every run: {_again()}", file=sys.stderr)
        return 130
    finally:  # (after the runs have stopped: they are the daemon's clients)
        if memory is not None:
            memory.stop()
        if mps is not None:
            print(mps.stop(), file=sys.stderr)
    report()
    print(f"report: {os.path.join(report_dir, 'summary.md')}", file=sys.stderr)
    short = [j for j in chosen if j.outcome.startswith("stopped")]
    if short:  # (the budget ended them)
        print(f"{plural(len(short), 'run')} short of {steps:,} env steps: the same command "
              f"continues them: {_again()}", file=sys.stderr)  # fmt: skip
    failed = [j.name for j in chosen if j.outcome.startswith("failed")]
    return 1 if failed else 0


def _record(args: argparse.Namespace, procs: int, device: str, steps: int) -> dict[str, Any]:
    """This invocation's entry in invocations.json, as it starts (its runs added as they
    end; ``steps``: its target, for which a later report gives the warnings)."""
    now = time.time()
    return {"start": now, "end": now, "procs": procs, "device": device, "steps": steps,
            "cores": os.cpu_count(), "threads": args.threads,
            "batch": args.batch, "commit": commit(), "runs": {}}  # fmt: skip


def _again() -> str:
    """This command as typed (quoted where it must be), to run again."""
    return f"python {shlex.join(sys.argv)}"


def _start(
    args: argparse.Namespace, head: str, procs_needed: int, steps: int, procs: int, on: str
) -> str:
    """The start line: the runs, their processes (batched seeds), where and the budget."""
    per = f" ({plural(procs_needed, 'process')}, up to {args.batch} seeds each)"
    per = per if args.batch > 1 else ""
    budget = f", budget {args.budget}" if args.budget else ""
    return f"{head}{per} to {steps:,} env steps, {procs} at a time on {on}{budget}"


def _jobs(out: str, plan: dict[str, Any]) -> tuple[list[Variant], list[Job]]:
    """Every variant of the campaign's plan, and a job per seed and variant, seed-major: both
    arms of a seed run side by side (paired)."""
    every = [Variant(tuple(v)) for v in plan["variants"]]
    jobs = [
        Job(v, s, os.path.join(out, "runs", v.folder, f"seed_{s}"))
        for s in plan["seeds"]
        for v in every
    ]
    return every, jobs


def _mps(args: argparse.Namespace, device: str, procs: int) -> tuple[Mps | None, str]:
    """Start CUDA MPS for the runs where ``--mps`` asks for it; returns the daemon (or None)
    and the start line's words on it. A start that fails is one line, and the runs go on."""
    use, why = wanted(args.mps, device, procs)
    if not use:
        return None, f"MPS off ({why})"
    mps, said = start_mps(os.path.join(args.out, "logs", "mps"), probe=device == "cuda")
    print(said, file=sys.stderr, flush=True)
    return mps, f"MPS {'on' if mps else 'off'} ({why}{'' if mps else ': it could not start'})"


def shares(procs: int) -> dict[str, str]:
    """Each run's share of the cores, in its environment: its async env workers (evaluation's
    ``vector=auto``) and inductor's compile workers are sized to it, not to the whole machine,
    where P runs would start P times a worker per core (the user's own
    TORCHINDUCTOR_COMPILE_THREADS stays)."""
    share = str(max(1, (os.cpu_count() or 1) // procs))
    out = {CORES_ENV: share}
    if "TORCHINDUCTOR_COMPILE_THREADS" not in os.environ:
        out["TORCHINDUCTOR_COMPILE_THREADS"] = share
    return out


def stop_on_signals() -> None:
    """SIGTERM and SIGINT stop the runs as Ctrl-C does (each with its checkpoint). Without
    this a ``kill`` would end this process alone and leave its runs going, and a shell's
    ``cmd &`` starts it with SIGINT ignored."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.default_int_handler)  # (raises KeyboardInterrupt)


def _read_json(path: str, default: Any) -> Any:
    """A JSON file's contents, or ``default`` where there is none."""
    if not os.path.isfile(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


if __name__ == "__main__":
    sys.exit(main())
