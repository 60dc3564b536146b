"""bench/dashboard.py's arithmetic: which samples each figure counts (the benchmark itself is run
by hand; these check that a stall during shutdown or before first paint is not reported
as the dashboard's, and that rates come out per second and per core)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent.parent / "bench" / "dashboard.py"


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_tui", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_tui"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def run(bench: ModuleType, **fields: object) -> Any:
    r = bench.Run("zuka", 300, 100.0)
    for name, value in fields.items():
        setattr(r, name, value)
    return r


def test_window_runs_from_paint_plus_settle_to_the_exit_request(bench: ModuleType) -> None:
    r = run(bench, first_paint=101.0, exit_at=150.0, ended=153.0)
    assert r.window(5.0) == (106.0, 150.0)
    assert r.paint_s == pytest.approx(1.0)
    # A child killed before it asked to exit: up to when it ended.
    assert run(bench, first_paint=101.0, ended=153.0).window(5.0) == (106.0, 153.0)


def test_cpu_is_a_share_of_one_core_inside_the_window(bench: ModuleType) -> None:
    # 1 CPU second over 10 s inside the window; startup and shutdown burn far more outside.
    cpu = [(101.0, 0.0), (110.0, 5.0), (120.0, 6.0), (145.0, 7.0), (152.0, 20.0)]
    r = run(bench, first_paint=101.0, exit_at=150.0, ended=153.0, cpu=cpu)
    assert r.cpu_pct(5.0) == pytest.approx(100 * 2.0 / 35.0)


def test_bytes_per_second_leave_out_the_first_paint_and_the_exit(bench: ModuleType) -> None:
    # Window 111-150: the paint, a write still settling at 110 and the exit's are outside.
    chunks = [(101.0, 90_000), (110.0, 1000), (112.0, 1000), (130.0, 3000), (151.0, 50_000)]
    r = run(bench, first_paint=101.0, exit_at=150.0, ended=153.0, chunks=chunks)
    assert r.bytes_per_s(10.0) == pytest.approx(4000 / 39.0)


def test_lag_counts_only_wakes_between_paint_and_exit(bench: ModuleType) -> None:
    lags = [(100.5, 2.0), (103.0, 0.004), (120.0, 0.300), (121.0, 0.001), (149.5, 1.0)]
    r = run(bench, first_paint=102.0, exit_at=150.0, ended=152.0, lags=lags)
    worst, p99, when = r.lag_ms(1.0)
    # The 2 s before paint and the 1 s wake that ends after the exit request are not counted.
    assert worst == pytest.approx(300.0)
    assert p99 == pytest.approx(4.0)
    assert when == pytest.approx(18.0)
    assert run(bench, first_paint=102.0, exit_at=150.0, lags=lags[:1]).lag_ms(1.0) is None


def test_rss_slope_is_in_mib_per_minute(bench: ModuleType) -> None:
    rss = [(100.0 + 30 * i, 80.0 + 0.5 * i) for i in range(10)]  # +1 MiB a minute
    r = run(bench, first_paint=100.0, ended=400.0, rss=rss)
    first, last, top, slope = r.rss_figures(0.0)
    assert (first, last, top) == (80.0, 84.5, 84.5)
    assert slope == pytest.approx(1.0)
