"""Every config key and its default, except those stated where they belong: a model's or
agent's own keys (a subclass beside its class: mbrl/models/*.py, mbrl/agents/sac.py), a flow's
architecture (flows/defaults.py, read here) and what an env changes (its run length, each
algorithm's settings on it: mbrl/envs/specs.py).

``Config`` is registered with hydra as ``flowmbpo``; ``conf/config.yaml`` only picks the
config groups, whose files set what differs from these defaults. ``mbrl.runtime.validate``
checks every value once at start-up. Components receive only their own sub-config
(``SAC(..., cfg.agent)``). ``docs/config.md`` is generated from these dataclasses, the
models' and agents' and the envs' (``python scripts/config_table.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hydra.core.config_store import ConfigStore

from flows.defaults import DEFAULTS as FLOW

DEVICES = ("auto", "cpu", "cuda")
AMP_MODES = ("auto", "off", "bf16", "fp16")
ACT_DEVICES = ("auto", "cpu", "train")
ALGORITHMS = ("sac", "mbpo")
REWARDER_MODES = ("none", "penalty", "filter")
COMPILE_MODES = ("auto", "true", "false")
REAL_DATA = ("episode", "step")
VECTOR_MODES = ("auto", "sync", "async")
WANDB_MODES = ("online", "offline", "disabled", "shared")


class ConfigError(ValueError):
    """A config value that is not allowed; the message names the key, the value and the choices."""


@dataclass
class EnvConfig:
    name: str = "hopper"  # short name, one of mbrl.envs.ENVS
    # The env's version: null is its newest (v5 for the MuJoCo envs); v4 for comparing with
    # published MBPO curves (gym v2 / v4 dynamics and rewards: docs/fidelity.md)
    version: str | None = None
    max_episode_steps: int | None = None  # None: the env's own time limit
    # Env copies stepped together as one gymnasium vector env; each vector step is num_envs
    # env steps and is followed by num_envs x algorithm.updates_per_step SAC updates.
    num_envs: int = 1
    # How the copies run: sync (one process) | async (one worker process each, shared
    # memory) | auto (async from 4 copies when the run has a core per copy, else sync; its
    # cores: the machine's, or $FLOWMBPO_CORES, which scripts/seeds.py sets to each run's share).
    vector: str = "auto"


@dataclass
class AlgorithmConfig:
    """The loop: MBPO (model phase, env step, SAC updates) or model-free SAC (no model phase)."""

    name: str = "mbpo"  # mbpo | sac
    init_steps: int = 5000  # uniform-random env steps before the first model fit / SAC update
    updates_per_step: int = 20  # SAC updates per env step after init_steps (MBPO's G)


@dataclass
class AgentConfig:
    """The agent (``agent=<name>``): the keys the loop reads, at SAC's values.

    An agent's own keys are in a subclass beside its class (``agent=sac``:
    mbrl/agents/sac.py), registered with ``mbrl.agents.register_agent``; validate() gives the
    node the chosen agent's keys."""

    _target_: str = "mbrl.agents.sac.SAC"  # the agent's class (module.Class)
    batch_size: int = 256  # transitions per update (real and model rows together in MBPO)
    # Where env actions are computed: train (the training device), cpu (a CPU copy of the
    # actor, refreshed every act_sync_every env steps), auto (cpu when training on CUDA).
    act_device: str = "auto"
    act_sync_every: int = 10  # env steps between refreshes of the CPU copy

    def check(self) -> str | None:
        """What is wrong with an agent's own keys, or None (a subclass checks its keys)."""
        return None


@dataclass
class FlowConfig:
    """A coupling flow's architecture (the world model's and the rewarder's flows); the
    defaults are the flow library's own (``flows.defaults.DEFAULTS``)."""

    # spline (rational-quadratic) | affine coupling layers
    transform: str = FLOW.transform
    layers: int = FLOW.layers  # coupling layers, a fixed permutation between them
    # each coupling's conditioner
    hidden: list[int] = field(default_factory=lambda: list(FLOW.hidden))
    bins: int = FLOW.bins  # spline bins
    # spline on [-B, B] (normalised units), identity outside
    tail_bound: float = FLOW.tail_bound


