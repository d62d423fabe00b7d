#!/usr/bin/env python3
"""fuzz.<target>: runs one libFuzzer target of fuzz/ for --seconds over its seed corpus.

run_fuzz.py --binary FUZZER --corpus DIR --seconds N --artifacts DIR
run_fuzz.py --missing REASON ...     (the FUZZ part is off: skips, recorded as a missing package)

New inputs go to a temporary directory, never into the corpus in the repository. A crash, a
sanitizer report, a leak, an exception braid does not promise, a hang (-timeout) or running out
of memory (-rss_limit_mb) makes libFuzzer exit non-zero: the test fails, naming the input it
saved under --artifacts (reproduce: FUZZER INPUT). Prints libFuzzer's final statistics."""
import argparse
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import braid_skip  # noqa: E402

HANG_SECONDS = 10  # one input running this long is a finding


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary")
    p.add_argument("--missing")
    p.add_argument("--corpus", required=True)
    p.add_argument("--seconds", type=int, default=5)
    p.add_argument("--artifacts", required=True)
    a = p.parse_args()
    if a.missing:
        test = "fuzz." + os.path.basename(os.path.normpath(a.corpus))
        braid_skip.skip_missing(a.missing, test=test)
    name = os.path.basename(a.binary)
    os.makedirs(a.artifacts, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1")
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as new:
        cmd = [a.binary, f"-max_total_time={a.seconds}", f"-timeout={HANG_SECONDS}",
               "-rss_limit_mb=2048", "-print_final_stats=1",
               f"-artifact_prefix={os.path.join(a.artifacts, name)}-"]
        # fuzz/<target>.dict, where there is one: the format's words, for the mutator.
        corpus = os.path.normpath(a.corpus)  # fuzz/corpus/<target>
        words = os.path.join(os.path.dirname(os.path.dirname(corpus)),
                             os.path.basename(corpus) + ".dict")
        if os.path.exists(words):
            cmd.append(f"-dict={words}")
        cmd += [new, a.corpus]
        print(" ".join(cmd), flush=True)
        try:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", env=env, timeout=a.seconds + 4 * HANG_SECONDS)
        except subprocess.TimeoutExpired as e:
            print(str(e.stdout or "")[-6000:])
            print(f"FAIL: {name} did not stop after {a.seconds} s")
            return 1
    lines = r.stdout.splitlines()
    if r.returncode != 0:
        print("\n".join(lines[-80:]))
        print(f"FAIL: {name} exited with {r.returncode}; the input is under {a.artifacts}")
        return 1
    for line in lines:
        if re.search(r"\b(INITED|DONE)\b", line) or line.startswith("stat::"):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
