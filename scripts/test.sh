#!/usr/bin/env bash
# README command 2: install what is missing, then run every check and test:
# rustfmt, clippy, the Rust tests, the library crates' docs, doc tests and examples, and the
# official-SDK compatibility tests in Python.
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
# libopus-dev is the Opus codec the bridge's WebRTC audio links (no cmake build of it).
scripts/setup-system.sh pkg-config libasound2-dev espeak-ng openssl python3 python3-venv tmux \
    pulseaudio pulseaudio-utils libasound2-plugins man-db libopus-dev

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

step "Rust tests: build"
if cargo nextest --version >/dev/null 2>&1; then
    cargo nextest run --workspace --all-targets --no-run
    step "Rust tests: run"
    cargo nextest run --workspace --all-targets --no-fail-fast
else
    cargo test --workspace --all-targets --no-run
    step "Rust tests: run"
    cargo test --workspace --all-targets --no-fail-fast
fi

step "Library crates: docs without warnings, doc tests, and every example run offline"
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --quiet -p livetalk-live -p livetalk-mock
cargo test --doc --workspace --quiet
# The Rust tests built every example (--all-targets) with the workspace's features: run those
# binaries as they are (the newest build of each). `cargo run -p CRATE` resolves one crate's
# features alone and builds their dependencies again, over a minute on a cold clone.
for example in crates/*/examples/*.rs; do
    name=$(basename "$example" .rs)
    binary=$(find target/debug/examples -maxdepth 1 -type f -executable -name "$name-*" \
        -printf '%T@ %p\n' | sort -rn | head -n 1 | cut -d ' ' -f 2)
    if [ -z "$binary" ]; then
        echo "livetalk: the example $name was not built by the Rust tests" >&2
        exit 1
    fi
    echo "-- example $name ($binary)"
    timeout 120 "$binary" >/dev/null
done

step "Python SDK compatibility tests"
# The Rust tests above built the binary; `cargo build` would build the library again with other
# features (dev-dependencies unify them differently), minutes for nothing on a cold clone.
[ -x target/debug/livetalk ] || cargo build --quiet --bin livetalk
LIVETALK_BIN="$PWD/target/debug/livetalk" "$venv/bin/python" -m pytest -q tests/python
step "all checks and tests passed"
