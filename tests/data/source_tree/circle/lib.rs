//! A crate with a circle between modules and one between files.
mod config;
mod record;