@dataclass
class ModelConfig:
    """The dynamics ensemble p([ds, r] | s, a) and how it is fit (as MBPO does).

    These keys are every model's; a model adds its own in a subclass beside its class
    (``model=flow``: mbrl/models/flow.py, ``model=gaussian``: mbrl/models/gaussian.py,
    ``model=deterministic``: mbrl/models/deterministic.py), registered with
    ``mbrl.models.register_model``. A subclass also sets what suits it of the defaults below,
    which are the flow's."""

    _target_: str = "mbrl.models.flow.FlowModel"  # the model's class (module.Class)
    name: str = "flow"  # the name runs are reported under
    members: int = 7  # ensemble size
    elites: int = 5  # members used for rollouts: best holdout score (select_by)
    lr: float = 1e-3  # Adam / AdamW
    weight_decay: float = 5e-5  # decoupled (AdamW) weight decay
    # Holdout score for early stopping and elites, one of the model's scores: nll | mse (of
    # the mean / the flow's mode, raw target units, as bnn.py)
    select_by: str = "nll"
    normalize_targets: bool = True  # standardise the targets [ds, r] too (not only inputs)
    batch_size: int = 256  # per member
    holdout_ratio: float = 0.2  # of the real data, capped at max_holdout rows (MBPO)
    max_holdout: int = 5000  # most holdout rows (MBPO)
    patience: int = 5  # early stopping: epochs without an `improvement` gain on any member
    improvement: float = 0.01  # relative holdout gain that counts (MBPO: 1 %)
    max_epochs: int | None = None  # cap per fit (None: early stopping alone)
    max_seconds: float | None = None  # wall-clock cap per fit (makes runs machine-dependent)

    def check(self) -> str | None:
        """What is wrong with a model's own keys, or None (a subclass checks its keys)."""
        return None


@dataclass
class RolloutConfig:
    """Model rollouts; length schedule as MBPO: min_length until min_epoch, linear to
    max_length at max_epoch, then constant."""

    min_epoch: int = 20  # epochs (counted after algorithm.init_steps) at min_length
    max_epoch: int = 150  # epoch from which max_length holds
    min_length: int = 1  # model steps per rollout
    max_length: int = 15  # model steps per rollout from max_epoch on
    batch_size: int = 100_000  # start states per rollout phase
    retain_epochs: int = 1  # epochs of rollouts the model pool keeps


@dataclass
class MBPOConfig:
    model_train_freq: int = 250  # env steps between model fits (+ rollouts)
    real_ratio: float = 0.05  # share of real transitions in each SAC batch
    epoch_length: int = 1000  # env steps per epoch (rollout schedule, pool size)
    # When a real transition reaches D_env (the model fit, rollout starts, SAC's real rows):
    # episode (when its episode ends, as MBPO's sampler adds whole paths) | step (at once).
    real_data: str = "episode"


@dataclass
class RewarderConfig:
    """Coupled-flow rewarder (after CFIL): x = log p1 - log p2 ~ log(d_model / d_real)."""

    mode: str = "none"  # none | penalty (r - penalty * x) | filter (stop rows with x > threshold)
    penalty: float = 1.0  # penalty mode: r <- r - penalty * x
    threshold: float = 2.0  # filter mode: a rollout row stops when x > threshold
    flow: FlowConfig = field(default_factory=FlowConfig)  # each of the two coupled flows
    lr: float = 3e-4  # Adam
    steps: int = 100  # gradient steps per model fit
    batch_size: int = 512  # real and model transitions each


@dataclass
class BufferConfig:
    capacity: int = 1_000_000  # real transitions kept (ring)


@dataclass
class EvalConfig:
    every: int = 1000  # env steps between evaluations (and checkpoints)
    episodes: int = 10  # deterministic episodes per evaluation
    # How the episodes run side by side: sync (one process) | async (a worker process per
    # episode) | auto (async when the run has a core per episode, else sync; as env.vector).
    vector: str = "auto"


@dataclass
class LoggerConfig:
    tensorboard: bool = True  # write log/tb/ event files
    every: int = 1000  # env steps between metric lines (metrics.jsonl, text logs)
    progress: bool = True  # tqdm progress bar
    wandb: bool = False  # also log every metric to wandb (the optional extra `wandb`)
    wandb_project: str = "flowmbpo"  # wandb.init's project, entity, group and tags
    wandb_entity: str | None = None  # null: your default entity
    wandb_group: str | None = None  # e.g. one group per sweep
    wandb_tags: list[str] = field(default_factory=list)  # e.g. [ablation, hopper]
    wandb_name: str | None = None  # None: wandb's own run name
    wandb_mode: str | None = None  # online | offline | disabled | shared; None: WANDB_MODE


@dataclass
class CheckpointConfig:
    snapshots: bool = True  # keep ckpt/iteration_<N>.pt at every evaluation
    # Snapshots hold the buffers too (any can resume; ~buffer-sized each). false: networks,
    # optimizers, normalisers and counters (what evaluation and analysis need); last.pt and
    # ckpt_best.pt always hold everything.
    buffer_in_snapshots: bool = False
    # last.pt and ckpt_best.pt hold MBPO's model pool (its rows in use: a whole Hopper run's
    # ~500 MB). false: left out; a resume refills it with one model phase's rollouts from
    # the saved model and goes on from the same weights, not bit for bit (docs/failures.md).
    pool: bool = True


