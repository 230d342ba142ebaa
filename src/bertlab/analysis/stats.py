"""Small-sample statistics for comparing runs over seeds (no SciPy needed at run time).

- :func:`t_interval`: the two-sided Student t confidence interval of a mean, ``mean ± t(1-α/2, n-1) · s/√n``
  with ``s`` the sample standard deviation (ddof=1); it assumes the per-seed values are roughly normal.
- :func:`mean_interval`: the interval a comparison reports: :func:`t_interval` from three values on, cut at a
  bounded metric's range (:func:`metric_bounds`: accuracy, F1, ... in [0, 1]), none at n = 2 (with a note).
- :func:`sign_flip_test`: the exact paired permutation (sign-flip) test of "the mean paired difference is
  zero": under the null each difference is as likely positive as negative, so all ``2^n`` sign patterns are
  equally likely; the two-sided p-value is the share of patterns whose mean difference is at least as far
  from zero as the observed one. Exact for any n (enumerated up to :data:`EXACT_MAX_N` pairs, a seeded Monte
  Carlo estimate beyond). With n pairs the smallest possible p is ``2 / 2^n``: 5 seeds can never reach 0.05.
"""

from __future__ import annotations

import itertools
import math
import random
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

EXACT_MAX_N = 20
MONTE_CARLO_DRAWS = 200_000


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_ppf(q: float, df: float) -> float:
    """The ``q`` quantile of Student's t (bisection on :func:`t_cdf`)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile must be in (0, 1), got {q}")
    if q < 0.5:
        return -t_ppf(1.0 - q, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < q:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < q:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def mean_std(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof=1; None for fewer than two values)."""
    if not values:
        return None, None
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else None


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student t confidence interval of the mean of ``values`` (None for fewer than two values)."""
    if len(values) < 2:
        return None
    mean, std = mean_std(values)
    assert mean is not None and std is not None
    half = t_ppf(0.5 + confidence / 2.0, len(values) - 1) * std / math.sqrt(len(values))
    return mean - half, mean + half


def sign_flip_test(differences: Sequence[float], seed: int = 0) -> float:
    """Two-sided p-value of the exact paired sign-flip test (see the module docstring)."""
    d = [float(x) for x in differences]
    n = len(d)
    if n == 0:
        raise ValueError("no paired differences")
    observed = abs(sum(d))
    tolerance = 1e-12 * max(1.0, sum(abs(x) for x in d))
    if n <= EXACT_MAX_N:
        extreme = sum(abs(sum(s * x for s, x in zip(signs, d))) >= observed - tolerance
                      for signs in itertools.product((1.0, -1.0), repeat=n))
        return extreme / 2 ** n
    rng = random.Random(seed)
    extreme = sum(abs(sum(x if rng.random() < 0.5 else -x for x in d)) >= observed - tolerance
                  for _ in range(MONTE_CARLO_DRAWS))
    return (extreme + 1) / (MONTE_CARLO_DRAWS + 1)


def smallest_p(n: int) -> float:
    """The smallest two-sided p-value :func:`sign_flip_test` can give for ``n`` pairs."""
    return min(1.0, 2.0 / 2 ** n)


# ---------------------------------------------------------------------------------------------------------
# Intervals of bounded metrics

# Scores that are shares (a value in [0, 1]; SQuAD's exact match and F1 in percent, [0, 100]) and scores that
# are correlations ([-1, 1]): a mean over seeds cannot leave those bounds, so neither may its interval.
SHARES = re.compile(r"(^|_)(accuracy|f1|precision|recall|exact_match|exact)$|^(HasAns|NoAns)_(exact|f1)$")
CORRELATIONS = re.compile(r"^(matthews_correlation|pearson|spearmanr|combined_score)$")
MIN_MEANINGFUL_N = 3  # at n = 2 Student t has one degree of freedom: mean ± 12.7 standard errors


def metric_bounds(name: str, percent: bool = False) -> tuple[float, float] | None:
    """The range a metric's values lie in (``val/accuracy`` → (0, 1); ``percent``: shares in percent, SQuAD's
    scale → (0, 100)); None when it has none that bounds a mean (losses, wall time, counts)."""
    base = name.rsplit("/", 1)[-1]
    if "thresh" not in base and SHARES.search(base):
        return (0.0, 100.0) if percent else (0.0, 1.0)
    if CORRELATIONS.match(base):
        return -1.0, 1.0
    return None


@dataclass
class Interval:
    """A 95 % interval of a mean over seeds, as it is reported: ``low`` / ``high`` (None: no interval) and a
    ``note`` saying why there is none, or that it was cut at the metric's bounds."""

    low: float | None
    high: float | None
    note: str | None = None


def mean_interval(values: Sequence[float], bounds: tuple[float, float] | None = None,
                  confidence: float = 0.95) -> Interval:
    """The interval every comparison reports for a mean over seeds (and a mean paired difference).

    Student t's interval (:func:`t_interval`) from :data:`MIN_MEANINGFUL_N` values on; with two values there
    is none, and the note says why (one degree of freedom: ±12.7 standard errors, wider than any bounded
    metric's range). A metric with ``bounds`` (:func:`metric_bounds`; a difference of two such means lies in
    ±(high − low)) has its interval cut at them, with a note: Student t over a few seeds assumes normal values
    and can spill past a bound that no mean can cross (an accuracy of [-0.447, 1.753])."""
    n = len(values)
    if n < 2:
        return Interval(None, None)
    if n < MIN_MEANINGFUL_N:
        return Interval(None, None, f"n={n}: no interval (Student t with {n - 1} degree of freedom is not "
                                    f"meaningful; use {MIN_MEANINGFUL_N} or more seeds)")
    low, high = t_interval(values, confidence)  # type: ignore[misc]
    if bounds is not None and (low < bounds[0] or high > bounds[1]):
        return Interval(max(low, bounds[0]), min(high, bounds[1]),
                        f"cut at the metric's bounds [{bounds[0]:g}, {bounds[1]:g}]")
    return Interval(low, high)
