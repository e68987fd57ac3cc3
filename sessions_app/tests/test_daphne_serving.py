"""The tests' forked daphne (helpers.daphne_serving) says where its threads are only when a test fails.

why not on a timer as before: a dump timed at 45 s also fired in long tests that were going well, reading
the other threads' frames while they ran, and once ended daphne in the middle of a test's requests.
"""

from __future__ import annotations

import urllib.request

import pytest

from .helpers import daphne_serving

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_test_failing_with_daphne_up_gets_its_threads_on_stderr(settings, monkeypatch, capfd):
    with pytest.raises(RuntimeError, match="the test failed"):
        with daphne_serving(settings, monkeypatch) as url:
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
            with opener.open(url + "/accounts/login/", timeout=30) as response:
                assert response.status == 200
            raise RuntimeError("the test failed")
    err = capfd.readouterr().err
    assert "Current thread" in err or "Thread 0x" in err, err[-2000:]


def test_a_test_passing_with_daphne_up_leaves_no_dump(settings, monkeypatch, capfd):
    with daphne_serving(settings, monkeypatch) as url:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/accounts/login/", timeout=30) as response:
            assert response.status == 200
    err = capfd.readouterr().err
    assert "Current thread" not in err and "Thread 0x" not in err, err[-2000:]
