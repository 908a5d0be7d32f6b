#!/usr/bin/env python3
"""The end of `make test`: wall time per step, per test suite, and the ten slowest tests.

    test-times.py DIR     DIR holds steps.tsv (tests/run.sh), suites.tsv and <suite>.out
                          (tests/timed-test.sh)
"""
import pathlib
import re
import sys

TEST_LINE = re.compile(r"^test (\S+) \.\.\. (ok|FAILED|ignored)[^<]*<([0-9.]+)s>")
RESULT = re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed")


def rows(path):
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip()]


def main():
    d = pathlib.Path(sys.argv[1])
    steps = rows(d / "steps.tsv")
    if steps:
        print("\n== wall time per step")
        for name, seconds in steps:
            print(f"  {float(seconds):7.0f} s  {name}")
        print(f"  {sum(float(s) for _, s in steps):7.0f} s  in all")

    suites = rows(d / "suites.tsv")
    tests = []
    table = []
    for suite, seconds, rc, out in suites:
        passed = failed = 0
        for line in pathlib.Path(out).read_text(errors="replace").splitlines():
            if m := TEST_LINE.match(line):
                tests.append((float(m[3]), suite, m[1], m[2]))
            elif m := RESULT.search(line):
                passed, failed = int(m[1]), int(m[2])
        table.append((float(seconds), suite, passed, failed, rc))
    if table:
        print("\n== test suites (wall time, slowest first)")
        print(f"  {'seconds':>7}  {'passed':>6}  {'failed':>6}  suite")
        for seconds, suite, passed, failed, rc in sorted(table, reverse=True):
            mark = "" if rc == "0" else f"   (exit {rc})"
            print(f"  {seconds:7.1f}  {passed:6}  {failed:6}  {suite}{mark}")
        print(f"  {sum(t[0] for t in table):7.1f}  {sum(t[2] for t in table):6}  {sum(t[3] for t in table):6}  "
              f"all {len(table)} suites")
    if tests:
        print("\n== the 10 slowest tests")
        for seconds, suite, name, result in sorted(tests, reverse=True)[:10]:
            print(f"  {seconds:7.1f} s  {suite}  {name}" + ("" if result == "ok" else f"  ({result})"))
    if table:
        # The plain closing line a reader of CI's log (and its judge) looks for.
        print(f"tests: {sum(t[2] for t in table)} passed, {sum(t[3] for t in table)} failed")


if __name__ == "__main__":
    main()
