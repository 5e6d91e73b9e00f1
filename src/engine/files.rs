//! The engine's files part: work on files the user names, done on a thread of its own so the
//! screen never waits for it (a picture read and made ready to send, a folder listed for Tab).
//! It carries out the [`FileEffect`]s; each answer comes back to the app as a message.

use tokio::sync::mpsc;
use tracing::warn;

use super::picture;
use crate::app::{FileEffect, Msg};

/// Answers waiting to be taken: the user asks for them one at a time.
const ANSWERS_WAITING: usize = 16;

/// See the module doc.
pub(super) struct Files {
    answers: mpsc::Receiver<Msg>,
    answers_tx: mpsc::Sender<Msg>,
}

impl Files {
    pub(super) fn new() -> Self {
        let (answers_tx, answers) = mpsc::channel(ANSWERS_WAITING);
        Files {
            answers,
            answers_tx,
        }
    }

    /// The next answer. Cancel-safe.
    pub(super) async fn next(&mut self) -> Option<Msg> {
        self.answers.recv().await
    }

    /// Carries out one of the app's file effects, off the loop.
    pub(super) fn carry_out(&self, effect: FileEffect) {
        match effect {
            FileEffect::PrepareImage(path) => {
                self.chore(move || Msg::Image(picture::prepare(&path)))
            }
            FileEffect::ListPaths(typed) => self.chore(move || Msg::PathChoices {
                entries: picture::folder_entries(&typed),
                typed,
            }),
        }
    }

    /// Does `work` on a thread of its own (it reads files, decodes pictures) and hands its
    /// answer to the app as a message.
    fn chore(&self, work: impl FnOnce() -> Msg + Send + 'static) {
        let answers = self.answers_tx.clone();
        tokio::task::spawn_blocking(move || {
            if answers.try_send(work()).is_err() {
                warn!("an answer of work done for the user was dropped: too many waiting");
            }
        });
    }
}
