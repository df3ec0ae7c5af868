"""Tables for the terminal and for pipes: nothing a table shows is ever cut.

On a terminal a table fits the width: long cells wrap, and when even that cannot fit,
the least useful columns are left out (and a note says which). Piped output is plain
aligned text at full width, one row a line, for `grep`, `awk` and people alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

WRAP_MIN = 10
"""Narrowest a wrapping column is counted as when deciding what fits."""
GAP = 2
"""Columns are two spaces apart."""


@dataclass(frozen=True)
class Column:
    header: str
    wrap: bool = False
    """May wrap onto several lines (text, paths, errors); else always on one line (ids,
    times, numbers: what people copy or compare)."""
    drop: int = 0
    """0: always shown. Otherwise the order columns are left out in on a narrow
    terminal: the highest first."""
    justify: str = "left"


def print_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> None:
    rows = [[" ".join(cell.splitlines()) for cell in row] for row in rows]
    if not console.is_terminal:
        _print_plain(console, columns, rows)
        return
    widths = _fit(console.width, columns, rows)
    table = Table(
        box=None, pad_edge=False, padding=(0, GAP // 2), header_style="bold", highlight=False
    )
    for index, width in widths.items():
        column = columns[index]
        table.add_column(
            column.header,
            width=width,
            no_wrap=not column.wrap,
            overflow="fold",  # a cell is never cut: what does not fit wraps
            justify=column.justify,  # type: ignore[arg-type]
        )
    for row in rows:
        table.add_row(*(Text(row[index]) for index in widths))
    console.print(table)
    left_out = [column.header for i, column in enumerate(columns) if i not in widths]
    if left_out:
        console.print(
            Text(
                f"not shown at {console.width} columns: {', '.join(left_out)} "
                "(a wider terminal or a pipe shows every column)",
                style="dim",
            )
        )


def _natural(columns: Sequence[Column], rows: Sequence[Sequence[str]], index: int) -> int:
    return max([len(columns[index].header), *(len(row[index]) for row in rows)])


def _fit(width: int, columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> dict[int, int]:
    """Column index -> width, in column order, for the columns shown: one-line columns
    at their natural width, wrapping ones sharing what is left; the least useful columns
    are left out while even that does not fit."""
    natural = {i: _natural(columns, rows, i) for i in range(len(columns))}
    shown = list(natural)

    def least(i: int) -> int:
        return min(WRAP_MIN, natural[i]) if columns[i].wrap else natural[i]

    def room() -> int:
        return width - GAP * (len(shown) - 1)

    for index in sorted(
        (i for i, c in enumerate(columns) if c.drop), key=lambda i: -columns[i].drop
    ):
        if sum(least(i) for i in shown) <= room():
            break
        shown.remove(index)
    widths = {i: natural[i] for i in shown if not columns[i].wrap}
    wrapping = sorted((i for i in shown if columns[i].wrap), key=lambda i: natural[i])
    left = room() - sum(widths.values())
    for count, index in enumerate(wrapping):  # narrowest first: each takes its fair share
        share = max(1, left // (len(wrapping) - count))
        widths[index] = max(1, min(natural[index], share))
        left -= widths[index]
    return {i: widths[i] for i in shown}


def _print_plain(
    console: Console, columns: Sequence[Column], rows: Sequence[Sequence[str]]
) -> None:
    widths = [_natural(columns, rows, i) for i in range(len(columns))]
    for cells in [[c.header for c in columns], *rows]:
        padded = [
            cell.rjust(widths[i]) if columns[i].justify == "right" else cell.ljust(widths[i])
            for i, cell in enumerate(cells)
        ]
        line = (" " * GAP).join(padded).rstrip()
        console.out(line, highlight=False)  # never wrapped nor cropped
