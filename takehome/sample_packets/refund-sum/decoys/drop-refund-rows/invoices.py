import csv
from pathlib import Path


def total(path: str) -> int:
    n = 0
    with Path(path).open() as f:
        for row in csv.DictReader(f):
            cents = int(row["cents"])
            if cents < 0:
                continue  # refunds skipped instead of subtracted
            n += cents
    return n
