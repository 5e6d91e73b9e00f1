//! The one loop that drives an [`App`]: messages from a [`Source`] (a live session, or a
//! recording being replayed) and from a [`Presenter`]'s input (keys, stdin lines, signals) go
//! through [`App::update`]; the effects it asks for go back to the source; after every change
//! the presenter shows the app. The TUI and headless mode, live and replayed, all run here.

use std::collections::VecDeque;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use crate::app::{App, Effect, Msg, SessionEffect};
use livetalk_live::{CloseInfo, ServerEvent};

/// How long leaving waits for the session to close cleanly before it stops waiting.
pub const LEAVE_GRACE: Duration = Duration::from_secs(2);

/// Messages applied from the source before input gets a look again.
const READY_AT_ONCE: usize = 32;

/// Where the app's messages come from and where its effects go.
pub trait Source {
    /// The next message; `None` once nothing more can come. Must be cancel-safe: the loop
    /// drops it whenever input arrives first.
    fn next(&mut self) -> impl Future<Output = Option<Msg>>;

    /// Carries out an effect the app asked for.
    fn carry_out(&mut self, effect: Effect) -> impl Future<Output = ()>;

    /// A message that is already waiting, handed over without waiting: the rest of what one
    /// frame amounts to is applied at once, not a trip round the loop each.
    fn ready(&mut self) -> Option<Msg> {
        None
    }

    /// A message is about to be applied (a live session records it here).
    fn applied(&mut self, _msg: &Msg) {}

    /// Messages that bring the app's figures up to date once the loop is over.
    fn settle(&mut self) -> impl Future<Output = Vec<Msg>> {
        async { Vec::new() }
    }
}

/// Shows the app and gathers the user's input.
pub trait Presenter {
    /// Shows the app as it is now; may answer with a message for it (where things were drawn).
    fn show(&mut self, app: &App) -> anyhow::Result<Option<Msg>>;

    /// Looks at the app before the loop waits, to know what input to offer.
    fn observe(&mut self, _app: &App) {}

    /// The source has just delivered a message (headless measures its turn timeout by it).
    fn heard_from_source(&mut self) {}

    /// Carries out what only the presenter can ([`Effect::is_presenters`]): the TUI copies to
    /// the clipboard; elsewhere there is nothing to copy to.
    fn carry_out(&mut self, _effect: Effect) {}

    /// The next input message, or `None` when something happened that only needs the app
    /// shown again. Must be cancel-safe.
    fn next_input(&mut self) -> impl Future<Output = Option<Msg>>;

    /// True when the loop is done. `source_open` is false once the source has ended.
    fn finished(&self, app: &App, source_open: bool) -> bool;
}

