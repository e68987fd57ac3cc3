"""The suite's order under pytest-xdist (pytest_balance.py): equal time per worker, files whole, longest first."""

from pytest_balance import balanced, shares


class Item:
    def __init__(self, nodeid: str, slow: bool = False):
        self.nodeid, self.slow = nodeid, slow

    def get_closest_marker(self, name: str):
        return object() if name == "slow" and self.slow else None


def test_the_shares_are_the_sizes_worksteal_sends_first():
    assert shares(10, 4) == [2, 2, 3, 3]
    assert shares(2617, 4) == [654, 654, 654, 655]


def test_each_worker_gets_an_equal_time_longest_file_first_and_files_stay_whole():
    known, items = {}, []
    for number, seconds in enumerate([60, 50, 40, 30, 20, 10, 5, 5]):
        for test in range(3):
            item = Item(f"t/test_{number}.py::test_{test}")
            known[item.nodeid] = seconds / 3
            items.append(item)
    items += [Item(f"t/test_quick.py::test_{n}") for n in range(16)]  # no time on record: a guess
    ordered = balanced(items, 4, known)

    assert sorted(i.nodeid for i in ordered) == sorted(i.nodeid for i in items)
    chunks, start = [], 0
    for size in shares(len(items), 4):
        chunks.append(ordered[start : start + size])
        start += size
    times = [sum(known.get(i.nodeid, 0) for i in chunk) for chunk in chunks]
    assert max(times) - min(times) <= 15, times  # in file order the first chunk alone held 150 s of 220
    for chunk in chunks:
        files = [i.nodeid.split("::")[0] for i in chunk]
        assert files == sorted(files, key=files.index)  # each file's tests together
        spans = [sum(known.get(i.nodeid, 0) for i in chunk if i.nodeid.startswith(f)) for f in dict.fromkeys(files)]
        assert spans == sorted(spans, reverse=True)  # longest first: a steal from the back takes short ones
    assert [i.nodeid for i in ordered if i.nodeid.startswith("t/test_0.py")] == [
        f"t/test_0.py::test_{n}" for n in range(3)
    ]


def test_every_worker_orders_alike_and_a_slow_test_with_no_time_on_record_counts_as_slow():
    items = [Item(f"t/test_{n}.py::test", slow=(n < 4)) for n in range(12)]
    first = [i.nodeid for i in balanced(list(items), 4, {})]
    assert first == [i.nodeid for i in balanced(list(reversed(items)), 4, {})]
    chunks = [first[i * 3 : (i + 1) * 3] for i in range(4)]
    assert all(chunk[0] in {f"t/test_{n}.py::test" for n in range(4)} for chunk in chunks)  # one slow each
