"""The sweep's one table across trials (``sweep.json``, ``summary.md``) and its Pareto plots: the
main metric against throughput and against size, the dominated trials greyed."""

from __future__ import annotations

import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from tinyplm.config.sweep import Objective, SweepSpace
from tinyplm.files import write_atomic, write_json_atomic
from tinyplm.sweep.space import TrialPlan, short_value
from tinyplm.sweep.trial import TrialResult

log = logging.getLogger(__name__)

Status = Literal["finished", "failed", "not run"]
SCHEMA = 1


@dataclass(frozen=True)
class TrialRow:
    """One planned trial and how it ended: its result, or the error that failed it (after its
    retries), or ``not run`` (the sweep's budget ran out first); never left out."""

    key: str
    label: str
    values: dict[str, Any]
    status: Status
    result: TrialResult | None = None
    error: str | None = None
    pareto: bool = False  # no other finished trial is at least as good on every objective and better on one


def dominated(a: TrialResult, b: TrialResult, objectives: list[Objective]) -> bool:
    """Whether ``b`` dominates ``a``: at least as good on every objective, better on one."""
    better = False
    for o in objectives:
        x, y = getattr(a, o.metric), getattr(b, o.metric)
        if x is None or y is None or (isinstance(x, float) and math.isnan(x)):
            return y is not None and x is None
        sign = 1 if o.mode == "max" else -1
        if sign * (y - x) < 0:
            return False
        better = better or sign * (y - x) > 0
    return better


def with_front(rows: list[TrialRow], objectives: list[Objective]) -> list[TrialRow]:
    """``rows`` with ``pareto`` set on the finished trials no other finished trial dominates."""
    done = [r.result for r in rows if r.result is not None]
    out = []
    for r in rows:
        front = r.result is not None and not any(dominated(r.result, o, objectives) for o in done if o is not r.result)
        out.append(TrialRow(**{**r.__dict__, "pareto": front}))
    return out


def rows_of(plans: list[TrialPlan], results: dict[str, TrialResult], errors: dict[str, str],
            objectives: list[Objective]) -> list[TrialRow]:
    """One row per planned trial, in plan order (a trial both failed and then finished on a retry
    counts as finished)."""
    rows = []
    for p in plans:
        if p.key in results:
            rows.append(TrialRow(p.key, p.label, p.values, "finished", result=results[p.key]))
        elif p.key in errors:
            rows.append(TrialRow(p.key, p.label, p.values, "failed", error=errors[p.key]))
        else:
            rows.append(TrialRow(p.key, p.label, p.values, "not run"))
    return with_front(rows, objectives)


@dataclass(frozen=True)
class SettingRow:
    """One setting of a sweep with ``repeats`` (the trials whose values differ only in those keys):
    its finished trials' mean and sample standard deviation (0 for one trial) of the main metric,
    their mean throughput and ``speedup`` (None where a trial had none), and how many of its
    planned trials finished."""

    label: str
    values: dict[str, Any]
    planned: int
    finished: int
    primary_mean: float | None
    primary_std: float | None
    throughput_mean: float | None
    speedup_mean: float | None


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def settings_of(rows: list[TrialRow], repeats: list[str]) -> list[SettingRow]:
    """The rows grouped by their values without the ``repeats`` keys, in first-seen order."""
    groups: dict[str, list[TrialRow]] = {}
    for r in rows:
        values = {k: v for k, v in r.values.items() if k not in repeats}
        groups.setdefault(json.dumps(values, sort_keys=True, default=str), []).append(r)
    out = []
    for members in groups.values():
        values = {k: v for k, v in members[0].values.items() if k not in repeats}
        done = [m.result for m in members if m.result is not None and not math.isnan(m.result.primary)]
        primary = [d.primary for d in done]
        mean = _mean(primary)
        std = math.sqrt(sum((x - mean) ** 2 for x in primary) / (len(primary) - 1)) if len(primary) > 1 else \
            (0.0 if primary else None)
        speedups = [d.speedup for d in done if d.speedup is not None]
        out.append(SettingRow(", ".join(f"{k}={short_value(v)}" for k, v in values.items()) or "(all)", values,
                              len(members), len(done), mean, std, _mean([d.throughput for d in done]),
                              _mean(speedups) if len(speedups) == len(done) else None))
    return out


def _setting_cell(s: SettingRow) -> list[str]:
    if s.primary_mean is None:
        return [s.label, f"{s.finished} of {s.planned}", "", "", ""]
    speedup = f"{s.speedup_mean:.2f}x" if s.speedup_mean is not None else ""
    return [s.label, f"{s.finished} of {s.planned}", f"{s.primary_mean:.4f} ± {s.primary_std:.4f}",
            f"{s.throughput_mean:,.1f}", speedup]


