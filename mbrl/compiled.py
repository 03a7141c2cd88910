"""How the hot functions are made fast without a second copy of them: ``torch.compile``, and
on a GPU one CUDA graph per step; and what happens when either cannot run.

:class:`Compiled` runs a tensor function (SAC's losses, a model's minibatch loss) through
``torch.compile``; its backward is compiled with it (AOT autograd). It compiles in
:meth:`Compiled.warm_up` (before a run starts, so the time is measured and shown).

:class:`GraphedStep` replays a whole step (sampling, losses, backward, optimizer step) as one
CUDA graph: after a few uncaptured warm-up calls it captures the step once, and every later
call is one ``replay()``, no Python and no kernel launches of its own.

A fast path that cannot run (no C++ compiler for inductor's CPU backend, an operator an edited
loss uses that inductor cannot lower, an operation a CUDA graph cannot hold) falls back, to the
eager function or to the uncaptured step, with one warning that names the cause, and says so
wherever speed is reported (:attr:`Compiled.ran`, :attr:`GraphedStep.ran`: the run's start
block, ``metrics.jsonl``, every benchmark row). Under ``FLOWMBPO_STRICT=1`` (the GPU check,
the CUDA tests) it raises :class:`FallbackError` instead: a measurement that claims a fast
path must have run it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import torch

from mbrl.clock import clock
from mbrl.config import ConfigError

T = TypeVar("T")
log = logging.getLogger(__name__)
STRICT_VAR = "FLOWMBPO_STRICT"


@dataclass(frozen=True)
class Speed:
    """How a run's hot functions run: one value, decided once from the config and the device
    (``mbrl.runtime.speed.resolve_speed``) and handed by name to what builds them."""

    sac_amp: str = "off"  # autocast of SAC's hidden layers: off | bf16 | fp16
    model_amp: str = "off"  # the same for the model's fits and rollouts
    compile: bool = False  # torch.compile SAC's losses and the model's fit step
    graphs: bool = False  # and replay each step as one CUDA graph
    tf32: bool = False  # fp32 matmuls of updates, fits and rollouts on TF32 cores (CUDA)
    why: str = "off"  # the compile decision in one line (the start block)


class FallbackError(RuntimeError):
    """A fast path could not run, and ``FLOWMBPO_STRICT=1`` forbids running without it."""


def strict() -> bool:
    """Whether ``FLOWMBPO_STRICT=1``: a fallback raises instead of running slower."""
    value = os.environ.get(STRICT_VAR, "").strip()
    if value not in ("", "0", "1"):
        raise ConfigError(
            f"{STRICT_VAR}={value!r} is not allowed; use 1 (a compile or CUDA-graph fallback "
            "raises) or 0 / unset (it warns once and runs slower)"
        )
    return value == "1"


def reason(err: BaseException) -> str:
    """``Type: first line of the message``, at most 300 characters."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"[:300]


def fall_back(what: str, err: Exception, instead: str) -> None:
    """The one place a fast path gives up: raises :class:`FallbackError` (from ``err``) under
    strict mode; otherwise warns (each fast path gives up once: then it stays off)."""
    why = reason(err)
    if strict():
        raise FallbackError(
            f"{what} failed ({why}); {STRICT_VAR}=1 makes this an error instead of {instead}"
        ) from err
    log.warning("%s failed (%s); %s", what, why, instead)


