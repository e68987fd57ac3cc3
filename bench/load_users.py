"""The people of bench/load.py's load test, as locust users. Run by bench/load.py, not on its own.

bench/load.py writes a plan (JSON, named by TAKEHOME_LOAD_PLAN): the
candidates' tokens and zips, the reviewers' accounts, the gate's logs. This
file imports nothing of the project (locust runs it under gevent), and
writes what only the clients know (which uploads were answered as stored,
when each candidate saw its grade, the retries) to the plan's outcome file.

A candidate: opens the link page, presses Start (the form's POST with its
CSRF token), downloads the project, sends the gate's red, model and green
receipts as gate.py does, uploads its zip (half as gate.py does, half as the
page's htmx form does) and polls until the upload is graded. A reviewer:
logs in, browses the queue, and scores graded uploads cell by cell through
the htmx endpoints, then submits the review. The run ends when every
candidate is done and every reviewer has finished the review in hand; the
figures are written then, once every user has stopped (locust's quitting
event), with the number of users still at work (0 unless --timeout cut the
run short).
"""

from __future__ import annotations

import csv
import json
import os
import random
import re
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import gevent
from locust import HttpUser, between, constant, events, task
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV

PLAN = json.loads(Path(os.environ["TAKEHOME_LOAD_PLAN"]).read_text())
CANDIDATES = list(PLAN["candidates"])
ACCOUNTS = list(PLAN["reviewers"])
CELLS = PLAN["cells"]  # in the order the review page asks for them
LEFT = {"candidates": len(CANDIDATES), "users": len(CANDIDATES) + len(ACCOUNTS)}
OUTCOME = {"uploads": [], "retries": Counter()}

GATE = {"X-Takehome-Client": "gate", "Accept": "application/json"}
HTMX = {"HX-Request": "true"}
MAX_RETRIES = 20
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
CSRF_HEADER = re.compile(r'"X-CSRFToken": "([^"]+)"')
ALERT = re.compile(r'role="alert">\s*(?:<li class="error">)?(.*?)<', re.S)
QUEUE_ROW = re.compile(r'<tr data-submission="(\d+)">(.*?)</tr>', re.S)
UPLOAD_URL = re.compile(r"/uploads/(\d+)$")


def think(low: float, high: float) -> None:
    gevent.sleep(random.uniform(low, high))


def retry_after(response) -> int | None:
    """Seconds to wait before sending the same request again: a 503 that says when (Retry-After)."""
    value = response.headers.get("Retry-After", "") if response.status_code == 503 else ""
    return min(int(value), 30) if value.isdigit() else None


def alert_text(html: str) -> str:
    """The first message the page shows in an alert (a refused form, a cell error), or ''."""
    match = ALERT.search(html)
    return " ".join(match.group(1).split())[:120] if match else ""


def no_alert(response) -> str | None:
    text = alert_text(response.text)
    return f"answered with a refusal: {text}" if text else None


def redirects_client(response) -> str | None:
    """An htmx form post that worked answers with HX-Redirect; one that did not shows the reason."""
    if response.headers.get("HX-Redirect"):
        return None
    return f"no HX-Redirect: {alert_text(response.text) or 'the form came back'}"


def accepted_receipt(response) -> str | None:
    reply = response.json()
    return None if reply.get("accepted") else f"receipt refused: {reply.get('message', '')[:120]}"


def listed(pk: int):
    """`gate.py status` lists the upload as received (what a candidate is told of an accepted upload)."""
    def check(response) -> str | None:
        mine = [s for s in response.json()["submissions"] if s["id"] == pk]
        return None if mine and mine[0]["status"] == "received" else f"upload {pk} not listed as received: {mine}"
    return check


def user_finished(environment) -> None:
    """Count a user out; the last one ends the run (the outcome is written as locust quits)."""
    LEFT["users"] -= 1
    if LEFT["users"] == 0:
        gevent.spawn_later(0.2, environment.runner.quit)


