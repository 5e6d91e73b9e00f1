//! livetalk: a terminal voice console for the Gemini Live API.
//!
//! - [`live`]: the Live API wire types, codec, session and close-code meanings.
//! - [`tools`]: local tools, their registry and the concurrent dispatcher.
//! - [`mock`]: the embedded mock Live server and its scripted model.
//! - [`app`]: application state; [`App::update`](app::App::update) is the only mutator.
//! - [`engine`]: a live session's engine (link, tools, audio, recorder) and the set-up step.
//! - [`driver`]: the one loop that drives the app from a session or a recording.
//! - [`headless`]: the line/JSON presenter.
//! - [`tui`]: the full-screen presenter; [`ui`] draws `App` state for it.
//! - [`record`]: session recordings (`--record`), replay, inspect and the sessions list.
//! - [`bridge`]: the app-facing WebSocket bridge (`livetalk serve`, `--bridge`); its protocol
//!   is described in docs/bridge-protocol.md.
//! - [`ws_server`]: what both servers share: the accept loop (cap, upgrade deadline, backoff)
//!   and how a connection ends.
//! - [`config`], [`cli`], [`logging`]: settings, flags and logs; [`echo`]: bounded summaries
//!   of what a peer sends, for the terminal and the log; [`secrets`]: the one place secrets
//!   are removed from everything livetalk writes.

pub mod app;
pub mod audio;
pub mod bridge;
pub mod cli;
pub mod config;
pub mod driver;
pub mod echo;
pub mod engine;
pub mod headless;
pub mod live;
pub mod logging;
pub mod mock;
pub mod record;
pub mod secrets;
pub mod tools;
pub mod tui;
pub mod ui;
pub mod ws_server;