class _NoCudaRuntimeNote(logging.Filter):
    """Drops torch's "No CUDA runtime is found, using CUDA_HOME=..." warning. Inductor's CPU
    backend loads ``torch.utils.cpp_extension``, which warns this on any machine with a CUDA
    toolkit (an ``nvcc`` on the PATH) but no GPU: a CPU run does not use CUDA, so it is noise
    in the middle of the run's start block."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("No CUDA runtime is found")


logging.getLogger("torch.utils.cpp_extension").addFilter(_NoCudaRuntimeNote())


def inductor_options() -> dict[str, Any]:
    """Inductor settings for the installed torch: before torch 2.13, no horizontal fusion of
    CPU kernels. torch 2.11's C++ backend fuses the backward of the flow's fit step (four
    coupling layers) into a kernel that writes a buffer its wrapper allocates only later
    (``UnboundLocalError: cannot access local variable 'buf14'``); torch 2.13 compiles it
    correctly. Horizontal fusion only merges independent CPU loops into one kernel: without
    it the compiled step is the same computation, and CUDA kernels are not affected."""
    from torch._inductor import list_options  # (inductor loads only where a run compiles)

    if torch.__version__ < "2.13" and "cpp.max_horizontal_fusion_size" in list_options():
        return {"cpp.max_horizontal_fusion_size": 1}
    return {}


class Compiled:
    """``fn`` through ``torch.compile`` (static shapes), eager once compiling has failed."""

    def __init__(self, fn: Callable[..., Any], what: str) -> None:
        self.fn, self.what = fn, what
        self._compiled = torch.compile(fn, dynamic=False, options=inductor_options())
        self.failure: str | None = None  # why compiling failed ("Type: message"); None: it ran
        self.seconds: float | None = None  # wall-clock time of the warm-up (compiling) call

    @property
    def ran(self) -> str:
        """What runs: ``compiled`` or ``eager (compile failed: <cause>)``."""
        return "compiled" if self.failure is None else f"eager (compile failed: {self.failure})"

    def warm_up(self, call: Callable[[], object]) -> None:
        """Run ``call`` (which calls this function on throwaway inputs) and time it. If it
        fails, ``call`` runs again eagerly: if that works, compiling was at fault and stays
        off for good (:func:`fall_back`: strict mode raises); if not, the function's own
        error is raised."""
        start = clock()
        try:
            call()
        except Exception as err:  # whatever inductor raises: the eager run below decides
            self.failure = "?"  # (the eager run below)
            call()
            self._fail(err)
        self.seconds = clock() - start

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
        self.failure = reason(err)  # (eager from now on, even where strict mode raises)
        fall_back(f"compiling {self.what}", err, "running it eagerly")


def what_ran(compiled: Compiled | None, graphs: bool, graphed: GraphedStep[Any] | None) -> str:
    """What a step ran: ``eager``, ``compiled`` or ``eager (compile failed: ...)``, and with
    ``graphs`` ``graphed``, ``not captured yet`` or ``uncaptured (capture failed: ...)``."""
    ran = "eager" if compiled is None else compiled.ran
    if graphs:
        ran += f", {'not captured yet' if graphed is None else graphed.ran}"
    return ran


class GraphedStep(Generic[T]):
    """``step()`` captured as one CUDA graph, then replayed on every call.

    ``step`` must read and write only tensors that stay where they are (buffers, parameters,
    optimizer state) and never wait for the device. The first ``warmup`` calls run it
    uncaptured (on CUDA on a side stream: the optimizer makes its state, allocations settle),
    the next one captures it and replays the capture, and so does every later call. Its
    return value is the capture's outputs, overwritten by each replay. ``generators`` are the
    generators ``step`` draws from: registered with the graph, each replay advances them.

    A capture that fails (an operation a CUDA graph cannot hold; on a CPU, always) leaves the
    stream as it was, then goes through :func:`fall_back`: strict mode raises, otherwise the
    step runs uncaptured from then on.
    """

    def __init__(
        self,
        step: Callable[[], T],
        generators: Sequence[torch.Generator],
        device: torch.device,
        what: str = "the step",
        warmup: int = 3,
    ) -> None:
        self.step, self.generators, self.device = step, list(generators), device
        self.what, self.warmup = what, warmup
        self.calls = 0
        self.replays = 0  # calls served by a replay of the captured graph
        self.graph: torch.cuda.CUDAGraph | None = None
        self.failure: str | None = None  # why capturing failed (the step then runs uncaptured)
        self._out: T | None = None

    @property
    def ran(self) -> str:
        """``graphed``, ``not captured yet`` or ``uncaptured (capture failed: <cause>)``."""
        if self.failure is not None:
            return f"uncaptured (capture failed: {self.failure})"
        return "graphed" if self.graph is not None else "not captured yet"

    def __call__(self) -> T:
        if self.graph is None:
            if self.calls < self.warmup or self.failure is not None:
                return self._uncaptured()
            self._try_capture()
            if self.graph is None:
                return self._uncaptured()
        assert self._out is not None
        self.graph.replay()
        self.replays += 1
        return self._out

    def _uncaptured(self) -> T:
        self.calls += 1
        if self.device.type != "cuda":
            return self.step()
        side = torch.cuda.Stream(self.device)
        side.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(side):
            out = self.step()
        torch.cuda.current_stream(self.device).wait_stream(side)
        return out

    def _try_capture(self) -> None:
        stream = torch.cuda.current_stream(self.device) if self.device.type == "cuda" else None
        try:
            self._capture()
        except Exception as err:
            if stream is not None:  # (the capture's own context restores it; made certain)
                torch.cuda.set_stream(stream)
            self._out = None
            self.failure = reason(err)  # (uncaptured from now on, even where strict raises)
            fall_back(f"capturing {self.what} as a CUDA graph", err, "running it uncaptured")

    def _capture(self) -> None:
        """Record ``step`` into a new graph on a side stream (as ``torch.cuda.graph`` does,
        written out so that a failure inside reports its own cause and always leaves the
        capture ended and the caller's stream current)."""
        if self.device.type != "cuda":
            raise RuntimeError(f"CUDA graphs need a CUDA device, not {self.device}")
        graph = torch.cuda.CUDAGraph()
        with warnings.catch_warnings():
            # torch 2.11 draws from a generator of one's own inside a capture only once it is
            # registered with the graph; later torch registers it at its first use there and
            # deprecates the call, which then changes nothing.
            warnings.simplefilter("ignore", (DeprecationWarning, FutureWarning))
            for gen in self.generators:
                graph.register_generator_state(gen)
        torch.cuda.synchronize(self.device)  # (as torch.cuda.graph: nothing else in flight)
        with torch.cuda.stream(torch.cuda.Stream(self.device)):  # restored on the way out
            graph.capture_begin()
            try:
                out = self.step()  # recorded, not run: __call__ replays it
            except BaseException:
                with contextlib.suppress(Exception):  # (the capture is void; its error says
                    graph.capture_end()  # less than the step's own)
                raise
            graph.capture_end()
        self._out, self.graph = out, graph


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
