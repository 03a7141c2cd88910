"""The library's shape: small files and functions, no import cycles, flows/ on its own."""

from __future__ import annotations

import ast
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), "..")
PACKAGES = ("mbrl", "flows")
# The size bounds, and why these numbers: docs/layout.md (Size).
FILE_LINES = 400  # a file's lines, at most (STYLE.md: files <~ 400)
FUNCTION_LINES = 80  # a function's lines, decorators and docstring included, at most


def _modules() -> dict[str, str]:
    """module name -> file path, for every module of the library."""
    out = {}
    for pkg in PACKAGES:
        for folder, _, files in os.walk(os.path.join(ROOT, pkg)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    out[rel.removesuffix(".__init__")] = path
    return out


def _imports(path: str, known: dict[str, str]) -> set[str]:
    """The library modules ``path`` imports anywhere (top level, functions, TYPE_CHECKING)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    found: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        found.update(n for n in names if n in known)
    return found


def _code_files() -> list[str]:
    """The library's modules and the scripts."""
    scripts = os.path.join(ROOT, "scripts")
    mine = [os.path.join(scripts, n) for n in sorted(os.listdir(scripts)) if n.endswith(".py")]
    return [*_modules().values(), *mine]


def test_no_file_over_the_file_bound() -> None:
    long: dict[str, int] = {}
    for path in _code_files():
        with open(path, encoding="utf-8") as f:
            n = sum(1 for _ in f)
        if n > FILE_LINES:
            long[os.path.relpath(path, ROOT)] = n
    assert not long, f"over {FILE_LINES} lines: {long}"


def _function_lines(source: str) -> dict[str, int]:
    """``name:line`` -> lines, for every function and method of ``source`` (nested ones too),
    from its first decorator to its last line."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[f"{node.name}:{node.lineno}"] = (node.end_lineno or node.lineno) - start + 1
    return out


def test_function_lines_count_from_the_decorator_to_the_last_line() -> None:
    source = (
        '@dec\ndef f(\n    x,\n):\n    """doc"""\n\n    def g():\n        return 1\n    return x\n'
    )
    assert _function_lines(source) == {"f:2": 9, "g:7": 2}


def test_no_function_over_the_function_bound() -> None:
    long: dict[str, int] = {}
    for path in _code_files():
        with open(path, encoding="utf-8") as f:
            found = _function_lines(f.read())
        rel = os.path.relpath(path, ROOT)
        long |= {f"{rel}:{k}": n for k, n in found.items() if n > FUNCTION_LINES}
    assert not long, f"over {FUNCTION_LINES} lines: {long}"


def test_no_file_name_twice_in_scripts_and_the_library() -> None:
    """A script and the library module it runs have different names (scripts/probe.py runs
    mbrl/tools/probing.py), so that a name finds one file."""
    scripts = {n for n in os.listdir(os.path.join(ROOT, "scripts")) if n.endswith(".py")}
    library = {os.path.basename(p) for p in _modules().values()}
    assert not scripts & library, sorted(scripts & library)


def test_no_import_cycles() -> None:
    known = _modules()
    graph = {m: _imports(p, known) - {m} for m, p in known.items()}
    # A package's __init__ re-exporting its own modules is not a cycle of theirs.
    for m in graph:
        graph[m] = {d for d in graph[m] if not m.startswith(d + ".")}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycle = [*stack[stack.index(d) :], d]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


# The layers, lowest first (docs/layout.md): a module imports from its own layer or lower
# ones, never from a higher one (function-level imports included).
LAYERS = (
    ("base", ("flows", "mbrl", "mbrl.config", "mbrl.registry", "mbrl.collectives",
              "mbrl.compiled", "mbrl.seeding", "mbrl.staging", "mbrl.schedule", "mbrl.buffer",
              "mbrl.optim", "mbrl.envs")),
    ("algorithm", ("mbrl.models", "mbrl.agents", "mbrl.rollout", "mbrl.rewarder",
                   "mbrl.collector", "mbrl.evaluator", "mbrl.model_side", "mbrl.mbpo",
                   "mbrl.batched_seeds")),
    ("runtime", ("mbrl.runtime",)),
    ("run", ("mbrl.run_state", "mbrl.trainer", "mbrl.seed_trainer")),
    ("entry", ("mbrl.overrides", "mbrl.launch", "mbrl.tools", "mbrl.bench")),
)  # fmt: skip


def _layer(module: str) -> int:
    """The layer of ``module``: that of the longest prefix listed."""
    best, level = "", -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, level = p, i
    assert level >= 0, f"{module} is in no layer of tests/test_layout.py"
    return level


def test_no_import_runs_up_the_layers() -> None:
    known = _modules()
    upward = []
    for m, path in known.items():
        for d in _imports(path, known):
            if _layer(d) > _layer(m):
                upward.append(f"{m} ({LAYERS[_layer(m)][0]}) imports {d} ({LAYERS[_layer(d)][0]})")
    assert not upward, "\n".join(sorted(upward))


def test_the_algorithm_imports_no_run_infrastructure() -> None:
    """mbpo.py, rollout.py, rewarder.py, collector.py, models/ and agents/ read as the
    algorithm alone: timers, progress, stop requests and process groups reach them as small
    objects or callables the trainer passes in."""
    known = _modules()
    algorithm = ("mbrl.mbpo", "mbrl.batched_seeds", "mbrl.model_side", "mbrl.rollout",
                 "mbrl.rewarder", "mbrl.collector", "mbrl.models", "mbrl.agents")  # fmt: skip
    for m, path in known.items():
        if m.startswith(algorithm):
            bad = [d for d in _imports(path, known) if d.startswith(("mbrl.runtime", "mbrl.tools"))]
            assert not bad, (m, bad)


def test_flows_never_imports_mbrl() -> None:
    known = _modules()
    for m, path in known.items():
        if m.startswith("flows"):
            assert not [d for d in _imports(path, known) if d.startswith("mbrl")], m


def test_the_layout_page_names_files_that_exist() -> None:
    """Every file or folder docs/layout.md names (the first word of a line) exists where it
    says, and every module of mbrl/ and flows/ at the top level is named."""
    with open(os.path.join(ROOT, "docs", "layout.md"), encoding="utf-8") as f:
        text = f.read()
    block = text.split("```", 2)[1]
    top, named = "", set()
    for line in block.splitlines():
        if not line.strip() or line.startswith(" " * 10):  # a continued description
            continue
        word = line.split()[0].rstrip(",:")
        if not line.startswith(" "):
            top = word
            path = word
        else:
            path = os.path.join(top, word)
        named.add(os.path.normpath(path))
        assert os.path.exists(os.path.join(ROOT, path)), f"docs/layout.md names {path}"
    for pkg in PACKAGES:
        for name in os.listdir(os.path.join(ROOT, pkg)):
            if (name.endswith(".py") and name != "__init__.py") or (
                os.path.isdir(os.path.join(ROOT, pkg, name)) and not name.startswith("__")
            ):
                rel = os.path.join(pkg, name)
                listed = any(n == rel or n.startswith(rel) for n in named)
                assert listed, f"{rel} not in docs/layout.md"


def test_the_files_the_library_and_docs_point_to_exist() -> None:
    """Every ``mbrl/...py`` or ``flows/...py`` path a library file, the README or the page on
    changing the code names (docs/benchmarks.md's history names files since removed)."""
    pages = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "docs", "model.md")]
    missing = []
    for path in [*_modules().values(), *pages]:
        with open(path, encoding="utf-8") as f:
            for named in re.findall(r"\b((?:mbrl|flows)/[\w/]+\.py)\b", f.read()):
                if not os.path.isfile(os.path.join(ROOT, named)):
                    missing.append(f"{os.path.relpath(path, ROOT)}: {named}")
    assert not missing, missing


