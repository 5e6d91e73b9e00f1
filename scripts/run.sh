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
# PipeWire); espeak-ng gives the offline demo model a real voice (else a synthetic one);
# libopus-dev is the Opus codec the bridge's WebRTC audio links.
scripts/setup-system.sh pkg-config libasound2-dev espeak-ng libopus-dev
# Cargo's own progress shows: a cold build takes minutes and must not look like a hang. Once
# built, only the one "Finished" line is left.
if [ ! -x target/release/livetalk ]; then
    echo "building livetalk (the first build takes a few minutes)…" >&2
fi
cargo build --release
exec target/release/livetalk "$@"
