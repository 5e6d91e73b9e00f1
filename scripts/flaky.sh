#!/usr/bin/env bash
# The real-time rigs' pass rates: runs the rig binaries (tests/audio_rig.rs, tests/echo_rig.rs)
# RUNS times (10 by default) with no retries, as CI runs them (each test alone), and prints
# each test's pass rate, with the machine's load at each run's start and the first line of
# each failure. Takes about 50 minutes; not part of scripts/test.sh. The last result is in
# docs/testing.md.
#
#   scripts/flaky.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."

runs=${1:-10}
if ! [[ "$runs" =~ ^[1-9][0-9]*$ ]]; then
    echo "usage: scripts/flaky.sh [RUNS]  (RUNS: a whole number, 1 or more)" >&2
    exit 2
fi
if ! cargo nextest --version >/dev/null 2>&1; then
    echo "livetalk: cargo-nextest is required (scripts/test.sh installs it)" >&2
    exit 1
fi
rigs=(--test audio_rig --test echo_rig)
cargo nextest run "${rigs[@]}" --no-run
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
for run in $(seq "$runs"); do
    printf '== run %d of %d (load average %s)\n' "$run" "$runs" "$(cut -d ' ' -f 1-3 /proc/loadavg)"
    # A failing run is what is counted here, not a reason to stop.
    cargo nextest run --profile flaky "${rigs[@]}" --retries 0 --no-fail-fast \
        >"$results/run-$run.log" 2>&1 || true
    cp target/nextest/flaky/junit.xml "$results/run-$run.xml"
done
python3 - "$runs" "$results" <<'PY'
import sys, glob, xml.etree.ElementTree as ET
runs, folder = int(sys.argv[1]), sys.argv[2]
tally, failures = {}, {}
for path in sorted(glob.glob(f"{folder}/run-*.xml")):
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname')} {case.get('name')}"
        failed = case.find("failure") is not None or case.find("error") is not None
        passed, ran = tally.get(name, (0, 0))
        tally[name] = (passed + (not failed), ran + 1)
        if failed:
            element = case.find("failure") if case.find("failure") is not None else case.find("error")
            text = (element.get("message") or element.text or "").strip().splitlines()
            failures.setdefault(name, []).append(text[0] if text else "(no message)")
width = max(len(n) for n in tally) if tally else 0
print(f"\nPass rates over {runs} run(s):")
for name, (passed, ran) in sorted(tally.items()):
    print(f"  {name:<{width}}  {passed:>2} of {ran:>2}  {100 * passed / ran:5.1f} %")
for name, lines in sorted(failures.items()):
    print(f"\n{name} failed:")
    for line in lines:
        print(f"  {line}")
flaky = sum(1 for p, r in tally.values() if p < r)
print(f"\n{len(tally) - flaky} passed, {flaky} failed")
sys.exit(1 if flaky else 0)
PY
