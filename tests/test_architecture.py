"""Architecture: the import layers (cli → systems → engines → primitives), checked on the
source (``ast``), not on a run.

Layers, each importing only from its own layer or below::

    dpfreq (package facade), dpfreq.cli, dpfreq.server,       user surfaces
    dpfreq.resign (re-signs every system's saved state)
    dpfreq.profile, .anonymized, .windows, .longitudinal,     the systems
    .crossparty
    dpfreq.stream                                             built on .windows
    dpfreq.engines                                            where aggregates are computed
    every other top-level module (noise, rng, budget, ...)   primitives

Rules:

* a module imports nothing from a higher layer, and one system nothing from another system
  (except what ``BUILDS_ON`` declares: the stream builds on the windows' counters);
* a system reaches the engines only through the package ``dpfreq.engines`` (``get_engine`` and
  the protocol types re-exported there), never ``dpfreq.engines.<module>``;
* a private module (``_name``) is imported only from inside its own package (``dpfreq._validate``
  is a primitive of the whole package; ``dpfreq.engines._common`` belongs to the engines);
* no module imports a private name (``from x import _y``) from another module;
* no import cycles between modules (imports inside functions count too: a cycle is a design
  cycle even when Python tolerates it).

``ALLOWED`` lists the violations that exist in the tree while other work moves them away. It
must only shrink: a listed violation that no longer occurs fails the test, so the list is kept
exact.

Size limits, so that one change stays in one readable place: no module over ``MODULE_LIMIT``
physical lines, no function (method, nested function) over ``FUNCTION_LIMIT`` lines counted from
the line after its docstring (its first line when it has none) to its last line.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "dpfreq"
#: ``dpfreq.resign`` is the library's side of ``dpfreq resign``: it dispatches a key rotation to
#: each layer's own state (files and ledgers among the primitives, stream states in the stream)
SURFACES = ("cli", "server", "resign")
SYSTEMS = ("profile", "anonymized", "windows", "longitudinal", "crossparty", "stream")
#: systems built on another system's counters (the reach stream is the live form of the window
#: release's cumulative counters): they may import it, never the reverse (no cycle of systems)
BUILDS_ON = {"stream": ("windows",)}

#: (rule, importing module, imported module or name) -> why it is still there
ALLOWED: dict[tuple[str, str, str], str] = {}

#: physical lines of a module: a guide that says where to look, not where to cut. A module
#: past it is listed in LARGE_MODULES with why it is one concept (cohesion first); none may
#: pass MODULE_CAP
MODULE_LIMIT = 500
MODULE_CAP = 800
#: module (relative to src/dpfreq) -> why its size is one concept
LARGE_MODULES: dict[str, str] = {
    "windows/structures/base.py": "one base class: a structure's calibration, exact laws, bands, "
                            "keyed noise and measurement, shared by every method",
}
FUNCTION_LIMIT = 60  # lines of a function body after its docstring

def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES.get(name, Path()).name == "__init__.py"


@functools.cache
def _imports(name: str) -> tuple[tuple[str, str | None, int], ...]:
    """(imported module, imported name or None, line) for every dpfreq import in ``name``."""
    return tuple(_scan(name))


def _scan(name: str) -> Iterator[tuple[str, str | None, int]]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    package = name if _is_package(name) else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == PACKAGE:
                    yield alias.name, None, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != PACKAGE:
                continue
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    yield sub, None, node.lineno
                else:
                    yield base, alias.name, node.lineno


def _layer(module: str) -> tuple[int, str]:
    """(rank, group): 3 surfaces, 2 systems (group = the system), 1 engines, 0 primitives."""
    parts = module.split(".")
    if len(parts) == 1:
        return 3, "facade"
    if parts[1] in SURFACES:
        return 3, parts[1]
    if parts[1] in SYSTEMS:
        return 2, parts[1]
    if parts[1] == "engines":
        return 1, "engines"
    return 0, "primitives"


def _private_owner(module: str) -> str | None:
    """The package a private module belongs to (None for a public module)."""
    parts = module.split(".")
    for i, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:i])
    return None


@functools.cache
def violations() -> dict[tuple[str, str, str], str]:
    found: dict[tuple[str, str, str], str] = {}
    for name in MODULES:
        rank, group = _layer(name)
        for target, imported, line in _imports(name):
            where = f"{MODULES[name].relative_to(SRC)}:{line}"
            t_rank, t_group = _layer(target)
            if t_rank > rank or (t_rank == rank == 2 and t_group != group
                                 and t_group not in BUILDS_ON.get(group, ())):
                found[("layer", name, target)] = where
            if rank == 2 and target.startswith(f"{PACKAGE}.engines."):
                found[("engine door", name, target)] = where
            owner = _private_owner(target)
            if owner is not None and not (name == owner or name.startswith(owner + ".")):
                found[("private module", name, target)] = where
            if (imported is not None and imported.startswith("_")
                    and not imported.startswith("__") and target != name):
                found[("private name", name, f"{target}.{imported}")] = where
    for cycle in _cycles():
        found[("cycle", cycle[0], " -> ".join(cycle))] = "import graph"
    return found


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    graph = {name: sorted({t for t, _, _ in _imports(name) if t in MODULES and t != name})
             for name in MODULES}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_layering_violations() -> None:
    found = violations()
    new = {k: v for k, v in found.items() if k not in ALLOWED}
    assert not new, "import rules broken:\n" + "\n".join(
        f"  {rule}: {src} imports {what} ({where})" for (rule, src, what), where in new.items())


def test_allow_list_only_shrinks() -> None:
    """Every allowed violation still occurs: a fixed one must leave the list."""
    gone = sorted(set(ALLOWED) - set(violations()))
    assert not gone, f"fixed, remove from ALLOWED: {gone}"


def test_checker_sees_a_violation() -> None:
    """The checker itself: resolves relative imports and flags each rule on a known example."""
    assert _layer("dpfreq.engines.duckdb") == (1, "engines")
    assert _layer("dpfreq.windows.api") == (2, "windows")
    assert _private_owner("dpfreq.engines._common") == "dpfreq.engines"
    assert _private_owner("dpfreq._validate") == "dpfreq"
    assert _private_owner("dpfreq.engines.duckdb") is None
    assert ("dpfreq.engines.base", "Summarizing") in {(t, n) for t, n, _ in
                                                      _imports("dpfreq.engines")}
    assert ("dpfreq.engines.duckdb.engine", "DuckDBEngine") in {
        (t, n) for t, n, _ in _imports("dpfreq.engines.memory.engine")}
    assert ("dpfreq.engines", "dataframe_kind") not in {(t, n) for t, n, _ in
                                                        _imports("dpfreq.engines")}


# ----------------------------------------------------------------------------------------------
# size limits


def _function_sizes(source: str) -> Iterator[tuple[str, int, int]]:
    """(name, line of ``def``, lines after the docstring) of every function in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0]
            has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                       and isinstance(first.value.value, str))
            start = (first.end_lineno or first.lineno) + 1 if has_doc else first.lineno
            yield node.name, node.lineno, (node.end_lineno or node.lineno) - start + 1


