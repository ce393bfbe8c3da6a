"""A simulation collects garbage less often while it runs and leaves the setting as it was."""

from __future__ import annotations

import gc
import threading

import pytest

from pdd_core.sim.gc_budget import RUN_GEN0_THRESHOLD, fewer_collections


@pytest.fixture
def thresholds():
    saved = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*saved)


def test_the_threshold_is_raised_inside_and_restored_after(thresholds):
    with fewer_collections():
        assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
        with fewer_collections():  # a nested run changes nothing
            assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (RUN_GEN0_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_the_threshold_is_restored_when_the_run_raises(thresholds):
    with pytest.raises(RuntimeError), fewer_collections():
        raise RuntimeError("boom")
    assert gc.get_threshold() == (700, 10, 10)


def test_collection_turned_off_or_rarer_is_left_alone(thresholds):
    gc.set_threshold(0, 10, 10)
    with fewer_collections():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(10 * RUN_GEN0_THRESHOLD, 5, 5)
    with fewer_collections():
        assert gc.get_threshold() == (10 * RUN_GEN0_THRESHOLD, 5, 5)
    assert gc.get_threshold() == (10 * RUN_GEN0_THRESHOLD, 5, 5)


def test_overlapping_runs_in_threads_restore_the_setting_once_the_last_ends(thresholds):
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()
    seen: list[tuple[int, int, int]] = []

    def first() -> None:
        with fewer_collections():
            first_in.set()
            second_in.wait(5)
        first_out.set()

    def second() -> None:
        first_in.wait(5)
        with fewer_collections():
            second_in.set()
            first_out.wait(5)
            seen.append(gc.get_threshold())  # the first run has left; this one still runs

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == [(RUN_GEN0_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
