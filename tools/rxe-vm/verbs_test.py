#!/usr/bin/env python3
"""CTest rxe.verbs (label rxe): braid's verbs transport over a real RDMA device, Soft-RoCE rxe0 in
the rxe-vm guest. Builds nothing: boots the guest (tools/rxe-vm/run) and runs tools/rxe-vm/
verbs-suite there on the binaries of BUILD, a -DBRAID_NATIVE=OFF build made on the host
(tools/rxe-vm/README.md), then checks what came back:
  - verbs_test, conformance_test and rdma_collectives_test (their real-device verbs cases; the
    software model's run in the host's own ctest) each exited 0, ran tests, and SKIPPED NONE (in the guest a verbs test
    that skips would be one that passed silently);
  - all_reduce_perf --transport verbs under braidrun at 2 and 4 ranks: their tables, checked by
    tests/bench/perf_smoke.py (every size's row, #wrong 0 in and out of place, 0 out of bounds).

Skips (recorded, kind "device") as rxe.pingpong does: no qemu-system-x86_64, the guest image not
built or out of date, BRAID_RXE_VM=0. Skips as "missing" when BUILD lacks the binaries, naming
the command that builds them.

    verbs_test.py --build BUILD [--timeout SECONDS]"""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import rxe_vm  # noqa: E402

TEST = "rxe.verbs"
PROGRAMS = ["verbs_test", "conformance_test", "rdma_collectives_test"]
BINARIES = ["tests/transport/" + p for p in PROGRAMS] + ["tools/braidrun", "bench/all_reduce_perf"]
SIZES = "8,32,128,512,2048,8192,32768,131072,524288,2097152"


def gtest_sections(out):
    """{program: text} for each '== verbs-suite: <path>' section of the guest's output."""
    sections, current = {}, None
    for line in re.sub(r"\x1b\[[0-9;]*m", "", out).splitlines():  # gtest's colours
        m = re.match(r"^== verbs-suite: (exit \d+: )?(\S+)", line)
        if m and not m.group(1):
            current = os.path.basename(m.group(2))
            sections.setdefault(current, "")
        elif current:
            sections[current] += line + "\n"
    return sections


def main():
    build, timeout = rxe_vm.start(TEST, BINARIES)

    cmd = [os.path.join(HERE, "run"), "--share", ROOT, "--timeout", str(timeout), "--",
           os.path.join(HERE, "verbs-suite"), build]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", timeout=timeout + 60)
    out = proc.stdout
    sys.stdout.write(out)
    problems = []
    if proc.returncode != 0:
        problems.append(f"tools/rxe-vm/run exited {proc.returncode}")
    sections = gtest_sections(out)
    for program in PROGRAMS:
        text = sections.get(program)
        if text is None:
            problems.append(f"{program}: did not run")
            continue
        ran = re.search(r"^\[==========\] (\d+) tests? from \d+ test suites? ran", text, re.M)
        passed = re.search(r"^\[  PASSED  \] (\d+) tests?", text, re.M)
        skipped = re.search(r"^\[  SKIPPED \] (\d+) tests?", text, re.M)
        failed = re.findall(r"^\[  FAILED  \] (\S+)", text, re.M)
        if not ran or int(ran.group(1)) == 0:
            problems.append(f"{program}: ran no tests")
        if failed:
            problems.append(f"{program}: failed: {', '.join(sorted(set(failed)))}")
        if skipped:
            problems.append(f"{program}: {skipped.group(1)} skipped in the guest (a verbs test that "
                            "skips where rxe0 exists passed silently)")
        if passed:
            print(f"rxe.verbs: {program}: {passed.group(1)} passed", flush=True)
    for n in (2, 4):
        problem = rxe_vm.check_table(os.path.join(build, "rxe-verbs", f"all_reduce_{n}.out"), SIZES,
                                     f"rxe.verbs: all_reduce_perf --transport verbs, {n} ranks")
        if problem:
            problems.append(problem)
    return rxe_vm.finish(TEST, problems, "braid's verbs transport over Soft-RoCE rxe0 in the VM")


if __name__ == "__main__":
    sys.exit(main())