@events.quitting.add_listener
def write_outcome(environment, **_kwargs) -> None:
    """The clients' outcome and locust's figures, as they stand once every user has stopped.

    why not locust's --csv: its writer rewrites the files once a second and
    never at exit, so the last second of the run (a reviewer's last marks and
    submit) could be missing from the figures.
    """
    OUTCOME["users_left"] = LEFT["users"]
    Path(PLAN["outcome"]).write_text(json.dumps(OUTCOME))
    figures = StatsCSV(environment, PERCENTILES_TO_REPORT)
    for suffix, write in (("stats", figures.requests_csv), ("failures", figures.failures_csv),
                          ("exceptions", figures.exceptions_csv)):
        with open(f"{PLAN['figures']}_{suffix}.csv", "w", newline="") as out:
            write(csv.writer(out))


class Visitor(HttpUser):
    abstract = True
    finished = False

    def call(self, method: str, path: str, name: str, expect: tuple[int, ...] = (200,), check=None, **kwargs):
        """One request as a real client sends it; returns the response, or None when it failed.

        A 503 with Retry-After is waited out and sent again (counted as a
        retry, up to MAX_RETRIES); any other status not in ``expect``, or
        a ``check`` that returns a problem, is a failure named by its status.
        """
        for attempt in range(MAX_RETRIES + 1):
            with self.client.request(method, path, name=name, catch_response=True, allow_redirects=False,
                                     **kwargs) as response:
                wait = retry_after(response)
                if wait is not None and attempt < MAX_RETRIES:
                    response.success()
                    OUTCOME["retries"][f"{method} {name}"] += 1
                elif response.status_code == 0:
                    response.failure(f"no answer: {type(response.error).__name__}")
                    return None
                elif response.status_code not in expect:
                    response.failure(f"HTTP {response.status_code}")
                    return None
                else:
                    problem = check(response) if check else None
                    if problem:
                        response.failure(f"HTTP {response.status_code} {problem}")
                        return None
                    response.success()
                    return response
            gevent.sleep(wait)
        return None

    def finish(self) -> None:
        if not self.finished:
            self.finished = True
            user_finished(self.environment)


class Candidate(Visitor):
    fixed_count = len(CANDIDATES)
    wait_time = constant(1)

    @task
    def take_home(self) -> None:
        if self.finished:
            return
        me = CANDIDATES.pop()
        try:
            self.work(me)
        finally:
            LEFT["candidates"] -= 1
            self.finish()

    def work(self, me: dict) -> None:
        base = f"/t/{me['token']}"
        if self.call("GET", f"{base}/", "/t/[token]/") is None:
            return
        think(0.5, 2)
        # Start asks first (the time limit, the deadline it sets): its confirmation page holds the form.
        page = self.call("GET", f"{base}/start", "/t/[token]/start (confirm)")
        if page is None:
            return
        csrf = CSRF_FIELD.search(page.text).group(1)
        if self.call("POST", f"{base}/start", "/t/[token]/start", (302,),
                     data={"csrfmiddlewaretoken": csrf, "confirm": "yes"}) is None:
            return
        page = self.call("GET", f"{base}/", "/t/[token]/")
        if page is None or self.call("GET", f"{base}/download", "/t/[token]/download") is None:
            return
        for step, log in (("red", PLAN["red_log"]), ("model", PLAN["prompt"]), ("green", PLAN["green_log"])):
            think(1, 3)
            body = {"log": log, "files": me["files"], "token": me["token"],
                    "local_time": datetime.now(UTC).isoformat(timespec="seconds")}
            if self.call("POST", f"{base}/gate/{step}", f"/t/[token]/gate/{step}", (201,), accepted_receipt,
                         json=body, headers=GATE) is None:
                return
        think(1, 3)
        archive = ("archive", (PLAN["zip_name"], Path(me["zip"]).read_bytes(), "application/zip"))
        if me["via"] == "gate":
            self.upload_as_gate(base, me, archive)
        else:
            self.upload_as_page(base, me, archive, CSRF_FIELD.search(page.text).group(1))

    def stored(self, me: dict, submission: int) -> None:
        OUTCOME["uploads"].append({"token": me["token"], "submission": submission, "via": me["via"],
                                   "at": time.time()})

    def upload_as_gate(self, base: str, me: dict, archive) -> None:
        """As `gate.py submit`, then `gate.py status` once: a candidate is told an upload was received, and
        never when its grading ends (docs/evidence.md), so there is nothing more to wait for."""
        answer = self.call("POST", f"{base}/upload", "/t/[token]/upload (gate)", (201,), files=[archive],
                           headers=GATE)
        if answer is None:
            return
        pk = answer.json()["submission"]
        self.stored(me, pk)
        think(1, 3)
        self.call("GET", f"{base}/status", "/t/[token]/status (gate)", (200,), listed(pk), headers=GATE)

    def upload_as_page(self, base: str, me: dict, archive, csrf: str) -> None:
        """As the page's htmx form, then the receipt page, polled every 2 seconds until graded."""
        answer = self.call("POST", f"{base}/upload", "/t/[token]/upload (page)", (200,), redirects_client,
                           data={"csrfmiddlewaretoken": csrf}, files=[archive], headers=HTMX)
        if answer is None:
            return
        receipt = answer.headers["HX-Redirect"]
        self.stored(me, int(UPLOAD_URL.search(receipt).group(1)))
        self.call("GET", receipt, "/t/[token]/uploads/[pk]")


