"""Train an agent: ``python scripts/train.py env=hopper [key=value ...]``.

Hydra composes ``conf/``; see the README for the config groups and the run folder.
"""

from __future__ import annotations

import os
import sys

import _checkout  # noqa: F401  (this checkout's mbrl ahead of installed ones)

from mbrl.runtime import interrupt

# First, before the slow imports: Ctrl-C from here on is answered in one line, and whatever
# the run starts is kept from dying of it (mbrl/runtime/interrupt.py). Not where
# multiprocessing imports this file again (a forkserver for env workers): the run's own only.
if __name__ == "__main__":
    interrupt.install()

import hydra
from omegaconf import DictConfig

try:
    from mbrl.launch import import_plugins, rank_argv, register_resolvers, run
except ImportError as err:
    if err.name != "mujoco":
        raise
    sys.exit(f"error: {err}")  # no MuJoCo, or MUJOCO_GL naming a GL library the machine lacks
from mbrl.overrides import command_line

CONF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "conf")

register_resolvers()
import_plugins()  # $FLOWMBPO_PLUGINS: modules that register models or agents of your own


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    return run(cfg)


if __name__ == "__main__":
    sys.argv = rank_argv(command_line(sys.argv, CONF))
    main()
