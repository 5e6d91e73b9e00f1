#!/usr/bin/env bash
# README command 1: install what is missing, build, and run livetalk (offline demo model when
# no GEMINI_API_KEY is set). Arguments are passed to livetalk.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo >/dev/null; then
    echo "livetalk: the Rust toolchain (cargo) is required: https://rustup.rs" >&2
    exit 1
fi
# pkg-config + libasound2-dev build the audio backend (ALSA, which also reaches PulseAudio and
# PipeWire); espeak-ng gives the offline demo model a real voice (else a synthetic one).
scripts/setup-system.sh pkg-config libasound2-dev espeak-ng
cargo build --release --quiet
exec target/release/livetalk "$@"
