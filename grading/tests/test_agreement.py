"""Percent agreement and Cohen's kappa against answers worked out by hand."""

import pytest

from grading.engine.agreement import Table, cohens_kappa, describe_kappa, percent_agreement, table_from_pairs


def test_the_textbook_example():
    # 50 items: 20 both yes, 5 a-yes/b-no, 10 a-no/b-yes, 15 both no.
    # p_o = 35/50 = 0.7; p_e = 0.5*0.6 + 0.5*0.4 = 0.5; kappa = 0.2/0.5 = 0.4.
    table = Table(both_pass=20, a_pass_b_fail=5, a_fail_b_pass=10, both_fail=15)
    assert percent_agreement(table) == pytest.approx(70.0)
    assert cohens_kappa(table) == pytest.approx(0.4)


@pytest.mark.parametrize(
    "pairs, percent, kappa",
    [
        ([(True, True), (False, False)], 100.0, 1.0),  # perfect, with variation
        ([(True, False), (False, True)], 0.0, -1.0),  # perfect disagreement
        ([(True, True), (True, True), (True, True)], 100.0, None),  # no variation: kappa undefined
        ([(True, True), (True, False), (False, False), (False, False)], 75.0, 0.5),
        # p_o = .5; a says pass 2/4, b 1/4 -> p_e = .5*.25 + .5*.75 = .5 -> kappa 0
        ([(True, True), (True, False), (False, False), (False, True)], 50.0, 0.0),
        ([], None, None),
    ],
)
def test_small_tables(pairs, percent, kappa):
    table = table_from_pairs(pairs)
    assert percent_agreement(table) == (None if percent is None else pytest.approx(percent))
    assert cohens_kappa(table) == (None if kappa is None else pytest.approx(kappa))


def test_add_counts_in_bulk_like_one_by_one():
    assert Table().add(True, False, 3).add(False, False, 2) == table_from_pairs(
        [(True, False)] * 3 + [(False, False)] * 2
    )


@pytest.mark.parametrize(
    "kappa, words",
    [(None, "undefined"), (-0.1, "poor"), (0.0, "slight"), (0.2, "slight"), (0.4, "fair"),
     (0.5, "moderate"), (0.7, "substantial"), (0.81, "almost perfect"), (1.0, "almost perfect")],
)
def test_kappa_words(kappa, words):
    assert describe_kappa(kappa) == words
