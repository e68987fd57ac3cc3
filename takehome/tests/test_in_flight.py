"""The browser fixture's request counter: the database is emptied after a browser test only once the live
server has answered every request the page sent, the last one included."""

import threading

from conftest import InFlight


def test_a_request_still_being_answered_keeps_the_server_busy_until_its_body_is_closed():
    release = threading.Event()

    def slow_app(environ, start_response):
        release.wait(10)
        start_response("200 OK", [])
        return [b"saved"]

    server = InFlight(slow_app)
    answered = []
    request = threading.Thread(target=lambda: answered.append(server({}, lambda *a: None)))
    request.start()
    assert not server.wait_idle(0.2)
    release.set()
    request.join()
    assert not server.wait_idle(0.05)  # the body is not sent yet
    body = answered[0]
    assert list(body) == [b"saved"]
    body.close()
    assert server.wait_idle(1)


def test_an_application_that_raises_is_not_counted_as_running():
    def broken(environ, start_response):
        raise RuntimeError("boom")

    server = InFlight(broken)
    try:
        server({}, lambda *a: None)
    except RuntimeError:
        pass
    assert server.wait_idle(0)
