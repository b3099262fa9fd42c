"""``vtbench prepare`` writing to a log file or pipe: progress a reader can follow."""

from vtbench.prepare.progress import log_reporter


def test_a_log_gets_each_new_line_once_and_only_every_hundredth_step() -> None:
    written: list[str] = []
    report = log_reporter(written.append)
    for line in ["step 1/400 loss 7.5", "step 11/400 loss 3.1", "step 101/400 loss 1.2",
                 "step 391/400 loss 0.9", "step 400/400 loss 0.8", "evaluating on val",
                 "val: 0 of 200 instances run", "val: 0 of 200 instances run",
                 "val: 200 of 200 instances run", "val score 0.412 (200 instances)"]:
        report("dsl/initial/seed0", line)
    report("dsl/reference/seed0", "val: 0 of 200 instances run")
    report("dsl/initial/seed0", "done")
    assert written == ["dsl/initial/seed0: step 1/400 loss 7.5",
                       "dsl/initial/seed0: step 101/400 loss 1.2",
                       "dsl/initial/seed0: step 400/400 loss 0.8",
                       "dsl/initial/seed0: evaluating on val",
                       "dsl/initial/seed0: val: 0 of 200 instances run",
                       "dsl/initial/seed0: val: 200 of 200 instances run",
                       "dsl/initial/seed0: val score 0.412 (200 instances)",
                       "dsl/reference/seed0: val: 0 of 200 instances run",
                       "dsl/initial/seed0: done"]
