"""Issue text from the failing tests' structured results (trusted task code).

An issue reads as a user's bug report with a reproduction: which tests fail, the error
each raises and the end of pytest's report for it (the assertion with its values and the
traceback into the library). It is built from the report plugin's per-test records, never
from pytest's summary line, which truncates the assertion.
"""

SHOWN_TESTS = 3
REPORT_CHARS = 2500


def issue_text(failures: dict[str, dict]) -> str:
    count = len(failures)
    parts = [f"After a recent change, {count} test{'s' if count > 1 else ''} of the suite "
             f"fail{'' if count > 1 else 's'}. Please fix the library so that "
             f"{'they pass' if count > 1 else 'it passes'} again; the tests themselves are "
             "right."]
    for test_id in sorted(failures)[:SHOWN_TESTS]:
        result = failures[test_id]
        report = result.get("text", "")[-REPORT_CHARS:]
        parts.append(f"Failing test: {test_id}\nError: {result.get('message', '').strip()}\n"
                     f"\n{report.strip()}")
    if count > SHOWN_TESTS:
        parts.append("Also failing: " + ", ".join(sorted(failures)[SHOWN_TESTS:]))
    return "\n\n".join(parts) + "\n"
