"""Whether a fixed-length load leaves each test too few steady seconds for a useful rate interval (pure).

A rate's 95 % interval comes from batch means over the steady window's one-second samples
(`measure.uncertainty.batch_count`, Student's t with batches - 1 degrees of freedom): 5 steady
seconds make 2 batches and t = 12.7 (a loaded CI run saw two configurations 2.5 x apart tie). Rule:
under `MIN_BATCHES` batches (4: t 3.18; 3: 4.30; 2: 12.7) the plan says so, naming the shortest
whole run time from which every test's window makes `MIN_BATCHES` batches, however much longer it
runs. A note, not an error: the sweep runs as written. `repeat` adds no batch: the median run's own
interval is quoted, only widened by the runs' spread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sm_locust.measure.uncertainty import MIN_SAMPLES, batch_count, t_quantile
from sm_locust.util.formatting import count

MIN_BATCHES = 4
LONGEST_S = 3600  # the suggestion is looked for up to an hour's run


@dataclass(frozen=True)
class Window:
    """One steady window a test's batch-means intervals rest on: where it is ("per test"), what
    they are of ("rate"), and how many one-second samples a run of so many seconds leaves it (the
    measuring code's own warm-up rule)."""

    where: str
    figures: str
    samples: Callable[[float], int]


@dataclass(frozen=True)
class ShortRun:
    """A load too short for a useful interval: its window's samples and batches, and the suggestion."""

    setting: str  # how the user wrote it: "load.run_time 6s"
    where: str
    figures: str
    samples: int
    batches: int
    suggest_s: int | None  # None: no run time up to LONGEST_S reaches MIN_BATCHES

    def text(self) -> str:
        """One line: what the run time leaves, what that does to the intervals, what would do."""
        head = f"note: {self.setting} leaves about {count(self.samples, 'steady second')} {self.where}"
        if self.batches < 2:
            head += (f": too few for a 95 % interval (batch means need {MIN_SAMPLES} seconds), so configurations "
                     "cannot be told apart")
        else:
            head += (f": its 95 % {self.figures} intervals rest on {self.batches} batches (Student's t "
                     f"{t_quantile(self.batches - 1):.3g}), so close configurations will tie")
        if self.suggest_s is None:
            return head
        return (f"{head}; {self.suggest_s}s or more gives at least {MIN_BATCHES} batches "
                f"(t {t_quantile(MIN_BATCHES - 1):.3g} or less)")


def enough_samples(longest: int = LONGEST_S) -> int:
    """The fewest samples from which every longer window (up to `longest`) makes MIN_BATCHES batches."""
    n = longest
    while n > 1 and batch_count(n - 1) >= MIN_BATCHES:
        n -= 1
    return n


def short_run(setting: str, run_s: float, windows: Sequence[Window]) -> ShortRun | None:
    """The note for a load of `run_s` seconds whose tests cut `windows`, or None when each makes
    MIN_BATCHES batches (or there is no window). The suggestion is the smallest whole run time that
    gives every window `enough_samples` (windows grow with the run time)."""
    if not windows:
        return None
    counts = [(w.samples(run_s), w) for w in windows]
    samples, worst = min(counts, key=lambda c: batch_count(c[0]))
    batches = batch_count(samples)
    if batches >= MIN_BATCHES:
        return None
    need = enough_samples()
    suggest = next((s for s in range(int(run_s) + 1, LONGEST_S + 1)
                    if all(w.samples(s) >= need for w in windows)), None)
    return ShortRun(setting, worst.where, worst.figures, samples, batches, suggest)
