"""Transfer time over a link: bytes over the share, one RTT, setup, slow start and jitter."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdd_core.sim.config import SimConfig
from pdd_core.specs import LinkKind, LinkSpec
from pdd_core.transfer import (
    IW10_BYTES,
    MIN_BANDWIDTH_FACTOR,
    JitterDraws,
    ideal_transfer_s,
    sample_jitter,
    slow_start_extra_array,
    slow_start_extra_at_line_s,
    slow_start_extra_s,
    transfer_time,
)
from tests.pdd_core.links import GB, JITTERY, LINE


def test_transfer_time_is_bytes_over_bandwidth_plus_one_rtt() -> None:
    assert transfer_time(LINE, GB) == pytest.approx(1.01)
    assert transfer_time(LINE, 0) == pytest.approx(0.01)


def test_transfer_time_with_an_equal_share() -> None:
    # Four flows: a quarter of 1e9 B/s each, so 0.5 GB takes 2 s plus the RTT.
    assert transfer_time(LINE, 0.5 * GB, flows=4) == pytest.approx(2.01)


def test_transfer_time_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="nbytes"):
        transfer_time(LINE, -1)
    with pytest.raises(ValueError, match="flows"):
        transfer_time(LINE, 1, flows=0)


def test_no_jitter_without_rng_or_spread() -> None:
    assert transfer_time(JITTERY, GB) == pytest.approx(1.01)
    rng = np.random.default_rng(1)
    assert transfer_time(LINE, GB, rng) == pytest.approx(1.01)
    # A link without spread draws nothing, so the rng is left untouched.
    assert rng.random() == np.random.default_rng(1).random()


@pytest.mark.parametrize("make_rng", [np.random.default_rng, random.Random])
def test_seeded_jitter_is_reproducible(make_rng: type) -> None:
    first = [transfer_time(JITTERY, GB, make_rng(7)) for _ in range(3)]
    again = [transfer_time(JITTERY, GB, make_rng(7)) for _ in range(3)]
    other = transfer_time(JITTERY, GB, make_rng(8))

    assert first == again
    assert first[0] != other


def test_jitter_only_adds_delay_and_never_raises_a_share() -> None:
    rng = np.random.default_rng(3)
    wild = LinkSpec(
        id="wild",
        kind=LinkKind.WAN,
        source_site="a",
        target_site="b",
        bandwidth_gbps=8,
        rtt_ms=1,
        jitter_ms=50,
        bandwidth_jitter=0.99,
    )
    samples = [sample_jitter(wild, rng) for _ in range(2000)]

    assert min(s.delay_s for s in samples) >= 0
    assert min(s.bandwidth_factor for s in samples) == MIN_BANDWIDTH_FACTOR
    assert max(s.bandwidth_factor for s in samples) <= 1.0


def test_jitter_delay_is_heavy_tailed_with_the_configured_mean() -> None:
    rng = np.random.default_rng(4)
    delays = np.array([sample_jitter(JITTERY, rng).delay_s for _ in range(40_000)])

    assert np.mean(delays) == pytest.approx(0.005, rel=0.1)
    # A normal with this mean puts ~1e-9 of its mass beyond 8 means; a Lomax of shape 3 ~0.5%.
    assert np.mean(delays > 8 * 0.005) > 0.002


def test_slow_start_adds_round_trips_until_the_window_covers_the_share() -> None:
    # Share 1e9 B/s, RTT 10 ms: BDP 1e7 B. From 1e6 B: windows 1e6, 2e6, 4e6, 8e6 (4 rounds).
    extra = slow_start_extra_s(GB, 1e9, 0.01, 1e6)
    assert extra == pytest.approx(4 * 0.01 - 15e6 / 1e9)
    assert slow_start_extra_s(GB, 1e9, 0.01, 0.0) == 0.0
    # 2.5e6 B: one full round (1e6 B), then the 2e6 B window holds the rest.
    assert slow_start_extra_s(2.5e6, 1e9, 0.01, 1e6) == pytest.approx(0.01 - 1e6 / 1e9)


@settings(max_examples=40, deadline=None)
@given(
    sizes=st.lists(st.floats(min_value=0.0, max_value=5e9), min_size=1, max_size=20),
    gbps=st.floats(min_value=0.5, max_value=400.0),
    rtt_ms=st.floats(min_value=0.0, max_value=100.0),
    window=st.sampled_from([0.0, 1460.0, 14_600.0, 1e6]),
)
def test_the_array_form_of_slow_start_is_the_scalar_one(
    sizes: list[float], gbps: float, rtt_ms: float, window: float
) -> None:
    share = gbps * 1.25e8
    got = slow_start_extra_array(np.array(sizes), share, rtt_ms / 1e3, window)
    want = [slow_start_extra_s(n, share, rtt_ms / 1e3, window) for n in sizes]
    assert got.tolist() == pytest.approx(want, rel=1e-12, abs=1e-15)


@given(
    sizes=st.lists(st.floats(min_value=-1.0, max_value=5e9), min_size=1, max_size=20),
    gbps=st.floats(min_value=0.5, max_value=400.0),
    rtt_ms=st.floats(min_value=0.0, max_value=100.0),
    window=st.sampled_from([0.0, 1460.0, 14_600.0, 1e6]),
)
def test_the_line_rate_form_of_slow_start_is_the_loop_bit_for_bit(
    sizes: list[float], gbps: float, rtt_ms: float, window: float
) -> None:
    share, rtt = gbps * 1.25e8, rtt_ms / 1e3
    for nbytes in sizes:
        want = slow_start_extra_s(nbytes, share, rtt, window)
        assert slow_start_extra_at_line_s(nbytes, share, rtt, window) == want


def test_the_line_rate_form_of_slow_start_pays_a_round_only_past_its_threshold() -> None:
    # At exactly ``sent + window`` a round is not paid, one byte past it is (the loop's ``<``).
    share, rtt, window = 20 * 1.25e8, 0.02, IW10_BYTES
    for rounds in range(1, 9):
        edge = window * (2**rounds - 1)
        for nbytes in (edge - 1.0, edge, edge + 1.0):
            want = slow_start_extra_s(nbytes, share, rtt, window)
            assert slow_start_extra_at_line_s(nbytes, share, rtt, window) == want


def test_the_default_initial_window_ships_100_reference_tokens_in_eight_extra_rounds() -> None:
    # 100 tokens of the reference model's KV (50,752 B each) on its 20 Gbps, 20 ms line: warm,
    # 22.03 ms; from RFC 6928's 14,600-byte window, eight round trips of slow start (windows of
    # 14,600 x 2^k, k < 8, send 3.72 MB; the ninth window finishes the 5.08 MB), 180.5 ms
    # (issue #25 quotes a 185 ms public mean).
    nbytes, share = 100 * 50_752, 20 * 1.25e8
    assert SimConfig().wan_initial_window_bytes == IW10_BYTES == 14_600
    warm = ideal_transfer_s(nbytes, share, 0.02)
    assert warm == pytest.approx(0.02203008)
    cold = ideal_transfer_s(nbytes, share, 0.02, initial_window_bytes=IW10_BYTES)
    ramp = sum(0.02 - 14_600 * 2**k / share for k in range(8))
    assert cold == pytest.approx(warm + ramp)
    assert cold == pytest.approx(0.18054088)


def test_ideal_transfer_adds_setup_slow_start_and_one_rtt() -> None:
    seconds = ideal_transfer_s(GB, 1e9, 0.01, flows=2, setup_s=0.003, initial_window_bytes=1e6)
    share = 0.5e9
    assert seconds == pytest.approx(
        0.003 + GB / share + slow_start_extra_s(GB, 1e9, 0.01, 1e6) + 0.01
    )
    assert transfer_time(LINE, GB, setup_s=0.003) == pytest.approx(1.013)


@pytest.mark.parametrize("block", [1, 7, 256])
def test_block_draws_give_the_jitter_of_single_draws(block):
    """``JitterDraws`` fetches a block per numpy call; the samples (and the transfer times they
    make) are those of drawing from the generator one at a time, bit for bit."""
    single, blocked = np.random.default_rng(11), JitterDraws(np.random.default_rng(11), block)
    for n in range(600):
        link = JITTERY if n % 3 else LINE  # some transfers draw nothing
        assert sample_jitter(link, blocked) == sample_jitter(link, single)
        assert transfer_time(JITTERY, 1e6 * n, blocked) == transfer_time(JITTERY, 1e6 * n, single)
