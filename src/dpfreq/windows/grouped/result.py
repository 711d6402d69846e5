"""The grouped window release: one :class:`~dpfreq.windows.WindowCountsRelease` per public group.

Every group's release is an ordinary window release built from that group's exact summaries
on a copy of one plan calibrated from public parameters, its node noise drawn for all groups
at once from one keyed source per tree (:mod:`dpfreq.windows.grouped.noise`); so it answers
any window (``rel["c7"].window(...)``) as post-processing. :meth:`GroupedWindowRelease.save`
writes every group's private state to one checksummed artefact;
:meth:`GroupedWindowRelease.load` rebuilds identical releases.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dpfreq.accounting.zcdp import zcdp_rho
from dpfreq.artifacts import read_artifact, write_artifact
from dpfreq.errors import DataError, public_errors
from dpfreq.grouped.bound_choice import BoundChoice
from dpfreq.grouped.capping import capping_statement, with_coverage
from dpfreq.grouped.driver import with_bound_choice, with_dropped
from dpfreq.grouped.dropped import DroppedFraction, release_epsilon
from dpfreq.grouped.result import GroupedRelease
from dpfreq.release import ErrorStatement
from dpfreq.windows.data.summaries import WindowSummaries
from dpfreq.windows.grouped.budget import group_epsilon
from dpfreq.windows.grouped.noise import GroupNoise
from dpfreq.windows.params import WindowBuild
from dpfreq.windows.persist import checked_load
from dpfreq.windows.result import WindowCountsRelease
from dpfreq.windows.state import WindowState, attach_state, build_plan

__all__ = ["GROUPED_KIND", "GroupedWindowRelease", "assemble", "calibrated_plan", "group_states"]

GROUPED_KIND = "grouped-window-release"
GROUPED_VERSION = 3  # 3: the keyed node noise of small γ changed (as in ARTIFACT_VERSION 2)
_GROUPED_KEYS = {"epsilon", "delta", "unit", "group_column", "max_groups_per_item", "groups",
                 "params"}


def calibrated_plan(build: WindowBuild, rho: float | None = None) -> Any:
    """The one plan of every group (public parameters only; ``rho``: each group's zCDP share
    when the groups compose in zCDP, :mod:`dpfreq.windows.grouped.budget`)."""
    return build_plan(build, rho)


def _plan_copy(plan: Any, node_noise: Any) -> Any:
    """A copy of an unattached plan whose structures a group may attach its key to, each
    drawing its node noise from ``node_noise`` (:mod:`dpfreq.windows.grouped.noise`).

    Each structure is copied shallowly: attaching binds the key, the band cache and the node
    noise to new attributes of the copy (``attach`` and every ``_draw`` rebind, none mutates a
    calibration array in place), so the copies share only the public calibration (shapes,
    laws, layouts, their caches and the plan's record of choices), which is the same for every
    group; a deep copy of those cost as much as the rest of a group's setup.
    """
    structures = {}
    for name, s in plan.structures.items():
        c = copy.copy(s)
        c.node_noise = node_noise
        structures[name] = c
    return dataclasses.replace(plan, structures=structures)


def group_states(summaries: list[WindowSummaries], keys: list[bytes],
                 build: WindowBuild, noise_key: bytes, plan: Any) -> list[WindowState]:
    """One state per group: the one calibrated ``plan`` (:func:`calibrated_plan`) is copied
    before each group's key is attached (the structures hold their group's noise once
    attached).

    The node noise of every group comes from one :class:`~dpfreq.windows.grouped.noise.
    GroupNoise` under ``noise_key``: each eager tree is drawn for all groups in one vectorised
    call, group ``g`` at its own counters. A group's own key seeds only its band simulation
    (below) and the streams of a structure that draws outside the node-noise hook.

    The band multipliers (:mod:`dpfreq.windows.structures.bands`) are computed once per call and
    shared:
    every group's structures are copies of one plan, so their node noise laws are the same,
    and a multiplier is a function of simulated draws only. The first group's simulation
    stream is derived from its key under the band's own name, independent of the data and of
    every group's node noise (drawn under the noise key), so it is exchangeable with each
    group's real noise and each group's band holds as if calibrated under its own key. It is
    reproduced on load (the first group's key is saved first).
    """
    shared = GroupNoise(noise_key, max(1, len(keys)))
    states = [attach_state(s, key=key, build=build,
                           plan=_plan_copy(plan, shared.for_group(g)))
              for g, (s, key) in enumerate(zip(summaries, keys, strict=True))]
    shared.drop_eager()  # each group keeps its own rows; later asks go to the keyed source
    for st in states[1:]:
        for name, s in st.structures.items():
            shared_c = getattr(states[0].structures[name], "_band_c", None)
            if shared_c is not None and hasattr(s, "_band_c"):
                s._band_c = shared_c
    return states


def _simultaneous(states: list[WindowState], conf: float) -> ErrorStatement:
    """Bonferroni over the groups and over the released curves of each group: every curve's band
    at ``1 − β/(G·C)`` (the band of one curve holds for all its T values at once).

    Every group's structures are copies of one plan, so their noise laws are the same and so are
    their exact half-widths; a band calibrated by simulation
    (:mod:`dpfreq.windows.structures.bands`) draws from a stream independent of every group's node
    noise, so the first group's calibration
    holds for each group's noise alike: it is computed once, on the first group's state.
    """
    b = states[0].build
    ks = list(b.k_values)
    curves = [w for w in b.windows if w != "all"]
    n_curves = max(1, len(curves) * len(ks))
    level = 1.0 - (1.0 - conf) / (len(states) * n_curves)
    worst = 0.0
    st = states[0]
    ts = np.arange(1, st.horizon + 1)
    for w in curves or ["all"]:
        t2 = ts[-1:] if w in ("total", "all") else ts
        t1 = np.ones_like(t2) if not isinstance(w, int) else np.maximum(1, ts - w + 1)
        for k in ks:
            structs = st.structures_for(k)
            if isinstance(w, int):
                structs = [s for s in structs if s.family != "rolling" or s.width == w]
            a = st.answer(t1, t2, k, level, structs)
            worst = max(worst, float(np.max(np.asarray(a.band_upper) - np.asarray(a.estimate))))
    what = "released curve values" if curves else "windows [1, T]"
    return ErrorStatement(kind="bound", confidence=conf, value=worst, description=(
        f"With probability at least {conf:.6g} every one of the {len(states)} groups' {what} "
        f"is within ±{worst:.6g} items of its true count: each group's band of each of its "
        f"{n_curves} curve(s) at level {level:.6g} (Bonferroni: union bound over groups and "
        "curves; the groups' noise laws are identical)."))


def _group_release(state: WindowState, name: str, extra: Mapping[str, Any]
                   ) -> WindowCountsRelease:
    rel = WindowCountsRelease.from_state(state)
    return dataclasses.replace(rel, mechanism_params={**rel.mechanism_params, **extra,
                                                      "group": name},
                               error=with_coverage(rel.error, extra["max_groups_per_item"]))


def assemble(states: list[WindowState], names: tuple[str, ...], grouped: dict[str, Any],
             noise_key: bytes, n_dropped: int = 0, build: WindowBuild | None = None
             ) -> GroupedWindowRelease:
    """The grouped release of per-group states (``grouped``: the fields of the whole call;
    ``noise_key``: the key of every group's node noise, :func:`group_states`; ``build``: the
    per-group build arguments, needed when no group was selected)."""
    b = states[0].build if states else build
    assert b is not None
    extra = {"group_column": grouped["group_column"],
             "max_groups_per_item": grouped["max_groups_per_item"],
             "coverage": capping_statement(grouped["max_groups_per_item"]),
             "epsilon_per_group": b.epsilon, "delta_per_group": b.delta}
    states = [dataclasses.replace(st, coverage=extra["coverage"]) for st in states]
    releases = {n: _group_release(st, n, extra) for n, st in zip(names, states, strict=True)}
    conf = b.confidence
    sim = with_coverage(_simultaneous(states, conf) if states else ErrorStatement(
        kind="bound", confidence=conf, value=0.0, description=(
            "No group was released (none passed the private partition selection), so there "
            "is nothing to bound.")), grouped["max_groups_per_item"])
    return GroupedWindowRelease(
        releases=releases, epsilon=float(grouped["epsilon"]), delta=float(grouped["delta"]),
        unit=grouped["unit"], mechanism="grouped-ghazi-kumar-manurangsi-nelson-windows",
        mechanism_params=dict(grouped["params"]), simultaneous=sim, seeded=b.seeded,
        group_column=grouped["group_column"], _grouped=grouped, _n_dropped=int(n_dropped),
        _noise_key=noise_key)


@dataclass(frozen=True, repr=False)
class GroupedWindowRelease(GroupedRelease):
    """Window counts of every public group, spent once (:func:`release_window_counts` with
    ``group=``).

    ``rel["c7"]`` is an ordinary :class:`~dpfreq.windows.WindowCountsRelease` (its
    ``epsilon`` is the per-group budget): ask it any released window, e.g.
    ``rel["c7"].window(1, 7, 1)``. Events dropped as out of range are counted for the whole
    call only (:attr:`n_dropped`; each group's own ``n_dropped`` is 0). ``to_pandas()`` is
    every group's :meth:`table` with a group column; :meth:`save` / :meth:`load` keep every
    group's private state so later windows can be asked per group.

    Examples
    --------
    >>> from dpfreq.windows import release_window_counts
    >>> log = {"user": [1, 1, 2, 3], "site": ["a", "b", "a", "b"], "day": [1, 2, 2, 1]}
    >>> rel = release_window_counts(log, item="user", time="day", horizon=2, epsilon=1.0,
    ...                             unit="item", k_values=[1], group="site",
    ...                             groups=["a", "b"], max_groups_per_item=2, rng=0,
    ...                             windows=["cumulative"])
    >>> rel.groups, rel["a"].epsilon, rel.epsilon
    (('a', 'b'), 0.5, 1.0)
    >>> list(rel.to_pandas().columns[:3])
    ['site', 'window', 'k']
    """

    _grouped: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    _n_dropped: int = field(default=0, repr=False, compare=False)
    _noise_key: bytes = field(default=b"", repr=False, compare=False)

    @property
    def n_dropped(self) -> int:
        """Events of listed groups dropped as out of range (curator-side, not private)."""
        return self._n_dropped

    def to_pandas(self) -> Any:
        """Tidy table: every group's released curves (:meth:`WindowCountsRelease.table`), one
        row per (group, window family, k, end), group column first; ``attrs`` holds ε, δ, the
        unit, the mechanism, the confidence, the grouping, the time zone and
        :attr:`n_dropped`."""
        import pandas as pd

        frames = []
        for name, rel in self.releases.items():
            tab = pd.DataFrame(rel.table())
            tab.insert(0, self.group_column, name)
            frames.append(tab)
        if not frames:  # no group passed the selection
            frame = pd.DataFrame({c: [] for c in (self.group_column, "window", "k", "start",
                                                  "end", "estimate", "lower", "upper")})
        else:
            frame = pd.concat(frames, ignore_index=True)
        frame.attrs.update(self._attrs())
        first: Any = next(iter(self.releases.values()), None)
        if first is not None:
            frame.attrs.update(confidence=first.error.confidence, n_dropped=self.n_dropped,
                               start_end="start and end: the first and last period of each "
                                         "window, both included")
            if first.time_axis.get("kind") == "timestamp":
                frame.attrs["timezone"] = first.time_axis["timezone"]
        return frame

    def _size(self, name: str) -> float:
        """The released reach :meth:`plot` sorts by (post-processing): the total ``[1, T]``
        at the smallest k, else the last cumulative value, else the largest rolling value,
        else the all-windows answer for ``[1, T]``."""
        rel = self.releases[name]
        k = min(rel.k_values)  # type: ignore[attr-defined]
        value = rel.value
        for label in ("total", "cumulative"):
            if label in value:
                return float(np.asarray(value[label][k])[-1])
        if value:
            return float(max(np.max(np.asarray(v[k])) for v in value.values()))
        horizon = rel.horizon  # type: ignore[attr-defined]
        return float(rel.window(1, horizon, k).estimate)  # type: ignore[attr-defined]

    def plot(self, *, max_panels: int = 12, max_bars: int = 50) -> Any:
        """Every group's released reach, largest first (sorted by a released value:
        post-processing); the figure's title states ε, δ, the unit, the confidence and which
        groups are drawn.

        A release of totals alone is one bar chart: each group's total ``[1, T]`` with its
        interval as an error bar, one bar per k, at most ``max_bars`` groups. Otherwise small
        multiples, at most ``max_panels`` groups: each group's curves with their bands (and its
        total as a point with its interval), titled by the group and marked when the group is
        smaller than its noise (:attr:`WindowCountsRelease.error.vacuous`).

        Returns
        -------
        matplotlib.figure.Figure
        """
        from dpfreq.plotting import (
            figure_legend,
            group_figure,
            group_note,
            interval_bars,
            privacy_title,
            pyplot,
        )

        names = sorted(self.releases, key=lambda g: -self._size(g))
        first: Any = next(iter(self.releases.values()), None)
        conf = self.simultaneous.confidence if first is None else first.error.confidence
        title = privacy_title(f"Reach per {self.group_column}", epsilon=self.epsilon,
                              delta=self.delta, unit=self.unit, confidence=conf)
        per = "" if first is None else f"; ε={first.epsilon:.3g} per group"
        order = "largest released reach"
        if first is not None and list(first.value) == ["total"]:
            drawn = names[:max_bars]
            note = group_note(len(drawn), len(names), what="groups", order=order,
                              option="max_bars")
            ks = first.k_values
            fig, ax = pyplot().subplots(figsize=(7.5, 1.2 + 0.28 * len(drawn) * len(ks)))
            def column(part: str, k: int) -> list[float]:
                return [float(np.asarray(_total_at(self.releases[g], part, k))[0])
                        for g in drawn]

            series = [(f"{k}+ reach", column("value", k), column("error.lower", k),
                       column("error.upper", k)) for k in ks]
            interval_bars(ax, [f"{g} *" if self.releases[g].error.vacuous else str(g)
                               for g in drawn], series,
                          xlabel=f"items reached in {_span(first)} (noisy estimate and "
                                 f"{conf:.0%} interval)")
            ax.set_ylabel(f"{self.group_column} (* smaller than its noise)"
                          if any(self.releases[g].error.vacuous for g in drawn)
                          else str(self.group_column))
            ax.set_title(f"{title}{per}\n{note}", fontsize=10)
            fig.tight_layout()
            return fig
        fig, axes, drawn, note = group_figure(names, max_panels, what="groups", order=order)
        for ax, name in zip(axes, drawn, strict=False):
            rel = self.releases[name]
            rel.plot(ax=ax)
            small = " (smaller than its noise)" if rel.error.vacuous else ""
            ax.set_title(f"{self.group_column} = {name}{small}", fontsize=9)
        if not drawn:
            axes[0].text(0.5, 0.5, "no group was released", ha="center", va="center",
                         transform=axes[0].transAxes)
            axes[0].set_axis_off()
        fig.suptitle(f"{title}{per}\n{note}", fontsize=10)
        figure_legend(fig, axes)
        return fig

    def save(self, path: str | Path) -> Path:
        """Write every group's release **with its private state** (secret keys, exact
        summaries) to one checksummed artefact. Protect it like the raw data."""
        if not self.releases:
            raise DataError(f"path of {type(self).__name__}.save must name a file for a "
                            "release with at least one group; got a release without groups "
                            "(none passed the private partition selection).")
        states = [rel._state for rel in self.releases.values()]  # type: ignore[attr-defined]
        offsets = np.cumsum([0] + [st.summaries.slots.size for st in states]).astype(np.int64)
        arrays = {name: np.concatenate([st.summaries.to_arrays()[name] for st in states])
                  for name in ("summary_slots", "summary_keys", "summary_weights")}
        arrays["group_offsets"] = offsets
        meta = {"grouped": dict(self._grouped), "build": states[0].build.to_dict(),
                "keys": [st.key.hex() for st in states], "noise_key": self._noise_key.hex(),
                "summaries": states[0].summaries.meta(), "n_dropped": self._n_dropped}
        if self.dropped_fraction is not None:  # the measurement (its noisy sums), public
            meta["dropped_fraction"] = {k: v for k, v in self.dropped_fraction.to_dict().items()
                                        if k != "description"}
        if "bound_choice" in self.mechanism_params:  # max_groups_per_item="auto", public
            meta["bound_choice"] = {k: v for k, v in self.mechanism_params["bound_choice"].items()
                                    if k != "why"}
        return write_artifact(path, kind=GROUPED_KIND, version=GROUPED_VERSION, meta=meta,
                              arrays=arrays)

    @classmethod
    @public_errors("GroupedWindowRelease.load")
    def load(cls, path: str | Path) -> GroupedWindowRelease:
        """Read a file written by :meth:`save`: every group answers as before (same noise).

        Raises
        ------
        DataError
            Naming the file, for a missing, corrupted or edited file or any invalid field.
        """
        label = str(path)
        _, meta, arrays = read_artifact(path, kind=GROUPED_KIND, versions=(GROUPED_VERSION,))
        grouped, keys, offsets, noise_key, n_dropped = _check_grouped(label, meta, arrays)
        summaries, key_bytes, build = [], [], None
        for i, key in enumerate(keys):
            lo, hi = int(offsets[i]), int(offsets[i + 1])
            part = {n: arrays[n][lo:hi] for n in ("summary_slots", "summary_keys",
                                                  "summary_weights")}
            s, kb, build, _ = checked_load(label, {"build": meta["build"], "key": key,
                                                   "summaries": meta["summaries"]}, part)
            summaries.append(s)
            key_bytes.append(kb)
        assert build is not None
        dropped = None
        if "dropped_fraction" in meta:
            try:
                dropped = DroppedFraction.from_dict(meta["dropped_fraction"])
            except ValueError:
                raise DataError(f"{label} is not a valid dpfreq grouped window release file: "
                                "its dropped_fraction is malformed.") from None
        choice = None
        if "bound_choice" in meta:
            try:
                choice = BoundChoice.from_dict(meta["bound_choice"])
            except ValueError:
                choice = None
            if (choice is None or dropped is None or dropped.epsilon != choice.epsilon
                    or choice.chosen != grouped["max_groups_per_item"]):
                raise DataError(f"{label} is not a valid dpfreq grouped window release file: "
                                "its bound_choice is malformed.")
        rho = _check_budget(label, grouped, build,
                            0.0 if dropped is None else dropped.epsilon)
        plan = calibrated_plan(build, rho)
        rel = assemble(group_states(summaries, key_bytes, build, noise_key, plan),
                       tuple(grouped["groups"]), grouped, noise_key, n_dropped)
        rel = rel if dropped is None else with_dropped(rel, dropped)
        return rel if choice is None else with_bound_choice(rel, choice)


def _span(rel: Any) -> str:
    """The whole range ``[1, T]`` of a group's release, in its dates when it has them."""
    from dpfreq.windows.result_axis import period_bounds

    ts = np.array([1, rel.horizon])
    first, last = period_bounds(rel.time_axis, ts[:1], ts[1:])
    return f"[{first[0]}, {last[0]}]"


