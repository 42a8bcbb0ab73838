"""``fleetwright simulate --plot FILE.png``: each policy's nodes and $/h over the replay, beside the lower
bound's, drawn from the report's series (:class:`~fleetwright.local.simulate.report.Point`).

matplotlib is a development dependency: it is imported only when a plot is drawn, with the Agg backend
(no display needed). :func:`check_target` runs before the replay, so a bad path fails at once rather
than after a long replay.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fleetwright.local.simulate.report import Figures


class PlotError(ValueError):
    """A plot that cannot be drawn or written: the message says why."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise PlotError("--plot needs matplotlib (pip install -r requirements-dev.txt)") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot

    return pyplot


def check_target(path: str | Path) -> None:
    """Refuse, before any work, a path whose folder is missing or not writable, or that is a folder;
    and a missing matplotlib."""
    target = Path(path)
    folder = target.parent
    if target.is_dir():
        raise PlotError(f"cannot write the plot {str(path)!r}: it is a directory")
    if not folder.is_dir():
        raise PlotError(f"cannot write the plot {str(path)!r}: no directory {str(folder)!r}")
    if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise PlotError(f"cannot write the plot {str(path)!r}: permission denied")
    _pyplot()


def plot(rows: Sequence[Figures], path: str | Path, title: str = "") -> None:
    """Draw nodes (top) and $/h (bottom) over hours for each row with a series, as a PNG at ``path``."""
    pyplot = _pyplot()
    figure, (nodes, hourly) = pyplot.subplots(2, 1, sharex=True, figsize=(10, 6.5))
    try:
        for row in rows:
            if not row.series:
                continue
            hours = [point.at / 3600 for point in row.series]
            style = {"where": "post", "label": row.policy, "linewidth": 1.2}
            if row.bound:
                style.update(linestyle="--", color="black", linewidth=1.0)
            nodes.step(hours, [point.nodes for point in row.series], **style)
            hourly.step(hours, [point.hourly for point in row.series], **style)
        nodes.set_ylabel("nodes")
        hourly.set_ylabel("$/h")
        hourly.set_xlabel("hours from the trace's start")
        for axes in (nodes, hourly):
            axes.set_ylim(bottom=0)
            axes.grid(True, alpha=0.3)
        nodes.legend(loc="upper left")
        if title:
            nodes.set_title(title)
        figure.tight_layout()
        try:
            figure.savefig(path, format="png", dpi=100)
        except OSError as error:
            raise PlotError(f"cannot write the plot {str(path)!r}: {error.strerror or error}") from None
    finally:
        pyplot.close(figure)
