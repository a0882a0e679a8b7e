"""Text the commands print: progress lines, durations, rates and the summary table."""

from __future__ import annotations

import click

__all__ = ["say", "table", "seconds", "rate"]


def say(quiet: bool, message: str = "", err: bool = True) -> None:
    """Progress text on stderr (nothing with --quiet)."""
    if not quiet:
        click.echo(message, err=err)


def table(title: str, rows: list[tuple[str, str]]) -> str:
    """``rows`` as ``key : value`` lines under ``title``, between rules."""
    width = max(len(k) for k, _ in rows)
    vwidth = max(len(v) for _, v in rows)
    line = "-" * (width + vwidth + 3)
    body = "\n".join(f"{k.ljust(width)} : {v}" for k, v in rows)
    return f"{title}\n{line}\n{body}\n{line}"


def seconds(s: float) -> str:
    """A duration for people: ``1.23 s``, or ``2.5 min`` from two minutes on."""
    return f"{s:.2f} s" if s < 120 else f"{s / 60:.1f} min"


def rate(n: float, elapsed: float) -> str:
    """Items per second, scaled: ``1.23 M``, ``4.5 K`` or ``12``."""
    per_s = n / max(elapsed, 1e-9)
    if per_s >= 1e6:
        return f"{per_s / 1e6:.2f} M"
    if per_s >= 1e3:
        return f"{per_s / 1e3:.1f} K"
    return f"{per_s:.0f}"
