#!/usr/bin/env python3
"""suite.parts: every part configured ON (tools/quickstart asks for each one install-deps provides)
was built and produced its files. Reads braid-parts.txt, written at configure time by
cmake/BraidParts.cmake: "PART<TAB>asked<TAB>state<TAB>file|file..." per line."""
import os
import sys


def main(path):
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        print(f"suite.parts: cannot read {path}: {e.strerror} (configure writes it)")
        return 1
    failures = []
    for line in lines:
        part, asked, state, artifacts = (line.split("\t") + [""] * 4)[:4]
        files = [f for f in artifacts.split("|") if f]
        missing = [f for f in files if not os.path.exists(f)]
        print(f"{part:8} asked {asked:4} -> {state}" + (f"; not built: {' '.join(missing)}" if missing else ""))
        if asked == "ON" and state != "on":
            failures.append(f"{part} was asked ON but is {state}")
        elif state == "on" and missing:
            failures.append(f"{part} is on but these files were not built: {' '.join(missing)}")
    if not lines:
        failures.append(f"{path} lists no parts")
    for f in failures:
        print(f"suite.parts: FAILED: {f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
