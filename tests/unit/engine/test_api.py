"""Pure helpers of envman/engine/api.py: ``Created`` read as Unix seconds, the way ``calendar.timegm``
counts, for every time the engine can write and for none it cannot."""

from __future__ import annotations

import calendar
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envman.engine.api import unix_seconds


@given(st.datetimes(min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31, 23, 59, 59)),
       st.sampled_from(["", "Z", "+00:00", "+05:30", "-08:00", "+14:00", "-12:00"]),
       st.sampled_from(["", ".5", ".123456789"]))
def test_rfc3339_times_count_as_calendar_timegm_does(when, zone, fraction):
    text = when.strftime("%Y-%m-%dT%H:%M:%S").rjust(19, "0") + fraction + zone
    want = calendar.timegm(when.timetuple())
    if zone not in ("", "Z"):
        sign = 1 if zone[0] == "+" else -1
        want -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    assert unix_seconds(text) == want


@pytest.mark.parametrize("text, want", [
    ("1970-01-01T00:00:00Z", 0),
    ("1969-12-31T23:59:59Z", -1),
    ("2000-02-29T00:00:00Z", 951782400),  # a leap day of a century divisible by 400
    ("2024-02-29T12:00:00Z", 1709208000),
    ("2024-12-31T23:59:59Z", 1735689599),
    ("2025-01-01T00:00:00Z", 1735689600),
    ("2023-11-14T22:13:20.123456789Z", 1700000000),
    ("2023-11-14T23:13:20+01:00", 1700000000),
    ("2016-12-31T23:59:60Z", 1483228800),  # a leap second counts on, as timegm does
    ("  2023-11-14T22:13:20Z  ", 1700000000),
])
def test_known_times(text, want):
    assert unix_seconds(text) == want


@pytest.mark.parametrize("text", [
    "1900-02-29T00:00:00Z",  # not a leap year (divisible by 100, not 400)
    "2023-02-29T00:00:00Z", "2023-04-31T00:00:00Z", "2023-13-01T00:00:00Z", "2023-00-10T00:00:00Z",
    "2023-01-00T00:00:00Z", "2023-01-32T00:00:00Z", "2023-01-01T24:00:00Z", "2023-01-01T23:60:00Z",
    "2023-01-01T23:59:62Z", "2023-01-01 23:59:59Z", "2023-01-01T23:59:59+0100", "yesterday", "", None,
    "２０２３-01-01T00:00:00Z",  # fullwidth digits are no time
])
def test_times_that_do_not_exist_or_are_not_rfc3339_are_zero(text):
    assert unix_seconds(text) == 0


@pytest.mark.parametrize("value, want", [(1_700_000_000, 1_700_000_000), (1.9, 1), (True, 0), (False, 0)])
def test_numbers_are_seconds_and_booleans_are_not(value, want):
    assert unix_seconds(value) == want


def test_the_leap_days_of_four_centuries_are_the_calendars():
    for year in range(1600, 2401):
        leap = calendar.isleap(year)
        assert (unix_seconds(f"{year:04d}-02-29T00:00:00Z") != 0) is leap, year