def test_the_python_examples_of_the_docs_import_what_they_use() -> None:
    """In each python block of docs/model.md, the module or name a class derives from
    (``nn.Module``, ``SAC``) is imported or defined in the block."""
    with open(os.path.join(ROOT, "docs", "model.md"), encoding="utf-8") as f:
        blocks = re.findall(r"```python\n(.*?)```", f.read(), re.S)
    assert blocks
    for block in blocks:
        imported = re.findall(r"^from [\w.]+ import (.+)$|^import ([\w.]+)", block, re.M)
        known = {n.strip() for a, b in imported for n in (a or b).split(",")}
        known |= set(re.findall(r"^(?:class|def) (\w+)", block, re.M))
        bases = re.findall(r"^class \w+\(([\w.]+)\)", block, re.M)
        assert {b.split(".")[0] for b in bases} <= known, (bases, known)


def _heading_anchors(page: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped (letters,
    digits, ``_``, ``-`` and spaces kept), spaces as ``-``, a repeated one suffixed ``-1``, ..."""
    with open(page, encoding="utf-8") as f:
        text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
    seen: dict[str, int] = {}
    anchors = set()
    for title in re.findall(r"^#{1,6}\s+(.*?)\s*$", text, re.M):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_the_anchors_are_githubs() -> None:
    """The anchor rule against anchors GitHub gives (backticks, colons, dashes, a repeat)."""
    page = os.path.join(ROOT, "docs", "usage.md")
    anchors = _heading_anchors(page)
    assert "many-seeds-scriptsseedspy" in anchors  # "## Many seeds: `scripts/seeds.py`"
    assert "profiling-mode-where-does-the-time-go" in anchors
    hopper = _heading_anchors(os.path.join(ROOT, "docs", "hopper.md"))
    assert "earlier-seeds-02-to-16-000-on-the-cpu-2026-11-26" in hopper  # an en dash dropped


def test_the_docs_links_lead_somewhere() -> None:
    """Every relative link of the README and docs/ names a file that exists and, with
    ``#anchor``, a heading of that page."""
    docs = os.path.join(ROOT, "docs")
    pages = [os.path.join(ROOT, "README.md")] + [
        os.path.join(folder, n)
        for folder, _, names in os.walk(docs)
        for n in names
        if n.endswith(".md")
    ]
    broken = []
    for page in pages:
        with open(page, encoding="utf-8") as f:
            text = re.sub(r"```.*?```", "", f.read(), flags=re.S)
        for link in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", link):  # https:, mailto:
                continue
            path, _, anchor = link.partition("#")
            target = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(target):
                broken.append(f"{os.path.relpath(page, ROOT)}: {link} (no such file)")
            elif anchor and target.endswith(".md") and anchor not in _heading_anchors(target):
                broken.append(f"{os.path.relpath(page, ROOT)}: {link} (no such heading)")
    assert not broken, broken


def test_every_script_runs_its_own_checkouts_code(tmp_path: str) -> None:
    """A second checkout (a clone, a worktree) beside an editable install of another: each
    script imports the package of the checkout it lives in, not the installed one (here a
    stand-in package that says where it was imported from)."""
    import shutil
    import subprocess
    import sys

    scripts = os.path.join(tmp_path, "scripts")
    shutil.copytree(os.path.join(ROOT, "scripts"), scripts)
    for package in ("mbrl", "flows"):
        os.makedirs(os.path.join(tmp_path, package))
        with open(os.path.join(tmp_path, package, "__init__.py"), "w", encoding="utf-8") as f:
            f.write(f"raise SystemExit('{package} of the copy')\n")
    names = [n for n in sorted(os.listdir(scripts)) if n.endswith(".py") and n[0] != "_"]
    for name in names:
        done = subprocess.run(
            [sys.executable, os.path.join(scripts, name)], capture_output=True, text=True
        )
        assert done.stderr.strip().endswith("of the copy"), (name, done.stderr[-500:])