/// Runs the app until the presenter is finished or the user has left. Leaving a live session
/// closes it first, waiting up to [`LEAVE_GRACE`] for the server, so the end is seen (and
/// recorded) the same way every time.
pub async fn drive<S: Source, P: Presenter>(
    app: &mut App,
    source: &mut S,
    presenter: &mut P,
) -> anyhow::Result<()> {
    let mut source_open = true;
    let mut leave_by: Option<Instant> = None;
    // Nothing on screen changes with a frame for the closed inspector: no need to show it.
    let mut changed = true;
    loop {
        if std::mem::take(&mut changed)
            && let Some(msg) = presenter.show(app)?
        {
            apply_shown(app, source, presenter, msg).await;
        }
        if presenter.finished(app, source_open) {
            break;
        }
        if app.wants_to_quit() {
            // A replay, a session already over, or one we are not closing: nothing to wait for.
            if app.is_finished() || !source_open || !app.is_closing() {
                break;
            }
            leave_by.get_or_insert_with(|| Instant::now() + LEAVE_GRACE);
        }
        presenter.observe(app);
        tokio::select! {
            msg = source.next(), if source_open => match msg {
                Some(mut msg) => {
                    for _ in 0..READY_AT_ONCE {
                        // A frame says nothing by itself (what was sent least of all); its
                        // events do.
                        if msg.may_show() {
                            changed = true;
                            presenter.heard_from_source();
                        } else if app.inspecting() {
                            // The inspector shows every frame as it comes.
                            changed = true;
                        }
                        apply_shown(app, source, presenter, msg).await;
                        match source.ready() {
                            Some(next) => msg = next,
                            None => break,
                        }
                    }
                }
                None => (source_open, changed) = (false, true),
            },
            input = presenter.next_input(), if leave_by.is_none() => {
                changed = true;
                // A retry (Ctrl-R) gives a source that had ended something to say again.
                if let Some(msg) = input
                    && apply_shown(app, source, presenter, msg).await
                {
                    source_open = true;
                }
            }
            () = sleep_until(leave_by), if leave_by.is_some() => {
                // The server never confirmed the close: the session is over all the same.
                let ended = Msg::Server(ServerEvent::Closed(CloseInfo::ended_by_client()));
                apply_shown(app, source, presenter, ended).await;
                break;
            }
        }
    }
    for msg in source.settle().await {
        apply_shown(app, source, presenter, msg).await;
    }
    presenter.show(app)?;
    Ok(())
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Applies a message and carries out its effects; intents the app hands back are applied as
/// messages of their own, in order. Returns true when the app asked to connect again. With no
/// presenter, what only a presenter carries out (a copy) is dropped.
pub async fn apply<S: Source>(app: &mut App, source: &mut S, msg: Msg) -> bool {
    apply_with(app, source, &mut |_| {}, msg).await
}

/// [`apply`], with the presenter's effects carried out by `presenter`.
async fn apply_shown<S: Source, P: Presenter>(
    app: &mut App,
    source: &mut S,
    presenter: &mut P,
    msg: Msg,
) -> bool {
    apply_with(app, source, &mut |effect| presenter.carry_out(effect), msg).await
}

async fn apply_with<S: Source>(
    app: &mut App,
    source: &mut S,
    present: &mut impl FnMut(Effect),
    msg: Msg,
) -> bool {
    let mut queue = VecDeque::from([msg]);
    let mut reconnect = false;
    while let Some(msg) = queue.pop_front() {
        source.applied(&msg);
        for effect in app.update(msg) {
            match effect {
                Effect::Intent(intent) => queue.push_back(intent),
                effect if effect.is_presenters() => present(effect),
                effect => {
                    reconnect |= effect == Effect::Session(SessionEffect::Reconnect);
                    source.carry_out(effect).await;
                }
            }
        }
    }
    reconnect
}

/// [`apply`] for the app's unit tests, which have no session: the effects it would carry out
/// (the presenter's included) are returned, in order, instead. Nothing here waits, so it is
/// done on its first poll.
#[cfg(test)]
pub(crate) fn apply_collecting(app: &mut App, msg: Msg) -> Vec<Effect> {
    use futures_util::FutureExt as _;

    struct Collect(Vec<Effect>);

    impl Source for Collect {
        async fn next(&mut self) -> Option<Msg> {
            None
        }

        async fn carry_out(&mut self, effect: Effect) {
            self.0.push(effect);
        }
    }

    let mut effects = Collect(Vec::new());
    let mut presented = Vec::new();
    apply_with(app, &mut effects, &mut |effect| presented.push(effect), msg)
        .now_or_never()
        .expect("collecting effects never waits");
    effects.0.extend(presented);
    effects.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{AppInit, ConnectionState};

    /// A session that opens, is lost, and opens again when the app asks to reconnect.
    struct Flaky {
        queue: VecDeque<Msg>,
    }

    impl Source for Flaky {
        async fn next(&mut self) -> Option<Msg> {
            self.queue.pop_front()
        }

        async fn carry_out(&mut self, effect: Effect) {
            if effect == Effect::Session(SessionEffect::Reconnect) {
                self.queue
                    .push_back(Msg::Server(ServerEvent::SetupComplete { session_id: None }));
            }
        }
    }

    /// Asks to retry once the session is lost; done when it is back.
    struct Retrier {
        lost: bool,
        retried: bool,
        shown: usize,
    }

    impl Presenter for Retrier {
        fn show(&mut self, _app: &App) -> anyhow::Result<Option<Msg>> {
            self.shown += 1;
            Ok(None)
        }

        fn observe(&mut self, app: &App) {
            self.lost = app.can_retry();
        }

        async fn next_input(&mut self) -> Option<Msg> {
            if self.lost && !self.retried {
                self.retried = true;
                return Some(Msg::Retry);
            }
            std::future::pending().await
        }

        fn finished(&self, app: &App, _source_open: bool) -> bool {
            self.retried && *app.connection() == ConnectionState::Connected
        }
    }

    #[tokio::test]
    async fn a_retry_after_the_source_ended_is_heard() {
        let mut app = App::new(AppInit::new("models/test", true, Vec::new()));
        let lost = CloseInfo {
            code: Some(1011),
            reason: String::new(),
            message: "Internal error.".into(),
            initiated_by_client: false,
        };
        let mut source = Flaky {
            queue: VecDeque::from([
                Msg::Server(ServerEvent::SetupComplete { session_id: None }),
                Msg::Server(ServerEvent::Closed(lost)),
            ]),
        };
        let mut presenter = Retrier {
            lost: false,
            retried: false,
            shown: 0,
        };
        tokio::time::timeout(
            Duration::from_secs(5),
            drive(&mut app, &mut source, &mut presenter),
        )
        .await
        .expect("the retried session is heard")
        .unwrap();
        assert!(presenter.retried && presenter.shown > 2);
        assert_eq!(*app.connection(), ConnectionState::Connected);
    }
}
