"""``scripts/seeds.py``'s runs: S seeds x V variants of one config as ``scripts/train.py``
processes, P at a time, to a step count or until a wall-clock deadline. A run with a
checkpoint continues with ``resume=``; at the deadline or on Ctrl-C every process gets one
SIGINT, the user's Ctrl-C, and stops with its checkpoint; one still going ``grace`` seconds
later is killed with its process group (docs/usage.md, "Budget").
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from mbrl.runtime.utils import hydra_value
from mbrl.tools.plotting import read_metrics

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "scripts", "train.py")
STOPPED = 130  # train.py's exit code after a Ctrl-C stop with a checkpoint
START_AND_STOP = 60.0  # seconds a run takes to start, and to stop when asked (a fit epoch)


@dataclass(frozen=True)
class Variant:
    """One arm: its overrides (``model=flow``), shown as its label and named as its folder."""

    overrides: tuple[str, ...]

    @property
    def label(self) -> str:
        return " ".join(self.overrides) or "base"

    @property
    def folder(self) -> str:
        name = "_".join(o.replace("=", "-") for o in self.overrides) or "base"
        return re.sub(r"[^A-Za-z0-9_.,+-]", "-", name)


@dataclass
class Job:
    """One run: a variant and a seed, in its folder."""

    variant: Variant
    seed: int
    path: str
    before: int = 0  # its env steps when this invocation started it
    seconds: float = 0.0  # its wall time in this invocation
    outcome: str = "pending"
    target: int = 0  # the env steps this invocation takes it to

    @property
    def name(self) -> str:
        return f"{self.variant.folder}/seed_{self.seed}"

    def steps(self) -> int:
        """Env steps the run continues from: its checkpoint's (0 without one). Not its metrics'
        last step: a process killed between checkpoints logged past its last one."""
        path = os.path.join(self.path, "ckpt", "last.pt")
        if not os.path.isfile(path):
            return 0
        from mbrl.runtime import checkpoint  # (torch: only once a run has a checkpoint)

        try:  # (mmap: the small pickle is read, not the tensors)
            return int(checkpoint.load(path, mmap=True, sums=False)["step"])
        except checkpoint.CheckpointError:
            return 0  # (its resume says what is wrong with the file)

    def logged(self) -> int:
        """Its last logged env step: where a running run is."""
        metrics = os.path.join(self.path, "metrics.jsonl")
        rows = read_metrics(metrics) if os.path.isfile(metrics) else []
        return int(rows[-1]["step"]) if rows else 0

    def command(
        self, base: list[str], target: int, threads: int, minutes: float | None
    ) -> list[str]:
        """train.py's command line: a new run, or the resume of this one; ``minutes``: its
        wall-clock allowance (max_minutes; always given, as a resume keeps the last one)."""
        limit = "null" if minutes is None else f"{minutes:.2f}"
        common = [f"total_steps={target}", f"max_minutes={limit}", f"threads={threads}"]
        common.append("logger.progress=false")
        if os.path.isfile(os.path.join(self.path, "ckpt", "last.pt")):
            return [sys.executable, TRAIN, f"resume={hydra_value(self.path)}", *common]
        over = [*base, *self.variant.overrides, f"seed={self.seed}"]
        return [sys.executable, TRAIN, *over, *common, f"hydra.run.dir={hydra_value(self.path)}"]


@dataclass
class Batch:
    """Several seeds of one variant as one process (train.py's ``batch_seeds``): the first
    job's command with the others' folders; their SAC updates run batched."""

    jobs: list[Job]

    @property
    def name(self) -> str:
        seeds = ",".join(str(j.seed) for j in self.jobs)
        return f"{self.jobs[0].variant.folder}/seeds_{seeds}"

    def steps(self) -> int:
        return min(j.steps() for j in self.jobs)

    def logged(self) -> int:
        return min(j.logged() for j in self.jobs)

    def command(
        self, base: list[str], target: int, threads: int, minutes: float | None
    ) -> list[str]:
        dirs = ",".join(hydra_value(j.path) for j in self.jobs[1:])
        batch = [f"batch_seeds={len(self.jobs)}", f"batch_dirs=[{dirs}]"]
        return [*self.jobs[0].command(base, target, threads, minutes), *batch]


def _at(job: Job | Batch) -> int:
    """Where a running process is: its last logged step, or the checkpoint step it continues
    from while it has logged nothing past it (a run's checkpoint can be a log interval ahead:
    it is written before that step's log row)."""
    return max(job.logged(), min(m.before for m in members(job)))


def batches(jobs: list[Job], size: int) -> tuple[list[Job | Batch], list[str]]:
    """``jobs`` as processes: each variant's seeds in groups of up to ``size`` (in order),
    a group of one or of runs at different steps (which cannot go on together) as solo runs;
    and a line for each group split so. Seed-major, as ``jobs`` are: the k-th group of every
    variant before any variant's next, so that a campaign cut short (a budget, a stop, one
    process at a time) has the same seeds of every variant, to pair."""
    variants = list(dict.fromkeys(j.variant for j in jobs))
    groups = {
        v: [own[i : i + size] for i in range(0, len(own), size)]
        for v in variants
        for own in [[j for j in jobs if j.variant == v]]
    }
    units: list[Job | Batch] = []
    said: list[str] = []
    for k in range(max((len(g) for g in groups.values()), default=0)):
        for variant in variants:
            if k >= len(groups[variant]):
                continue
            group = groups[variant][k]
            at = {
                (os.path.isfile(os.path.join(j.path, "ckpt", "last.pt")), j.steps()) for j in group
            }
            if len(group) > 1 and len(at) == 1:
                units.append(Batch(group))
                continue
            if len(group) > 1:
                steps = ", ".join(f"seed {j.seed} at {j.steps():,}" for j in group)
                said.append(f"{variant.folder}: {steps}: not at one step, so run one by one")
            units += group
    return units, said


@dataclass
class Pool:
    """Runs jobs P at a time until each reaches ``target`` or the deadline passes."""

    base: list[str]
    procs: int
    threads: int
    deadline: float  # time.time() after which every process is asked to stop
    grace: float  # seconds from that request to a kill
    logs: str  # folder for each run's console output
    on_change: Callable[[], None] = lambda: None  # after each run ends (rewrite the report)
    every: float = 300.0  # ... and at least this often, in seconds, while runs go on
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True)
    env: dict[str, str] = field(default_factory=dict)  # added to each run's environment (MPS)
    # appended to each "running:" line, from each process's jobs and start (the time left)
    outlook: Callable[[list[tuple[list[Job], float]]], str] = lambda running: ""
    active: dict[int, tuple[Job | Batch, subprocess.Popen[bytes], float]] = field(
        default_factory=dict
    )
    stopping_since: float | None = None
    _said: bool = False  # the first "running:" line, said as the first runs start
    _changed: float = field(default_factory=time.time)

    def run(self, jobs: list[Job | Batch], target: int) -> None:
        """Advance ``jobs`` to ``target`` env steps (those already there are skipped); a
        :class:`Batch` is one process for its seeds."""
        queue = [j for j in jobs if j.steps() < target]
        try:
            while (queue and self.can_start()) or self.active:
                while queue and len(self.active) < self.procs and self.can_start():
                    self._start(queue.pop(0), target)
                if not self._said:  # (at once: a continued campaign's runs have estimates)
                    self._said = True
                    self.say(self._running())
                self._reap()
                if self.stopping_since is None and time.time() >= self.deadline:
                    self.stop("the budget is spent")
                self._kill_overdue()
                if time.time() - self._changed >= self.every:  # where each running run is
                    self.say(self._running())
                    self._report()
                time.sleep(0.5)
        except KeyboardInterrupt:  # (also SIGTERM: scripts/seeds.py's stop_on_signals)
            self.stop("a stop request (Ctrl-C, SIGINT or SIGTERM)")
            self._drain()
            raise
        if queue:  # (the budget ran out before their turn)
            names = ", ".join(j.name for j in queue)
            self.say(f"not started, the budget being spent or under {2 * START_AND_STOP:.0f} s "
                     f"from its end (a run's start, some work and its stop): {names}")  # fmt: skip

    def _running(self) -> str:
        """``17:45 running: a at 36,500; b at 36,250 · every run at ... in about ...``."""
        now = [f"{job.name} at {_at(job):,}" for job, _, _ in self.active.values()]
        units = [(members(job), started) for job, _, started in self.active.values()]
        line = f"{time.strftime('%H:%M')} running: " + ("; ".join(now) or "none")
        try:
            return line + self.outlook(units)
        except Exception as err:
            return f"{line} · time left not computed ({type(err).__name__}: {err})"

    def can_start(self) -> bool:
        """Whether a new process may start: not stopping, and enough budget left for it to
        start, do some work and stop."""
        return self.stopping_since is None and self.deadline - time.time() > 2 * START_AND_STOP

    def _start(self, job: Job | Batch, target: int) -> None:
        for member in members(job):
            path = member.path
            if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "ckpt", "last.pt")):
                # Started but never checkpointed (stopped during its start-up): renamed, not
                # deleted, so that the run starts afresh in its place.
                aside = f"{path}.unsaved-{time.strftime('%Y%m%d_%H%M%S')}"
                os.rename(path, aside)
                self.say(f"{member.name}: no checkpoint in its folder; moved to {aside}")
            member.before, member.target = member.steps(), target
        before = job.steps()
        os.makedirs(self.logs, exist_ok=True)
        log = open(self.log_path(job), "ab")  # noqa: SIM115
        cmd = job.command(self.base, target, self.threads, self._minutes_left())
        log.write(f"\n$ {' '.join(cmd)}\n".encode())
        log.flush()
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, **self.env})  # fmt: skip
        log.close()  # (the child holds its own descriptor)
        self.active[proc.pid] = (job, proc, time.time())
        verb = "continues" if before else "starts"
        self.say(f"{job.name} {verb} at step {before:,} -> {target:,} (pid {proc.pid})")

    def _minutes_left(self) -> float | None:
        """A new process's allowance: the budget's time left, less its start-up (imports,
        building; its own clock starts after them) and the time it takes to stop (the current
        model-fit epoch), so that it stops by itself within the budget."""
        if self.deadline == float("inf"):
            return None
        return max(0.1, (self.deadline - time.time() - START_AND_STOP) / 60)

    def seconds(self, job: Job) -> float:
        """A run's wall time in this invocation, so far where it is still running."""
        started = [t for unit, _, t in self.active.values() if any(m is job for m in members(unit))]
        return job.seconds + sum(time.time() - t for t in started)

    def log_path(self, job: Job | Batch) -> str:
        """The file a run's console output goes to."""
        return os.path.join(self.logs, job.name.replace("/", "__") + ".log")

    def _reap(self) -> None:
        for pid, (job, proc, started) in list(self.active.items()):
            code = proc.poll()
            if code is None:
                continue
            del self.active[pid]
            for member in members(job):
                member.seconds += time.time() - started
                member.outcome = self._outcome(code, member)
            outcome = members(job)[0].outcome
            self.say(
                f"{job.name} {outcome} at step {job.steps():,} ({time.time() - started:,.0f} s)"
            )
            if outcome.startswith("failed"):
                self.say(f"  its output: {self.log_path(job)}")
            elif code == STOPPED and self.stopping_since is None:  # (a signal sent by another)
                self.say(f"  it says: {stop_line(self.log_path(job))}")
            self._report()

    def _outcome(self, code: int, job: Job) -> str:
        """What a run's process exit ``code`` means for it."""
        outcome = {0: "done", STOPPED: "stopped"}.get(code, f"failed (exit {code})")
        if code == 0 and job.steps() < job.target:  # (its max_minutes, the budget, ran out)
            outcome = "stopped"
        if code not in (0, STOPPED) and self.stopping_since is not None:
            outcome = f"stopped (exit {code})"  # (asked to stop, during its start-up)
        return outcome

    def _report(self) -> None:
        self._changed = time.time()
        self.on_change()

    def stop(self, why: str) -> None:
        """Ask every running process to stop (one SIGINT each); no new ones start."""
        if self.stopping_since is not None:
            return
        self.stopping_since = time.time()
        runs = sum(len(members(job)) for job, _, _ in self.active.values())
        self.say(f"{why}: asking {runs} run{'s' if runs != 1 else ''} to stop and checkpoint")
        for _, proc, _ in self.active.values():
            _signal(proc, signal.SIGINT, group=False)

    def _kill_overdue(self) -> None:
        if self.stopping_since is None or time.time() - self.stopping_since < self.grace:
            return
        for job, proc, _ in self.active.values():
            if proc.poll() is None:
                self.say(f"{job.name} has not stopped {self.grace:.0f} s after SIGINT: killed")
                _signal(proc, signal.SIGKILL, group=True)

    def _drain(self) -> None:
        """Wait for the stopping processes (a second Ctrl-C kills them at once)."""
        try:
            while self.active:
                self._reap()
                self._kill_overdue()
                time.sleep(0.5)
        except KeyboardInterrupt:
            for _, proc, _ in self.active.values():
                _signal(proc, signal.SIGKILL, group=True)
            self._reap()


