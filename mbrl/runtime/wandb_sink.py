"""Optional wandb backend for the logger. A failing wandb never stops training: the first
error is reported once as a warning and wandb is switched off for the rest of the run."""

from __future__ import annotations

import logging
import os
from typing import Any, cast

from mbrl.config import LoggerConfig

_log = logging.getLogger(__name__)


class WandbSink:
    def __init__(self, run_dir: str, lc: LoggerConfig, config: dict[str, Any]) -> None:
        """A wandb run with the ``logger.wandb_*`` settings ``lc`` (mode None: WANDB_MODE or
        online; the trainer makes one where ``logger.wandb``)."""
        self.run: Any = None
        try:
            import wandb

            id_file = os.path.join(run_dir, "wandb_run_id.txt")
            run_id = None
            if os.path.exists(id_file):
                with open(id_file, encoding="utf-8") as f:
                    run_id = f.read().strip()
            self.run = wandb.init(
                project=lc.wandb_project,
                entity=lc.wandb_entity,
                group=lc.wandb_group,
                tags=list(lc.wandb_tags or []),
                name=lc.wandb_name,
                mode=cast(Any, lc.wandb_mode),  # (wandb checks it: a bad one disables wandb)
                dir=run_dir,
                config=config,
                id=run_id,
                resume="allow" if run_id else None,
                # A run of its own even beside others in the process (batch_seeds: one per seed)
                reinit="create_new",
            )
            with open(id_file, "w", encoding="utf-8") as f:  # a resumed run continues this one
                f.write(self.run.id)
        except Exception as err:  # no package, no network, no account: log without wandb
            self._disable(err)

    def _disable(self, err: Exception) -> None:
        _log.warning("wandb disabled (%s: %s); the other loggers go on", type(err).__name__, err)
        self.run = None

    def log(self, step: int, values: dict[str, float | int]) -> None:
        if self.run is None:
            return
        try:
            self.run.log(dict(values), step=step)
        except Exception as err:
            self._disable(err)

    def close(self) -> None:
        if self.run is not None:
            try:
                self.run.finish()
            except Exception as err:
                self._disable(err)
            self.run = None
