"""A pytest plugin that writes each test's outcome as JSON (``$REPOFIX_REPORT``).

Loaded with ``-p repofix_report`` from this folder. It records, per test id, whether the
test passed, failed or was skipped, with the failure's crash message and report text as
pytest structures them (never the one-line summary, which truncates the assertion). With
``$REPOFIX_TRACE`` (a folder), it also records which functions under that folder each test
called, keyed by file and first line, and those called outside any test (at import).
With ``$REPOFIX_CPU_SECONDS``, the process is killed after that much CPU time, with no
core file.
"""

import json
import os
import resource
import sys

REPORT = os.environ.get("REPOFIX_REPORT")
TRACE = os.environ.get("REPOFIX_TRACE")
CPU_SECONDS = os.environ.get("REPOFIX_CPU_SECONDS")
TEXT_LIMIT = 6000

results: dict = {}
calls: dict = {"": set()}
current = [""]


def _profile(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_filename.startswith(TRACE):
            calls.setdefault(current[0], set()).add(f"{code.co_filename}:{code.co_firstlineno}")


def pytest_configure(config):
    if CPU_SECONDS:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_CPU, (int(CPU_SECONDS), int(CPU_SECONDS) + 1))
    if TRACE:
        sys.setprofile(_profile)


def pytest_runtest_setup(item):
    current[0] = item.nodeid


def pytest_runtest_teardown(item):
    current[0] = ""


def pytest_runtest_logreport(report):
    entry = results.setdefault(report.nodeid, {"outcome": "passed", "message": "", "text": ""})
    if report.failed and entry["outcome"] != "failed":
        crash = getattr(report.longrepr, "reprcrash", None)
        entry.update(outcome="failed", when=report.when,
                     message=(crash.message if crash is not None else "")[:TEXT_LIMIT],
                     text=report.longreprtext[-TEXT_LIMIT:])
    elif report.skipped and report.when in ("setup", "call") and entry["outcome"] == "passed":
        entry["outcome"] = "skipped"


def pytest_collectreport(report):
    if report.failed:
        results[report.nodeid or "<collection>"] = {
            "outcome": "failed", "when": "collect", "message": "",
            "text": str(report.longrepr)[-TEXT_LIMIT:]}


def pytest_sessionfinish(session, exitstatus):
    sys.setprofile(None)
    if REPORT:
        traced = {test: sorted(found) for test, found in calls.items()} if TRACE else None
        with open(REPORT, "w") as out:
            json.dump({"results": results, "calls": traced}, out)
