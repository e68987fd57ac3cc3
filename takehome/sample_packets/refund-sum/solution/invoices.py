import csv
from pathlib import Path


def total(path: str) -> int:
    n = 0
    with Path(path).open() as f:
        for row in csv.DictReader(f):
            n += int(row["cents"])
    return n