def members(job: Job | Batch) -> list[Job]:
    """The runs a process runs: a job's own, or a batch's."""
    return job.jobs if isinstance(job, Batch) else [job]


def stop_line(path: str) -> str:
    """What a run said on stopping, from its log (this invocation's part, after its command
    line): its last line that starts with "stopped" or "quit" (the sender of a SIGINT at its
    start is named there), else its last line."""
    with open(path, "rb") as f:
        f.seek(max(os.path.getsize(path) - 8192, 0))
        text = f.read().decode(errors="replace").rsplit("\n$ ", 1)[-1]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]  # (and a bar's redraws)
    said = [ln for ln in lines if ln.startswith(("stopped", "quit"))]
    return (said or lines or ["(nothing)"])[-1]


def _signal(proc: subprocess.Popen[bytes], sig: int, group: bool) -> None:
    with contextlib.suppress(ProcessLookupError):  # (it has ended meanwhile)
        if group:  # the run with its compile workers and env workers
            os.killpg(proc.pid, sig)
        else:
            proc.send_signal(sig)


def stages(steps: int, stage: int | None) -> list[int]:
    """The step counts every run reaches in turn: all to ``stage``, then 2 x stage, ...,
    then ``steps`` (with no stage, straight to ``steps``)."""
    if not stage or stage >= steps:
        return [steps]
    return [*range(stage, steps, stage), steps]
