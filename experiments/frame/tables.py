"""The markdown tables the experiments write beside their JSON (assets/EXPERIMENT/NAME.md), and
the cells several of them share: an IQM with its bootstrap interval, the runs that solved a task with
their Wilson interval, and the training time per run.

A table is its caption (a paragraph, then a blank line), its header and rule, and a line per row:

    Greedy success ... IQM over seeds [95% bootstrap CI].

    | model | success: IQM [95% CI] | training time per run |
    |---|---|---|
    | lstm | 0.98 [0.95, 1.00] | 3.1 min |
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np


def table_row(cells: Sequence[object]) -> str:
    """One line of a markdown table: "| a | b |"."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def markdown_table(columns: Sequence[str], rows: Iterable[Sequence[object]], caption: str | None = None) -> str:
    """The table of `rows` (cells, one per column) under `columns`, after `caption` where given;
    it ends in a newline."""
    lines = [] if caption is None else [caption + "\n"]
    lines += [table_row(columns), "|" + "---|" * len(columns)]
    for row in rows:
        if len(row) != len(columns):
            raise ValueError(f"a row of {len(row)} cells under {len(columns)} columns {list(columns)}: {list(row)}")
        lines.append(table_row(row))
    return "\n".join(lines) + "\n"


def format_interval(stats: dict[str, float], digits: int = 2) -> str:
    """An iqm_interval result (experiments/frame/stats.py) as a cell: "IQM [low, high]"."""
    return f"{stats['iqm']:.{digits}f} [{stats['ci_low']:.{digits}f}, {stats['ci_high']:.{digits}f}]"


def format_solved(solved: dict[str, float]) -> str:
    """A solved_interval result (experiments/frame/stats.py) as a cell: "k of n, p [low, high]",
    the runs that solved the task and the probability that one does."""
    return f"{solved['solved']} of {solved['runs']}, {solved['solved'] / solved['runs']:.2f} [{solved['ci_low']:.2f}, {solved['ci_high']:.2f}]"


def minutes_per_run(seconds: Iterable[float]) -> str:
    """The mean of the runs' training `seconds` as a cell: "3.1 min"."""
    return f"{np.mean(list(seconds)) / 60:.1f} min"
