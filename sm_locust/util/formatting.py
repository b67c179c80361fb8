"""How sm-locust prints a figure: numbers, percentages, latencies, durations, money, missing values.

One home so that one figure reads the same on the report page, the sweep page, a progress line, a
gate verdict and the compare table; and so that a figure that is not there (None, NaN, infinity:
no CloudWatch datapoint, no price, no capacity found) prints as the one marker `MISSING` wherever
it shows, never as `nan`, `None`, `inf` or `$nan`.

Pure and dependency-free (no numpy or pandas import: `sm-locust serve` loads this module too);
numpy scalars are handled through the `numbers` ABCs they register with.
"""

from __future__ import annotations

import math
import numbers

MISSING = "n/a"


def is_missing(value: object) -> bool:
    """True for None and for a number that is not finite (NaN, +-inf): a figure with nothing to print."""
    if value is None:
        return True
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return not math.isfinite(value)
    return False


def _real(value: object) -> float:
    """A figure the caller checked is not missing, as a float; a TypeError naming it when it is not a number."""
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f"a figure must be a number, not {type(value).__name__} {value!r}")


def number(value: object, digits: int = 1, unit: str = "") -> str:
    """A figure for a table or a sentence: integers as they are, other numbers with `digits`
    decimals, both with thousands separators; booleans as yes/no; text unchanged.

    1234 -> '1,234'; 1234.56 -> '1,234.6'; (0.5, 2, ' %') -> '0.50 %'; None or NaN -> 'n/a'.
    """
    if is_missing(value):
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral):
        return f"{value:,}{unit}"
    if isinstance(value, numbers.Real):
        return f"{value:,.{digits}f}{unit}"
    return f"{value}{unit}"


def _trimmed(text: str) -> str:
    return text.rstrip("0").rstrip(".") if "." in text else text


def percent(fraction: object, digits: int = 1, *, unit: str = " %", trim: bool = False) -> str:
    """A fraction as a percentage with `digits` decimals; `trim` drops trailing zeros.

    0.075 -> '7.5 %'; (0.005, 2, unit='%') -> '0.50%'; (0.05, 2, unit='', trim=True) -> '5'.
    """
    if is_missing(fraction):
        return MISSING
    text = f"{_real(fraction) * 100:.{digits}f}"
    return (_trimmed(text) if trim else text) + unit


def compact(value: object, unit: str = "") -> str:
    """A value as the user wrote it, no padding: 250.0 -> '250', 0.125 -> '0.125' (thresholds, baselines)."""
    if is_missing(value):
        return MISSING
    return f"{value:g}{unit}"


def latency(value: object, unit: str = "") -> str:
    """A latency in a sentence: whole numbers from 100 up or when exact (thousands separated, as
    `number`'s), else three significant digits. 48.0 -> '48'; 12.345 -> '12.3'; 7100.0 -> '7,100'."""
    if is_missing(value):
        return MISSING
    figure = _real(value)
    return (f"{figure:,.0f}" if figure >= 100 or figure.is_integer() else f"{figure:.3g}") + unit


def money(value: object, digits: int = 2) -> str:
    """US dollars: (1234.5) -> '$1,234.50'; (0.25, 3) -> '$0.250'; missing -> 'n/a' (never '$n/a')."""
    if is_missing(value):
        return MISSING
    return "$" + number(_real(value), digits)


def duration(seconds: object) -> str:
    """A wall-clock span for progress lines: '38 s', '12 min 5 s', '2 h 30 min'."""
    if is_missing(seconds):
        return MISSING
    span = max(0.0, _real(seconds))
    if span < 90:
        return f"{span:.0f} s"
    if span < 5400:
        return f"{span // 60:.0f} min {span % 60:.0f} s"
    return f"{span // 3600:.0f} h {(span % 3600) // 60:.0f} min"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """'1 configuration', '2 configurations' (`plural` when adding an s is wrong)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def load_words(users: float | None, rate: float | None) -> str:
    """A step's load as every surface words it: '40 req/s offered' (open loop), '12 users', '1 user'."""
    if rate is not None:
        return f"{rate:g} req/s offered"
    users = int(users or 0)
    return f"{users} user{'s' if users != 1 else ''}"