def _module_lines() -> dict[str, int]:
    """Physical lines of every module, keyed by its path relative to src/dpfreq."""
    return {path.relative_to(SRC / PACKAGE).as_posix():
            len(path.read_text(encoding="utf-8").splitlines()) for path in MODULES.values()}


def test_modules_within_size_limit() -> None:
    lines = _module_lines()
    over = {name: n for name, n in lines.items()
            if n > MODULE_CAP or (n > MODULE_LIMIT and name not in LARGE_MODULES)}
    assert not over, (f"modules over {MODULE_LIMIT} lines (split them along one concept, or "
                      f"say in LARGE_MODULES why they are one; never over {MODULE_CAP}): {over}")
    stale = sorted(name for name in LARGE_MODULES if lines.get(name, 0) <= MODULE_LIMIT)
    assert not stale, f"LARGE_MODULES lists modules no longer large: {stale}"


def test_functions_within_size_limit() -> None:
    over = [f"{MODULES[name].relative_to(SRC)}:{line} {func} ({size} lines)"
            for name in MODULES
            for func, line, size in _function_sizes(MODULES[name].read_text(encoding="utf-8"))
            if size > FUNCTION_LIMIT]
    assert not over, (f"functions over {FUNCTION_LIMIT} lines after the docstring (split them "
                      "into helpers with one job each):\n  " + "\n  ".join(over))


def test_function_size_counts_from_after_the_docstring() -> None:
    """The counter itself: the docstring is not counted, blank lines and comments inside are,
    a function without a docstring counts from its first statement, nested ones separately."""
    source = (
        "def f(x):\n"
        "    \"\"\"Doc\n"
        "    on two lines.\"\"\"\n"
        "    y = x\n"
        "\n"
        "    # a comment\n"
        "    def g():\n"
        "        return y\n"
        "    return g\n"
        "\n"
        "\n"
        "async def h(): return 1\n"
    )
    assert sorted(_function_sizes(source)) == [("f", 1, 6), ("g", 7, 1), ("h", 12, 1)]