def _total_at(rel: Any, path: str, k: int) -> Any:
    """``rel.value["total"][k]`` for ``path="value"``, ``rel.error.lower["total"][k]`` for
    ``"error.lower"``: a group's total [1, T] at k."""
    obj = rel
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj["total"][k]


def _check_grouped(label: str, meta: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
                   ) -> tuple[dict[str, Any], list[str], np.ndarray, bytes, int]:
    """The grouped fields of a saved file, checked (each group's own fields are checked by
    :func:`~dpfreq.windows.persist.checked_load`); the last is the events dropped as out of
    range (0 in a file written before it was kept)."""
    def bad(what: str) -> DataError:
        return DataError(f"{label} is not a valid dpfreq grouped window release file: {what}.")

    if set(meta) - {"n_dropped", "dropped_fraction", "bound_choice"} != {
            "grouped", "build", "keys", "noise_key", "summaries"}:
        raise bad("its fields are incomplete")
    n_dropped = meta.get("n_dropped", 0)
    if not (isinstance(n_dropped, int) and not isinstance(n_dropped, bool) and n_dropped >= 0):
        raise bad("its n_dropped is not an integer >= 0")
    try:
        noise_key = bytes.fromhex(meta["noise_key"])
    except (TypeError, ValueError):
        noise_key = b""
    if len(noise_key) < 16:
        raise bad("its noise key is not a key of at least 16 bytes")
    g = meta["grouped"]
    if not isinstance(g, Mapping) or set(g) != _GROUPED_KEYS:
        raise bad("its grouped parameters are incomplete or unknown")
    names = g["groups"]
    if not isinstance(names, list) or not names or len(set(names)) != len(names) \
            or not all(isinstance(x, str) for x in names):
        raise bad("its group list is not a non-empty list of distinct names")
    m = g["max_groups_per_item"]
    if not (m is None or (isinstance(m, int) and not isinstance(m, bool) and m >= 1)):
        raise bad("its max_groups_per_item is not an integer >= 1")
    keys = meta["keys"]
    if not isinstance(keys, list) or len(keys) != len(names):
        raise bad("it does not hold one key per group")
    offsets = arrays.get("group_offsets")
    if offsets is None or offsets.dtype != np.int64 or offsets.shape != (len(names) + 1,) \
            or offsets[0] != 0 or np.any(np.diff(offsets) < 0) \
            or int(offsets[-1]) != arrays.get("summary_slots", np.zeros(0)).size:
        raise bad("its group offsets do not match its summaries")
    return dict(g), keys, offsets, noise_key, n_dropped


