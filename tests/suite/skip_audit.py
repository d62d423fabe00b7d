#!/usr/bin/env python3
"""suite.skips: runs after every other test (the cleanup of the braid_suite fixture) and audits the
skips they recorded in BRAID_SKIP_LOG (tests/support/skip.h, braid_skip.py).

- Counts the skips and prints each with its reason.
- Fails when a test skipped because a package or part is missing and --strict is given
  (tools/quickstart sets it: install-deps provides every dependency, so only a missing device,
  such as a GPU, may excuse a test).
- Fails when a registered test is not a member of the fixture (its skips would go unrecorded),
  or when a test skips around the recorder (a raw GTEST_SKIP or exit 77 in tests/)."""
import argparse
import json
import os
import re
import subprocess
import sys

RAW_SKIPS = {
    ".cc": re.compile(r"\bGTEST_SKIP\s*\("),
    ".h": re.compile(r"\bGTEST_SKIP\s*\("),
    ".py": re.compile(r"\bexit\(\s*(77|SKIP)\s*\)"),
}
RECORDERS = {os.path.join("tests", "support", "skip.h"), os.path.join("tests", "support", "braid_skip.py")}


def read_skips(path):
    if not os.path.exists(path):
        return []
    skips = []
    for line in open(path, errors="replace").read().splitlines():
        kind, test, reason = (line.split("\t", 2) + ["", ""])[:3]
        skips.append((kind, test, reason))
    return skips


def unregistered(ctest, build, fixture, log):
    """Tests (other than the fixture's setup and cleanup) without the fixture or the log variable."""
    out = subprocess.run([ctest, "--show-only=json-v1"], cwd=build, capture_output=True, text=True,
                         check=True).stdout
    bad = []
    for test in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        if fixture in props.get("FIXTURES_SETUP", []) or fixture in props.get("FIXTURES_CLEANUP", []):
            continue
        env = props.get("ENVIRONMENT", [])
        if fixture not in props.get("FIXTURES_REQUIRED", []) or f"BRAID_SKIP_LOG={log}" not in env:
            bad.append(test["name"])
    return bad


def raw_skips(source):
    found = []
    for root, dirs, files in os.walk(os.path.join(source, "tests")):
        for name in files:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, source)
            pattern = RAW_SKIPS.get(os.path.splitext(name)[1])
            if pattern is None or rel in RECORDERS:
                continue
            for n, line in enumerate(open(path, errors="replace"), 1):
                if pattern.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    return found


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--log", required=True)
    p.add_argument("--ctest", required=True)
    p.add_argument("--build", required=True)
    p.add_argument("--source", required=True)
    p.add_argument("--fixture", required=True)
    p.add_argument("--strict", action="store_true")
    a = p.parse_args()

    failures = []
    skips = read_skips(a.log)
    kinds = {k: sum(1 for s in skips if s[0] == k) for k in ("device", "missing")}
    print(f"{len(skips)} tests skipped: {kinds['device']} for a device this machine lacks, "
          f"{kinds['missing']} for a missing package or part")
    for kind, test, reason in sorted(skips):
        print(f"  [{kind}] {test}: {reason}")
    unknown = [s for s in skips if s[0] not in kinds]
    if unknown:
        failures.append(f"{len(unknown)} skip records of an unknown kind: {unknown[:3]}")
    if a.strict and kinds["missing"]:
        failures.append(f"{kinds['missing']} tests skipped for a missing package or part on a machine "
                        "set up by tools/install-deps (which should have installed it)")

    bad = unregistered(a.ctest, a.build, a.fixture, a.log)
    if bad:
        failures.append(f"{len(bad)} tests are not registered through tests/BraidTests.cmake "
                        f"(braid_gtest / braid_test_area), so their skips go unrecorded: "
                        + ", ".join(bad[:10]))
    raw = raw_skips(a.source)
    if raw:
        failures.append("skips that bypass tests/support (use BRAID_SKIP_NO_DEVICE / "
                        "BRAID_SKIP_MISSING, or braid_skip.skip_*):\n    " + "\n    ".join(raw))
    for f in failures:
        print(f"suite.skips: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
