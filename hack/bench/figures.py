"""How the benchmark summaries show a figure measured over several rounds, and where its results file came from."""

from __future__ import annotations

import statistics
from typing import Any

Figure = dict[str, Any]  # {"median", "min", "max", "n"}; min and max may be missing (not recorded)


def stat(values: list[float]) -> Figure | None:
    """What a results file keeps of a figure measured in several rounds; None for no values."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def show(figure: Figure | None, digits: int = 2, sep: bool = False, unit: str = "") -> str:
    """``median (min-max)``; the median alone for one round, when min-max was not recorded or when every round gave
    the same (as shown); ``-`` for none."""
    if figure is None:
        return "-"
    fmt = f"{',' if sep else ''}.{digits}f"
    text = format(figure["median"], fmt) + unit
    if figure.get("n") == 1 or figure.get("min") is None:
        return text
    low, high = format(figure["min"], fmt), format(figure["max"], fmt)
    return text if low == high == format(figure["median"], fmt) else f"{text} ({low}-{high})"


def source_line(name: str, data: dict[str, Any]) -> str:
    """The bullet naming a results file: its date, commit, rounds, machine and command (or where it was transcribed
    from)."""
    how = f"transcribed from its record in {data['transcribed_from']}" if data["provenance"] == "transcribed" \
        else f"`{data['command']}`"
    return (f"- {name}: {data['date']}, commit {data['commit']}, {data['rounds']} rounds, {data['machine']}; "
            f"{how}.")