def _check_budget(label: str, grouped: Mapping[str, Any], build: WindowBuild,
                  capping_epsilon: float = 0.0) -> float | None:
    """The whole call's unit and budget agree with every group's; returns each group's ρ under
    zCDP accounting (:func:`~dpfreq.windows.grouped.budget.choose_budget`: pure, each group
    at ``(ε_r/m, δ_r/m)``; zCDP, ``m·ρ <= zcdp_rho(ε_r, δ_r)`` and each group at
    ``(ρ + 2√(ρ ln(1/δ_r)), δ_r)``; ``(ε_r, δ_r)`` is the call's budget less the selection's)."""
    def bad() -> DataError:
        return DataError(f"{label} is not a valid dpfreq grouped window release file: its "
                         "budget or unit does not match its groups'.")

    m = grouped["max_groups_per_item"] or 1
    params = grouped["params"] if isinstance(grouped["params"], Mapping) else {}
    sel = params.get("selection")
    rho = params.get("rho_per_group")
    if not (grouped["unit"] == build.unit in ("item", "event")
            and (grouped["max_groups_per_item"] is None) == (build.unit == "event")
            and isinstance(grouped["epsilon"], float) and isinstance(grouped["delta"], float)
            and (sel is None or (isinstance(sel, Mapping)
                                 and isinstance(sel.get("epsilon"), float)
                                 and isinstance(sel.get("delta"), float)))
            and (rho is None or (isinstance(rho, float) and math.isfinite(rho) and rho > 0))):
        raise bad()
    eps_r = (grouped["epsilon"] if not capping_epsilon else
             release_epsilon(grouped["epsilon"], capping_epsilon)) - (
        sel["epsilon"] if sel is not None else 0.0)
    delta_r = grouped["delta"] - (sel["delta"] if sel is not None else 0.0)
    if rho is None:
        want = {"epsilon": eps_r / m, "delta": delta_r / m}
    elif delta_r > 0 and m * rho <= zcdp_rho(eps_r, delta_r) * (1 + 1e-12):
        want = {"epsilon": group_epsilon(rho, delta_r), "delta": delta_r}
    else:
        raise bad()
    got = {x: getattr(build, x) for x in ("epsilon", "delta")}
    if not all(isinstance(got[x], float)
               and math.isclose(want[x], got[x], rel_tol=1e-12, abs_tol=0.0) for x in got):
        raise bad()
    return rho
