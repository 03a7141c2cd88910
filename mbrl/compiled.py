"""How the hot functions are made fast without a second copy of them: ``torch.compile``, and
on a GPU one CUDA graph per step.

:class:`Compiled` runs a tensor function (SAC's losses, a model's minibatch loss) through
``torch.compile``; its backward is compiled with it (AOT autograd). It compiles in
:meth:`Compiled.warm_up` (before a run starts, so the time is measured and shown) and falls
back to the eager function, with one warning that names the cause, when compiling fails: no
C++ compiler for the CPU backend, an operator an edited loss uses that inductor cannot lower.

:class:`GraphedStep` replays a whole step (sampling, losses, backward, optimizer step) as one
CUDA graph: after a few eager warm-up calls it captures the step once, and every later call
is one ``replay()``, no Python and no kernel launches of its own.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

import torch

T = TypeVar("T")
log = logging.getLogger(__name__)


class Compiled:
    """``fn`` through ``torch.compile`` (static shapes), eager once compiling has failed."""

    def __init__(self, fn: Callable[..., Any], what: str) -> None:
        self.fn, self.what = fn, what
        self._compiled = torch.compile(fn, dynamic=False)
        self.failure: str | None = None  # why compiling failed ("Type: message"); None: it ran
        self.seconds: float | None = None  # wall-clock time of the warm-up (compiling) call

    def warm_up(self, call: Callable[[], object]) -> None:
        """Run ``call`` (which calls this function on throwaway inputs) and time it. If it
        fails, ``call`` runs again eagerly: if that works, compiling was at fault and stays
        off for good (one warning); if not, the function's own error is raised."""
        start = time.perf_counter()
        try:
            call()
        except Exception as err:  # whatever inductor raises: the run goes on eagerly
            self.failure = "?"  # (the eager run below)
            call()
            self._fail(err)
        self.seconds = time.perf_counter() - start

    def __deepcopy__(self, memo: dict[int, Any]) -> Compiled:
        return self  # compiled code, not state: a copy of its owner runs the same code

    def __call__(self, *args: Any) -> Any:
        if self.failure is not None:
            return self.fn(*args)
        try:
            return self._compiled(*args)
        except Exception as err:
            # A recompilation that fails mid-run: the eager function decides. If it raises
            # too, the error is the function's own, not the compiler's.
            out = self.fn(*args)
            self._fail(err)
            return out

    def _fail(self, err: Exception) -> None:
        lines = str(err).strip().splitlines()
        self.failure = f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]
        log.warning("compiling %s failed (%s); it runs eagerly", self.what, self.failure)


class GraphedStep(Generic[T]):
    """``step()`` captured as one CUDA graph, then replayed on every call.

    ``step`` must read and write only tensors that stay where they are (buffers, parameters,
    optimizer state) and never wait for the device. The first ``warmup`` calls run it on a side
    stream (the optimizer makes its state, allocations settle), the next one captures it and
    replays the capture, and so does every later call. Its return value is the capture's
    outputs, overwritten by each replay. ``generators`` are the generators ``step`` draws
    from: registered with the graph, each replay advances them. A capture that fails (an
    operation a CUDA graph cannot hold) is reported once; the step then runs uncaptured.
    """

    def __init__(
        self, step: Callable[[], T], generators: Sequence[torch.Generator], warmup: int = 3
    ) -> None:
        self.step, self.generators, self.warmup = step, list(generators), warmup
        self.calls = 0
        self.graph: torch.cuda.CUDAGraph | None = None
        self.failure: str | None = None  # why capturing failed (the step then runs uncaptured)
        self._out: T | None = None

    def __call__(self) -> T:
        if self.graph is None:
            if self.calls < self.warmup or self.failure is not None:
                return self._eager()
            try:
                self._capture()
            except Exception as err:  # an operation that cannot be captured: run uncaptured
                self.failure = f"{type(err).__name__}: {str(err).strip()[:200]}"
                log.warning("capturing a CUDA graph failed (%s); the step runs uncaptured", err)
                return self._eager()
        assert self.graph is not None and self._out is not None
        self.graph.replay()
        return self._out

    def _eager(self) -> T:
        self.calls += 1
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = self.step()
        torch.cuda.current_stream().wait_stream(side)
        return out

    def _capture(self) -> None:
        graph = torch.cuda.CUDAGraph()
        # (Newer torch registers a generator at its first use in a capture by itself.)
        if hasattr(graph, "register_generator_state"):
            for gen in self.generators:
                graph.register_generator_state(gen)
        with torch.cuda.graph(graph):
            self._out = self.step()  # recorded, not run: __call__ replays it
        self.graph = graph


@contextlib.contextmanager
def tf32_matmuls(enabled: bool) -> Iterator[None]:
    """Inside the block, fp32 matmuls on a GPU run on TF32 tensor cores when ``enabled``
    (``torch.set_float32_matmul_precision("high")``); restored afterwards."""
    if not enabled:
        yield
        return
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)
