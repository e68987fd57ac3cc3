"""Hidden reference tests: added beside the candidate's code when checking the fix."""
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
