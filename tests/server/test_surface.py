"""The service's modules: sorted ``__all__`` naming existing objects, star-import works, and
``import dpfreq`` does not import the service."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import dpfreq.server

MODULES = sorted(m.name for m in pkgutil.walk_packages(dpfreq.server.__path__, "dpfreq.server.")
                 if ".migrations" not in m.name)


def test_every_module_has_a_sorted_all_of_existing_names():
    assert "dpfreq.server.routes" in MODULES
    for name in ["dpfreq.server", *MODULES]:
        mod = importlib.import_module(name)
        assert list(mod.__all__) == sorted(mod.__all__), name
        assert all(hasattr(mod, n) for n in mod.__all__), name
        namespace: dict[str, object] = {}
        exec(f"from {name} import *", namespace)
        assert set(mod.__all__) <= set(namespace), name


def test_import_dpfreq_does_not_import_the_service():
    code = ("import sys, dpfreq, dpfreq.cli.main; "
            "print(any(m.startswith(('dpfreq.server', 'fastapi', 'sqlalchemy')) "
            "for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
