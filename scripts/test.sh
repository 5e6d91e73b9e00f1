#!/usr/bin/env bash
# README command 2: install what is missing, then run every check and test:
# rustfmt, clippy, the Rust tests, the library crates' docs, doc tests and examples, and the
# official-SDK tests in Python (the SDKs against the mock, and Python and JS SDK apps through
# `livetalk proxy`).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's heading says when it began (seconds since this script started), so a CI run
# shows where its 25 minutes went.
step() { printf '== [%4ds] %s\n' "$SECONDS" "$*"; }
# A full run compiles from what changed, most often from nothing (CI's fresh clone): the
# incremental caches cost more to write than they save there.
export CARGO_INCREMENTAL=0

if ! command -v cargo >/dev/null; then
    echo "livetalk: the Rust toolchain (cargo) is required: https://rustup.rs" >&2
    exit 1
fi
# pkg-config + libasound2-dev build cpal's ALSA backend; pulseaudio + pulseaudio-utils are the
# headless real-time audio rig (each audio test starts its own private server with null sinks
# and stops it again); libasound2-plugins is ALSA's way to that server (the `pulse` device),
# which the echo tests take to try the ALSA host; man-db renders `livetalk man` in its test;
# libopus-dev is the Opus codec the bridge's WebRTC audio links (no cmake build of it); haproxy
# and prometheus are the load balancer and the scraper of the bridge's fleet test; xvfb is the
# private X display the screen-sharing tests draw a window on.
scripts/setup-system.sh pkg-config libasound2-dev espeak-ng openssl python3 python3-venv tmux \
    pulseaudio pulseaudio-utils libasound2-plugins man-db libopus-dev haproxy prometheus xvfb

# The MCP tests run livetalk against the reference MCP server (npm) and the Python SDK's
# FastMCP (in the venv the Python SDK tests use too). A Node from elsewhere (nodesource, nvm)
# brings its own npm, so the distribution's packages only when there is none.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    scripts/setup-system.sh nodejs npm
fi
everything=tests/mcp/node_modules/@modelcontextprotocol/server-everything/package.json
wanted=$(sed -n 's/.*"@modelcontextprotocol\/server-everything": "\(.*\)".*/\1/p' tests/mcp/package.json)
if ! grep -q "\"version\": \"$wanted\"" "$everything" 2>/dev/null; then
    step "npm ci (MCP test servers)"
    npm ci --prefix tests/mcp --no-audit --no-fund --loglevel=error
fi
# The proxy tests' JS app is on the official JS SDK (@google/genai), pinned in tests/js.
genai=tests/js/node_modules/@google/genai/package.json
wanted=$(sed -n 's/.*"@google\/genai": "\(.*\)".*/\1/p' tests/js/package.json)
if ! grep -q "\"version\": \"$wanted\"" "$genai" 2>/dev/null; then
    step "npm ci (the JS SDK of the proxy tests)"
    npm ci --prefix tests/js --no-audit --no-fund --loglevel=error
fi
venv=.venv
# aiortc is the independent WebRTC app of the bridge's WebRTC tests.
if ! "$venv/bin/python" -c "import google.genai, pytest, mcp, aiortc" >/dev/null 2>&1; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "google-genai>=3.3,<4" \
        "pytest>=8,<10" "mcp>=1.20,<2" "aiortc>=1.9,<2"
fi

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --quiet -- -D warnings

# One runner: nextest, whose config (.config/nextest.toml) runs the real-time rigs alone and
# retries nothing. `cargo test` would run the rigs beside CPU-heavy tests.
if ! cargo nextest --version >/dev/null 2>&1; then
    step "cargo install cargo-nextest (the test runner)"
    cargo install cargo-nextest --locked
fi
step "Rust tests: build"
# Every target but the examples, which nextest would build as test harnesses of no test; they
# are built as programs and run below.
targets=(--workspace --lib --bins --tests --benches)
cargo nextest run "${targets[@]}" --no-run
step "Rust tests: run"
cargo nextest run "${targets[@]}" --no-fail-fast

step "Library crates: docs without warnings, doc tests, and every example run offline"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p livetalk-live -p livetalk-mock
cargo test --doc --workspace --quiet
# The examples as programs, with the workspace's features (the dependencies the Rust tests
# built serve them as they are; `cargo run -p CRATE` would resolve one crate's features alone
# and build them again). Each runs offline against the mock and must exit 0 and print what it
# promises: every pattern of its line below (extended regular expressions, `|`-separated
# lines of its output each must match). A new example needs its line here.
cargo build --workspace --examples --quiet
declare -A promises=(
    [text_turn]='^tool call: get_device_status\(.*living room lamp|^tool answer: .*"status":"off"|^model: .*is currently off|^closed cleanly: 1 connection\(s\)'
    [voice_barge_in]='^server heard: \(about [0-9.]+ seconds of speech\)|^server: interrupted|^model audio after .interrupted.: +0 bytes|^model audio of the next answer: +[1-9]'
    [raw_frames]='^<- setupComplete|^   call .*: get_device_status\(|^-> toolResponse|turnComplete|^the model said: .+'
)
for example in crates/*/examples/*.rs; do
    name=$(basename "$example" .rs)
    if [ -z "${promises[$name]:-}" ]; then
        echo "livetalk: the example $name has no promise to check in scripts/test.sh" >&2
        exit 1
    fi
    echo "-- example $name"
    output=$(timeout 120 "target/debug/examples/$name") || {
        echo "livetalk: the example $name failed (exit $?):" >&2
        printf '%s\n' "$output" >&2
        exit 1
    }
    IFS='|' read -r -a patterns <<<"${promises[$name]}"
    for pattern in "${patterns[@]}"; do
        if ! grep -qE -- "$pattern" <<<"$output"; then
            echo "livetalk: the example $name did not print a line matching: $pattern" >&2
            printf '%s\n' "$output" >&2
            exit 1
        fi
    done
done

step "Official-SDK tests (Python; the proxy's with Python and JS apps)"
# The Rust tests above built the binary; `cargo build` would build the library again with other
# features (dev-dependencies unify them differently), minutes for nothing on a cold clone.
[ -x target/debug/livetalk ] || cargo build --quiet --bin livetalk
LIVETALK_BIN="$PWD/target/debug/livetalk" "$venv/bin/python" -m pytest -q tests/python
step "all checks and tests passed"
