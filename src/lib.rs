//! livetalk: a terminal voice console for the Gemini Live API.
//!
//! The Live API client and the mock server are crates of their own: `livetalk_live` and
//! `livetalk_mock`.
//!
//! - [`tools`]: local tools, their registry and the concurrent dispatcher.
//! - [`app`]: application state; [`App::update`](app::App::update) is the only mutator.
//! - [`engine`]: a live session's engine (the session, tools, audio, recorder) and the set-up step.
//! - [`driver`]: the one loop that drives the app from a session or a recording.
//! - [`headless`]: the line/JSON presenter.
//! - [`tui`]: the full-screen presenter; [`ui`] draws `App` state for it.
//! - [`record`]: session recordings (`--record`), replay, inspect and the sessions list.
//! - [`bridge`]: the app-facing WebSocket bridge (`livetalk serve`, `--bridge`); its protocol
//!   is described in docs/bridge-protocol.md.
//! - [`check`]: `livetalk check`, recordings and scenarios as regression tests.
//! - [`doctor`]: `livetalk doctor`, what a session would meet on this machine.
//! - [`pricing`]: a session's tokens, the published prices per model and what they cost.
//! - [`config`], [`cli`], [`completion`], [`logging`]: settings, flags, shell completion and
//!   logs; [`output`]: every line
//!   written to the terminal, scrubbed of secrets.

pub mod app;
pub mod audio;
pub mod bridge;
pub mod check;
pub mod cli;
pub mod completion;
pub mod config;
pub mod doctor;
pub mod driver;
pub mod engine;
pub mod headless;
pub mod logging;
pub mod output;
pub mod paths;
pub mod pricing;
pub mod proxy;
pub mod record;
pub mod serve;
pub mod tools;
pub mod tui;
pub mod ui;
