"""Hidden reference tests: added beside the candidate's code when checking the fix."""
import os
import random
from pathlib import Path

import invoices

HERE = Path(__file__).parent


def test_refund_rows_reduce_the_total():
    # 1000 + 500 + (-200): a refund is stored as negative cents.
    assert invoices.total(HERE / "sample.csv") == 1300


def test_only_refunds_sum_negative(tmp_path):
    csv_file = tmp_path / "refunds.csv"
    csv_file.write_text("cents\n-100\n-250\n")
    assert invoices.total(csv_file) == -350


def _rng():
    # The grader sets TAKEHOME_HIDDEN_SEED afresh for each grading and keeps it in the evidence, so
    # these inputs differ from one upload to the next; a run without it draws a seed of its own.
    seed = os.environ.get("TAKEHOME_HIDDEN_SEED")
    return random.Random(int(seed) if seed is not None else None)


def test_any_mix_of_sales_and_refunds_sums_to_their_total(tmp_path):
    rng = _rng()
    for case in range(5):
        rows = ([rng.randint(1, 99_999) for _ in range(rng.randint(0, 6))]
                + [-rng.randint(1, 99_999) for _ in range(rng.randint(1, 6))])
        rng.shuffle(rows)
        csv_file = tmp_path / f"mix-{case}.csv"
        csv_file.write_text("cents\n" + "".join(f"{cents}\n" for cents in rows))
        assert invoices.total(csv_file) == sum(rows), rows
