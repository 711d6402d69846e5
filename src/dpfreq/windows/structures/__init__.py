"""The noise structures of a window release: the protocol every structure implements
(:mod:`~dpfreq.windows.structures.protocol`), the shared base class and the registry
(:mod:`~dpfreq.windows.structures.base`), one module per family of structures (the cumulative
counters, :mod:`~dpfreq.windows.structures.counters`; rolling and arbitrary windows,
:mod:`~dpfreq.windows.structures.windows`; per-window Gaussian noise calibrated to (ε, δ),
:mod:`~dpfreq.windows.structures.gaussian_windows`), their band calibration
(:mod:`~dpfreq.windows.structures.bands`) and the chooser
(:mod:`~dpfreq.windows.structures.chooser`).

Importing this package registers the built-in structures, in the order ``auto`` tries them; a
new structure is one class decorated with :func:`register` (``docs/contributing.md``)."""

# register the built-ins, in the order ``auto`` tries them
from dpfreq.windows.structures import counters, windows  # noqa: I001, F401
from dpfreq.windows.structures import gaussian_windows  # noqa: F401  (needs windows)
from dpfreq.windows.structures.base import METHODS, Structure, build_structure, register, registry
from dpfreq.windows.structures.chooser import Plan, make_plan
from dpfreq.windows.structures.protocol import WindowStructure

__all__ = ["METHODS", "Plan", "Structure", "WindowStructure", "build_structure", "make_plan",
           "register", "registry"]