def _cell(r: TrialRow) -> list[str]:
    res = r.result
    if res is None:
        return [r.key, r.label, r.status, "", "", "", "", "", "", (r.error or "")[:120]]
    retention = f"{res.retention:.1%}" if res.retention is not None else ""
    speedup = f"{res.speedup:.2f}x" if res.speedup is not None else ""
    return [r.key, r.label, r.status + (" (Pareto)" if r.pareto else ""), f"{res.primary:.4f}", retention,
            f"{res.throughput:,.1f}", speedup, f"{res.latency_ms:.2f}", f"{res.disk_bytes / 1e6:.2f}", res.stage]


def summary_markdown(space: SweepSpace, rows: list[TrialRow], metric: str, note: str | None = None) -> str:
    """The table as markdown, one line per trial (after ``note``, when given, on its own line)."""
    head = ["trial", "values", "status", metric, "of teacher", "sent/s", "x teacher", "p50 ms (b1)", "MB",
            "stage / error"]
    lines = [f"# Sweep {space.name}", "",
             f"{sum(r.status == 'finished' for r in rows)} of {len(rows)} trials finished; "
             f"{sum(r.status == 'failed' for r in rows)} failed; {sum(r.status == 'not run' for r in rows)} not run.",
             *([f"{note}."] if note else []), "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cell(r)) + " |" for r in rows]
    if space.repeats:
        head = ["setting", "finished", f"{metric} (mean ± std)", "sent/s (mean)", "x teacher (mean)"]
        lines += ["", f"## By setting, over {', '.join(space.repeats)}", "",
                  "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _setting_cell(st)) + " |"
                  for st in settings_of(rows, space.repeats)]
    return "\n".join(lines) + "\n"


def write_table(space: SweepSpace, rows: list[TrialRow], sweep_dir: Path, metric: str,
                note: str | None = None) -> Path:
    """Write ``sweep.json``, ``summary.md`` and the two Pareto plots; returns the JSON's path.

    A table never replaces one that has a trial finished that this one plans but lacks (a trial
    that could not be read back): then this table goes to ``sweep_dir/LATEST`` and the earlier one
    stays, and a warning on the log says so."""
    lost = lost_trials(sweep_dir / "sweep.json", rows)
    if lost:
        log.warning("%s holds finished trials this attempt did not finish (%s); kept it, and wrote this attempt's "
                    "table to %s", sweep_dir / "sweep.json", ", ".join(lost), sweep_dir / LATEST)
        sweep_dir = sweep_dir / LATEST
    sweep_dir.mkdir(parents=True, exist_ok=True)
    data = {"schema": SCHEMA, "name": space.name, "metric": metric, "space": space.model_dump(mode="json"),
            "note": note, "trials": [{**asdict(r), "result": asdict(r.result) if r.result else None} for r in rows],
            "settings": [asdict(st) for st in settings_of(rows, space.repeats)] if space.repeats else []}
    path = sweep_dir / "sweep.json"
    write_json_atomic(path, data)
    write_atomic(sweep_dir / "summary.md", summary_markdown(space, rows, metric, note))
    for x, label, name in (("throughput", "sentences/s, batch 32 (log)", "pareto_throughput.png"),
                           ("disk_bytes", "size on disk, MB (log)", "pareto_size.png")):
        pareto_plot(rows, x, label, metric, sweep_dir / name)
    return path


#: The folder of a table that would have replaced one with more finished trials.
LATEST = "latest-attempt"


def lost_trials(path: Path, rows: list[TrialRow]) -> list[str]:
    """The trials the table at ``path`` lists as finished that ``rows`` plans but not as finished."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
        done = {t["key"] for t in old["trials"] if t.get("status") == "finished"}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return [r.key for r in rows if r.key in done and r.status != "finished"]


def pareto_plot(rows: list[TrialRow], x: str, xlabel: str, metric: str, path: Path) -> Path:
    """The main metric against ``x`` (a :class:`TrialResult` field): trials on the front (over
    the main metric and ``x``) in colour and labelled, the dominated ones grey."""
    from tinyplm.report.plots import new_figure, save_figure

    done = [r.result for r in rows if r.result is not None]
    pair = [Objective(metric="primary", mode="max"),
            Objective(metric=x, mode="max" if x == "throughput" else "min")]  # type: ignore[arg-type]
    scale = 1e6 if x == "disk_bytes" else 1.0
    fig, ax = new_figure(8.0, 5.0)
    for res in done:
        front = not any(dominated(res, o, pair) for o in done if o is not res)
        ax.scatter(getattr(res, x) / scale, res.primary, s=36 if front else 20, zorder=3,
                   color="#2a7f62" if front else "#bbbbbb")
        if front:
            ax.annotate(res.key, (getattr(res, x) / scale, res.primary), fontsize=7, xytext=(4, 2),
                        textcoords="offset points")
    if done:
        ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(f"dev {metric}")
    ax.set_title(f"{len(done)} finished trials: {metric} against {xlabel.split(',')[0]} (grey: dominated)")
    return save_figure(fig, path)