@dataclass
class ProfileConfig:
    """Profiling mode (``profile=true``): a short window of the real loop, then a report."""

    enabled: bool = False  # run the profiling window instead of training (profile=true)
    updates: int = 300  # SAC updates recorded in the window (after its second model fit)
    # Cap on the window's model fits (None: each runs to its early stop, as in a run: the
    # projection then knows how many epochs the first fit and a later one take)
    model_epochs: int | None = None
    eval_episodes: int = 1  # episodes of the window's evaluation
    top_ops: int = 25  # rows of the operator table
    trace: bool = True  # write a torch.profiler trace (TensorBoard plugin / Perfetto)


@dataclass
class Config:
    env: EnvConfig = field(default_factory=EnvConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    # (The loop's keys at SAC's values; validate() gives the node the agent's own keys too.)
    agent: AgentConfig = field(default_factory=AgentConfig)
    buffer: BufferConfig = field(default_factory=BufferConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    logger: LoggerConfig = field(default_factory=LoggerConfig)
    checkpoint: CheckpointConfig = field(default_factory=CheckpointConfig)
    # (Common keys at the flow's values; validate() gives the node the flow's own keys too.)
    model: ModelConfig = field(default_factory=ModelConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    mbpo: MBPOConfig = field(default_factory=MBPOConfig)
    rewarder: RewarderConfig = field(default_factory=RewarderConfig)
    profile: ProfileConfig = field(default_factory=ProfileConfig)
    total_steps: int = 100_000  # env steps
    seed: int = 0  # seeds torch, numpy, the env and the loop's explicit generators
    device: str = "auto"  # auto | cpu | cuda
    # auto (per component: mbrl.runtime.speed.AUTO_AMP) | off | bf16 | fp16
    amp: str = "auto"
    # torch.compile the SAC update and the model-fit step (CUDA: each as one CUDA graph):
    # true | false (eager) | auto (on when the run has enough SAC updates to repay a cold
    # warm-up at the gain measured on the device, never where compiled measured slower;
    # mbrl.runtime.speed.AUTO_COMPILE_UPDATES; a resume keeps its run's choice)
    compile: str = "auto"
    # CUDA: fp32 matmuls of SAC updates, model fits and rollouts on TF32 tensor cores
    tf32: bool = True
    threads: int = 1  # torch intra-op threads per process; 0 keeps torch's default
    flush_denormal: bool = True  # denormal floats -> 0 on the CPU (x86 computes on them slowly)
    resume: str | None = None  # a run folder to continue from its ckpt/last.pt
    # Wall-clock minutes this process trains (compile warm-up included: compile=auto does not
    # compile under a budget too short to repay it, mbrl.runtime.speed), then it stops as
    # Ctrl-C does: after the current step or model-fit epoch, with ckpt/last.pt to resume
    # from (null: no limit)
    max_minutes: float | None = None
    # Seeds batched in one process (mbrl.batched_seeds, docs/scaling.md): this run and
    # batch_seeds - 1 more of seeds seed + 1, ..., each in a run folder of its own (batch_dirs,
    # or beside this run's folder as <folder>_seed<k>), their SAC updates as one batched block.
    # Each folder is an ordinary run's (resume= alone continues it); resume=<this run's folder>
    # with batch_seeds=S continues all S, which must be at the same step
    batch_seeds: int = 1
    batch_dirs: list[str] = field(default_factory=list)  # the other seeds' run folders
    # Plug-in modules the run imported (FLOWMBPO_PLUGINS), each with the folder it came from:
    # a resume, scripts/evaluate.py, probe.py and seeds.py import them again (set by the run)
    plugins: dict[str, str] = field(default_factory=dict)


ConfigStore.instance().store(name="flowmbpo", node=Config)


# What a resume may change without changing what the run is: this process's own limits,
# threads, batch and progress display (seeds.py turns the bar off), and where its plug-ins
# are found.
RESUME_OWN = (
    *("resume", "total_steps", "max_minutes", "threads", "batch_seeds", "batch_dirs"),
    *("plugins", "logger.progress"),
)


def changed_settings(saved: dict[str, Any], now: dict[str, Any], prefix: str = "") -> list[str]:
    """``key old -> new`` for each setting a resume changed from the checkpoint's config
    (``saved``; both as ``dataclasses.asdict`` gives them), apart from :data:`RESUME_OWN`."""
    out = []
    for key, value in now.items():
        name, old = f"{prefix}{key}", saved.get(key)
        if name in RESUME_OWN:
            continue
        if isinstance(value, dict) and isinstance(old, dict):
            out += changed_settings(old, value, f"{name}.")
        elif key in saved and old != value:
            out.append(f"{name} {old} -> {value}")
    return out
