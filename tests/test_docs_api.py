"""The API reference lists every exported name: docs/conf.py generates it from each public
module's ``__all__``, and this test checks that the listing covers them and the page asks for it."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from pathlib import Path
from types import ModuleType

import dpfreq

ROOT = Path(__file__).resolve().parents[1]


def _conf() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dpfreq_docs_conf", ROOT / "docs" / "conf.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Modules with an ``__all__`` that are not public namespaces of the library (the reason is the
#: comment beside each); every other non-underscore module with an ``__all__`` must be listed.
NOT_IN_REFERENCE = {
    "dpfreq.cli": "the command line, documented by `dpfreq --help`",
    "dpfreq.server": "the collection service, documented by service.md",
    "dpfreq.order_stats": "helpers of the anonymized and profile intervals",
    "dpfreq.pipeline": "the order in which every central release runs its steps (internal)",
    "dpfreq.plotting": "helpers behind the releases' plot() methods",
    "dpfreq.progress": "the CLI's progress bars",
    "dpfreq.resources": "memory checks behind the releases",
}


def test_every_exported_name_is_listed() -> None:
    conf = _conf()
    listed = {f"{m}.{n}" for m, names in conf.api_entries().items() for n in names}
    objects = {id(getattr(importlib.import_module(m), n.rsplit(".", 1)[-1]))
               for m, names in conf.api_entries().items() for n in names}
    missing = []
    for name in conf.API_MODULES:
        module = importlib.import_module(name)
        for attr in module.__all__:
            obj = getattr(module, attr)
            if attr.startswith("__"):
                continue
            if f"{name}.{attr}" not in listed and id(obj) not in objects:
                missing.append(f"{name}.{attr}")
    assert not missing, f"exported but not in the API reference: {missing}"
    assert len(listed) >= len(dpfreq.__all__) - 1  # every top-level name but __version__


def test_every_public_module_is_in_the_reference() -> None:
    conf = _conf()
    public = set()
    for info in pkgutil.iter_modules(dpfreq.__path__, "dpfreq."):
        if info.name.rsplit(".", 1)[-1].startswith("_") or info.name in NOT_IN_REFERENCE:
            continue
        if hasattr(importlib.import_module(info.name), "__all__"):
            public.add(info.name)
    assert public <= set(conf.API_MODULES), sorted(public - set(conf.API_MODULES))


def test_the_page_holds_the_generated_listing() -> None:
    conf = _conf()
    page = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    assert page.count(conf.API_MARKER) == 1
    listing = conf.api_listing()
    assert "dpfreq.release_profile" in listing
    assert "dpfreq.noise.sample_discrete_laplace" in listing
