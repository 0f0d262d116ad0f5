"""The floor-calibration rule on hand-made cosine observations."""

import pytest

from cli.calibrate import choose, curve


def obs(on, off):
    return {"on": {True: on, False: on}, "off": {True: off, False: off}, "adversarial": [0.5], "lost_pairs": 0}


def test_lowest_floor_that_blocks_95_percent_and_keeps_every_pair():
    # 20 off-topic tops: 19 at or below 0.31, one at 0.50; on-topic pairs all at 0.40 or above.
    rows = curve(obs(on=[0.40, 0.55, 0.70], off=[0.10] * 10 + [0.31] * 9 + [0.50]))
    chosen = choose(rows)
    assert chosen["floor"] == pytest.approx(0.32)
    assert chosen["held_out_off_topic_blocked"] == pytest.approx(0.95)
    assert chosen["held_out_on_topic_kept"] == 1.0
    assert rows[50]["adversarial_passing"] == 1.0 and rows[51]["adversarial_passing"] == 0.0


def test_no_floor_when_an_on_topic_pair_is_below_the_off_topic_mass():
    rows = curve(obs(on=[0.05, 0.60], off=[0.40] * 20))
    assert choose(rows) is None
    assert rows[41]["fit_off_topic_blocked"] == 1.0 and rows[41]["fit_on_topic_kept"] == 0.5