class Reviewer(Visitor):
    fixed_count = len(ACCOUNTS)
    wait_time = between(0.5, 2)

    def on_start(self) -> None:
        self.account = ACCOUNTS.pop()
        self.submitted = 0
        page = self.call("GET", "/accounts/login/", "/accounts/login/")
        if page is None:
            self.finish()
            return
        form = {"username": self.account["username"], "password": self.account["password"],
                "csrfmiddlewaretoken": CSRF_FIELD.search(page.text).group(1)}
        if self.call("POST", "/accounts/login/", "/accounts/login/", (302,), data=form) is None:
            self.finish()

    @task
    def review(self) -> None:
        if self.finished:
            return
        queue = self.call("GET", "/review/", "/review/")
        graded = [pk for pk, row in QUEUE_ROW.findall(queue.text) if "status-graded" in row] if queue else []
        # why not stop once the candidates are done: every reviewer scores at least one upload (the
        # candidates leave as soon as their upload is received, before any is graded).
        if LEFT["candidates"] == 0 and self.submitted:
            self.finish()
            return
        if random.random() < 0.3:
            self.call("GET", "/review/?show=todo", "/review/ (htmx poll)", headers=HTMX)
        if random.random() < 0.2:
            self.call("GET", f"/review/debrief/{PLAN['slug']}/", "/review/debrief/[slug]/")
        if graded:
            self.score(random.choice(graded))

    def score(self, pk: str) -> None:
        """Open the review page, score the four cells in order, submit, and see the page again."""
        page = self.call("GET", f"/review/{pk}/", "/review/[pk]/")
        if page is None:
            return
        headers = {**HTMX, "X-CSRFToken": CSRF_HEADER.search(page.text).group(1)}
        for cell in CELLS:
            think(0.3, 1)
            if self.call("POST", f"/review/{pk}/mark/{cell}/", f"/review/[pk]/mark/{cell}/", (200,), no_alert,
                         data={"passed": random.choice(["true", "false"])}, headers=headers) is None:
                return
        if self.call("POST", f"/review/{pk}/submit/", "/review/[pk]/submit/", (200,), redirects_client,
                     data={"confirm": "yes"}, headers=headers) is not None:
            self.submitted += 1
            self.call("GET", f"/review/{pk}/", "/review/[pk]/")