def _bounds(interval: object) -> tuple[float, float] | None:
    """(low, high) of an interval given as `[low, high]` (summary.json) or an object with `low` /
    `high` (`measure.uncertainty.Interval`); None when it is missing or not finite."""
    if interval is None:
        return None
    if hasattr(interval, "low") and hasattr(interval, "high"):
        low, high = interval.low, interval.high
    elif isinstance(interval, (list, tuple)) and len(interval) == 2:
        low, high = interval
    else:
        return None
    if is_missing(low) or is_missing(high) or isinstance(low, bool) or isinstance(high, bool):
        return None
    if not isinstance(low, numbers.Real) or not isinstance(high, numbers.Real):
        return None
    return float(low), float(high)


def with_interval(value: object, interval: object, unit: str = "", digits: int = 0) -> str:
    """A figure with its 95 % interval, the one way every surface shows one:

    symmetric (batch means of a rate)  -> '189 req/s (±3)'
    asymmetric (a bootstrapped percentile) -> '120 ms [112, 131]'
    no interval (too few samples, an old summary.json) -> '189 req/s' (the figure alone)
    a zero-width interval ([45, 45]) -> '45 ms' (the figure alone, as unknown)

    A zero-width interval is not a measured certainty: every batch or resample gave the same value
    (one distinct sample, or a spread finer than the data resolve, such as one latency bucket), so
    its width is unknown and '(±0)' would claim an exactness nobody measured.
    `unit` follows the figure (with its own leading space, as `number`'s); `digits` decimals for
    the figure and the bounds; a half-width that would print as 0 gets one significant digit."""
    if is_missing(value):
        return MISSING
    central = _real(value)
    figure = number(central, digits, unit)
    bounds = _bounds(interval)
    if bounds is None or bounds[1] <= bounds[0]:
        return figure
    low, high = bounds
    above, below = high - central, central - low
    # symmetric when both sides print the same or differ by under 2 % of the width (batch means' are,
    # exactly; a rounded figure moves the centre a little)
    if f"{above:.{digits}f}" == f"{below:.{digits}f}" or abs(above - below) <= 0.02 * (above + below):
        half = (high - low) / 2.0
        text = f"{half:,.{digits}f}"
        if half > 0 and float(text.replace(",", "")) == 0:
            text = f"{half:.1g}"
        return f"{figure} (\u00b1{text})"
    return f"{figure} [{number(low, digits)}, {number(high, digits)}]"


def percent_interval(fraction: object, interval: object, digits: int = 1) -> str:
    """A fraction as a percentage with its 95 % interval, `with_interval`'s wording: (0.935, [0.923,
    0.947]) -> '93.5 % (±1.2)'; no interval -> '93.5 %'."""
    if is_missing(fraction):
        return MISSING
    bounds = _bounds(interval)
    return with_interval(100.0 * _real(fraction), None if bounds is None else [100.0 * b for b in bounds], " %",
                         digits)


def signed_percent(fraction: object, digits: int = 0) -> str:
    """A relative change with its sign: 0.123 -> '+12'; -0.071 -> '-7'; 0 -> '+0' (no unit: see `change`)."""
    if is_missing(fraction):
        return MISSING
    text = f"{_real(fraction) * 100:+.{digits}f}"
    return "+" + text[1:] if float(text) == 0 else text  # never '-0'


def change(fraction: object, low: object = None, high: object = None, digits: int = 0) -> str:
    """A relative change and, when known, its interval: '+12 % [+7, +18]'; '+12 %' without one."""
    if is_missing(fraction):
        return MISSING
    text = f"{signed_percent(fraction, digits)} %"
    if is_missing(low) or is_missing(high):
        return text
    return f"{text} [{signed_percent(low, digits)}, {signed_percent(high, digits)}]"
