#!/usr/bin/env python3
"""Counts the test cases of one `bazel test` run (tools/test.sh uses it).

  count_tests.py BEP_JSON

BEP_JSON is what `bazel test --build_event_json_file=BEP_JSON` wrote. It lists every
test target and, for each run, shard and attempt of each, a status and the test.xml
written (bazel-testlogs/<pkg>/<target>/test.xml, in run_R_of_N/ or shard_S_of_M/ with
--runs_per_test or sharding, test_attempts/ for retries): gtest writes one <testcase> per
case there; for other tests (sh_test) Bazel writes one with a single testcase. Read it
right after that `bazel test`: the next one replaces those files. Prints one line on
stdout, "PASSED FAILED SKIPPED", and what went wrong, if anything, on stderr.

A test case is failed if it has a <failure> or <error> element; skipped if gtest says so
(GTEST_SKIP: result="skipped"; a DISABLED_ test: status="notrun"); passed otherwise. So
that nothing looks green by accident, also counted as one failed case each:
  * a run that Bazel did not report PASSED while its test.xml shows no failed case (no
    file, an unreadable one, or a process that failed after its cases had passed: a
    sanitizer's report at exit);
  * a test target with no result at all (it did not build, or Bazel stopped first).
Whatever this prints, a non-zero exit of `bazel test` with nothing failed is the
caller's to count (tools/test.sh does).

Standard library only.
"""

import json
import sys
import urllib.parse
import xml.etree.ElementTree as ET


def uri_path(uri):
    parsed = urllib.parse.urlparse(uri)
    return urllib.parse.unquote(parsed.path) if parsed.scheme == "file" else None


def count_cases(path):
    """(passed, failed, skipped, names of failed cases) in one test.xml; raises on a bad file."""
    passed = failed = skipped = 0
    failed_names = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "?")
        if case.get("classname"):
            name = case.get("classname") + "." + name
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
            failed_names.append(name)
        elif (case.get("result") == "skipped" or case.get("status") == "notrun"
              or case.find("skipped") is not None):
            skipped += 1
        else:
            passed += 1
    return passed, failed, skipped, failed_names


def read_events(path, problems):
    events = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    events.append(json.loads(line))
                except json.JSONDecodeError as e:
                    problems.append(f"{path}:{n}: not JSON ({e}): ignored")
    except OSError as e:
        problems.append(f"cannot read the build events: {e}")
    return events


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    problems = []
    events = read_events(argv[1], problems)
    test_targets = []  # in the order Bazel configured them
    runs = {}  # label -> [(run, shard, attempt, status, test.xml path or None)]
    for e in events:
        eid = e.get("id", {})
        if "targetConfigured" in eid:
            # Only test rules carry a size.
            if "testSize" in e.get("configured", {}):
                test_targets.append(eid["targetConfigured"]["label"])
        elif "testResult" in eid:
            r = eid["testResult"]
            result = e.get("testResult", {})
            xml = None
            for out in result.get("testActionOutput", []):
                if out.get("name") == "test.xml":
                    xml = uri_path(out.get("uri", ""))
            runs.setdefault(r["label"], []).append(
                (r.get("run", 1), r.get("shard", 1), r.get("attempt", 1),
                 result.get("status", "NO_STATUS"), xml))

    passed = failed = skipped = 0
    for label in list(dict.fromkeys(test_targets + list(runs))):
        if label not in runs:
            failed += 1
            problems.append(f"{label}: no test result (did not build, or was not run)")
            continue
        for run, shard, attempt, status, xml in sorted(runs[label]):
            where = f"{label} (run {run}, shard {shard}, attempt {attempt})"
            p = f = s = 0
            names = []
            unreadable = None  # why the counts below are not from test.xml
            if xml is None:
                unreadable = "no test.xml reported"
            else:
                try:
                    p, f, s, names = count_cases(xml)
                except OSError as e:
                    unreadable = f"cannot read {xml}: {e.strerror}"
                except ET.ParseError as e:
                    unreadable = f"{xml} is not valid XML ({e})"
            if status == "PASSED":
                if unreadable:
                    p = 1  # Bazel's verdict, for one case (as an sh_test's XML has)
                    problems.append(f"{where}: PASSED, {unreadable}: counted as one passed case")
                elif p + f + s == 0:
                    problems.append(f"{where}: PASSED with no test case in {xml}")
            elif f == 0:
                f = 1
                why = unreadable or "no failed test case in its test.xml"
                problems.append(f"{where}: {status}, {why}: counted as one failed case")
            if names:
                shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
                problems.append(f"{where}: {status}: {len(names)} failed: {shown}")
            passed += p
            failed += f
            skipped += s

    for line in problems:
        print(f"count: {line}", file=sys.stderr)
    print(f"count: {len(runs)} test targets with results, "
          f"{sum(len(v) for v in runs.values())} runs read", file=sys.stderr)
    print(passed, failed, skipped)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
