"""Train an agent: ``python scripts/train.py env=hopper [key=value ...]``.

Hydra composes ``conf/``; see the README for the config groups and the run folder.
"""

from __future__ import annotations

import sys

import hydra
from omegaconf import DictConfig

from mbrl.launch import (
    expand_shorthands,
    import_plugins,
    rank_argv,
    refuse_flags,
    refuse_unknown_overrides,
    register_resolvers,
    run,
)

register_resolvers()
import_plugins()  # $FLOWMBPO_PLUGINS: modules that register models or agents of your own
refuse_flags(sys.argv)
refuse_unknown_overrides(expand_shorthands(sys.argv))
sys.argv = rank_argv(expand_shorthands(sys.argv))


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    return run(cfg)


if __name__ == "__main__":
    main()
