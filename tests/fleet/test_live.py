"""The last hour as the fleet shows it: live readings on the sparkline's scale, joined with
the stored minutes (leases.fleet.live)."""

from __future__ import annotations

from leases.fleet.live import hour_means, live_readings
from leases.fleet.sparkline import GAP, Reading, bars, cell_sums

END = 1_800_000_000.0


def test_live_readings_average_the_gpus_at_each_poll() -> None:
    points = {0: [(END - 20, 10.0), (END - 10, None)], 1: [(END - 20, 30.0), (END - 10, None)]}
    got = live_readings(points, after=END - 60, seconds=5)
    assert got == [Reading(END - 20, 5, 20.0), Reading(END - 10, 5, None)]
    assert live_readings(points, after=END - 15, seconds=5) == [Reading(END - 10, 5, None)]


def test_live_readings_fill_the_slice_the_stored_minutes_have_not_reached() -> None:
    stored = cell_sums([Reading(END - 3600 + 60 * i, 60, 100.0) for i in range(55)], end=END)
    assert bars(stored.means())[-1] == GAP  # the last five minutes are not stored yet
    live = [Reading(END - 100 + 5 * k, 5, 100.0) for k in range(20)]
    line = bars(hour_means(stored, live, END))
    assert line == "█" * 12  # the same scale: 100 % stored and 100 % live look alike
    assert hour_means(stored, None, END) == stored.means()
