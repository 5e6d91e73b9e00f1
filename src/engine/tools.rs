//! The engine's tools part: the calls the model asks for, run and answered once by the
//! dispatcher (with the user's approval where a tool asks for it), the MCP servers whose tools
//! join the built-ins, and the smart-home devices those tools change. Its inputs are the
//! dispatcher's, the MCP hub's and the devices' news; it carries out the [`ToolEffect`]s.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};
use tracing::warn;

use crate::app::{Msg, ToolEffect};
use crate::tools::mcp::{Catalog, McpEvent, McpHub};
use crate::tools::{Decider, Device, Registry, SmartHome, ToolDispatcher, ToolEvent};
use livetalk_live::wire::ToolSet;

/// What the part took in that concerns another part.
pub(super) enum ToolNews {
    /// A call's news, for the app (after the session has seen how its service takes it).
    Call(ToolEvent),
    /// A message for the app.
    Msg(Msg),
    /// The tools the model is told of changed: declare these from the next connection on
    /// (at the next turn boundary with `hand_over`). The app then gets the new list.
    Declare {
        tools: Vec<ToolSet>,
        hand_over: bool,
        then: Msg,
    },
}

/// See the module doc.
pub(super) struct Tools {
    dispatcher: ToolDispatcher,
    events: mpsc::UnboundedReceiver<ToolEvent>,
    /// The built-in tools, which the MCP servers' tools are added to.
    builtins: Registry,
    mcp: McpHub,
    mcp_events: mpsc::UnboundedReceiver<McpEvent>,
    /// Tools the user turned off for this session.
    disabled: BTreeSet<String>,
    devices: watch::Receiver<Vec<Device>>,
}

impl Tools {
    /// The part for these tools and devices; `decider` settles calls of tools that ask for
    /// approval.
    pub(super) fn new(registry: Arc<Registry>, home: &SmartHome, decider: Decider) -> Self {
        let builtins = (*registry).clone();
        let (dispatcher, events) = ToolDispatcher::new(registry, decider);
        let (mcp, mcp_events) = McpHub::empty();
        Tools {
            dispatcher,
            events,
            builtins,
            mcp,
            mcp_events,
            disabled: BTreeSet::new(),
            devices: home.subscribe(),
        }
    }

    /// Adds the tools of these MCP servers (before the `setup` is built from
    /// [`Tools::registry`]).
    pub(super) fn attach_mcp(&mut self, hub: McpHub, events: mpsc::UnboundedReceiver<McpEvent>) {
        self.mcp = hub;
        self.mcp_events = events;
        self.dispatcher.replace_registry(Arc::new(self.compose()));
    }

    /// The tools calls run against now.
    pub(super) fn registry(&self) -> Arc<Registry> {
        self.dispatcher.registry()
    }

    /// Every tool and MCP server, for the tool list.
    pub(super) fn catalog(&self) -> Catalog {
        Catalog {
            tools: self.registry().entries(),
            servers: self.mcp.servers(),
        }
    }

    /// Calls still running.
    pub(super) fn in_flight(&self) -> usize {
        self.dispatcher.in_flight()
    }

    /// Stops these calls: their connection is gone, or the service cancelled them.
    pub(super) fn cancel(&mut self, ids: &[String]) {
        self.dispatcher.cancel(ids);
    }

    /// The built-ins, the MCP servers' tools and the user's choices, as one registry.
    fn compose(&self) -> Registry {
        let mut registry = self.builtins.clone();
        self.mcp.add_tools_to(&mut registry);
        for name in &self.disabled {
            registry.set_enabled(name, false);
        }
        registry
    }

    /// Runs calls against the tools as they are now; when that changes what the model is
    /// told, the new set is to be declared (at the next turn boundary with `hand_over`).
    /// Either way the app gets the new list.
    fn retool(&mut self, hand_over: bool) -> ToolNews {
        let registry = self.compose();
        let tools = super::launch::tool_sets(&registry);
        let changed = tools != super::launch::tool_sets(&self.registry());
        self.dispatcher.replace_registry(Arc::new(registry));
        let then = Msg::ToolCatalog(self.catalog());
        if changed {
            ToolNews::Declare {
                tools,
                hand_over,
                then,
            }
        } else {
            ToolNews::Msg(then)
        }
    }

    /// The next thing the dispatcher, the MCP servers or the devices have. Cancel-safe.
    pub(super) async fn next(&mut self) -> Option<Vec<ToolNews>> {
        tokio::select! {
            Some(event) = self.events.recv() => Some(vec![ToolNews::Call(event)]),
            Some(event) = self.mcp_events.recv() => {
                let news = match &event {
                    // A server that came (back) up: its tools at the next turn boundary.
                    McpEvent::Up { .. } => Some(self.retool(true)),
                    // As the service asks: the new list with the next connection.
                    McpEvent::ToolsChanged { .. } => Some(self.retool(false)),
                    // Its tools stay declared and answer with errors meanwhile.
                    McpEvent::Down { .. } => Some(ToolNews::Msg(Msg::ToolCatalog(self.catalog()))),
                    // Said before the listing's own event, which retools.
                    McpEvent::Trimmed { .. } => None,
                };
                // The event first, then what it changed.
                Some(std::iter::once(ToolNews::Msg(Msg::Mcp(event))).chain(news).collect())
            }
            Ok(()) = self.devices.changed() => {
                let devices = self.devices.borrow_and_update().clone();
                Some(vec![ToolNews::Msg(Msg::DevicesChanged(devices))])
            }
            else => None,
        }
    }

    /// Carries out one of the app's tool effects; what it changes for another part comes
    /// back.
    pub(super) fn carry_out(&mut self, effect: ToolEffect) -> Option<ToolNews> {
        match effect {
            ToolEffect::RunTools(calls) => self.dispatcher.dispatch(calls),
            ToolEffect::CancelTools(ids) => {
                self.dispatcher.cancel(&ids);
            }
            ToolEffect::ToolVerdict { key, verdict } => {
                if !self.dispatcher.decide(key, verdict) {
                    tracing::debug!(
                        ?key,
                        "a verdict came after its call was answered or cancelled"
                    );
                }
            }
            ToolEffect::SetToolEnabled { name, enabled } => {
                if enabled {
                    self.disabled.remove(&name);
                } else {
                    self.disabled.insert(name);
                }
                return Some(self.retool(true));
            }
            ToolEffect::RestartMcpServer(name) => {
                if self.mcp.restart(&name) {
                    return Some(ToolNews::Msg(Msg::ToolCatalog(self.catalog())));
                }
                warn!("no MCP server named {name} to restart");
            }
        }
        None
    }
}
