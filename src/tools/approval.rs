//! Whether a tool call waits for a person: the per-tool setting, where a tool comes from, the
//! headless policy, and the one decision made from them.

use serde::{Deserialize, Serialize};

/// The configured `approval` of a tool (`[tools]` for built-ins, `[mcp_servers.NAME]` and
/// `[mcp_servers.NAME.tools.TOOL]` for MCP tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Every call waits for the user to approve, deny, edit or answer it.
    Always,
    /// Calls run at once.
    Never,
}

/// What a headless run does with calls, as there is nobody to ask (`--approve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ApprovePolicy {
    /// Every call runs.
    All,
    /// Built-ins and tools that need no approval run; the rest are refused.
    #[default]
    ReadOnly,
    /// Every MCP call is refused; built-ins run.
    None,
}

/// Where a tool comes from, shown beside it and deciding its defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    BuiltIn,
    /// An MCP server, by its configured name.
    Mcp(String),
}

/// Who decides about a call: a person at the TUI, or the headless policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decider {
    Person,
    Policy(ApprovePolicy),
}

/// What happens to one call before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Run,
    /// Wait for the user (its timeout paused meanwhile).
    Ask,
    /// Answer the model with this refusal instead of running the tool.
    Refuse(String),
}

/// A tool's origin and approval, as the dispatcher needs them for every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub origin: Origin,
    pub approval: Approval,
}

impl Gate {
    /// A built-in tool: runs at once unless configured otherwise.
    pub fn built_in(configured: Option<Approval>) -> Gate {
        Gate {
            origin: Origin::BuiltIn,
            approval: configured.unwrap_or(Approval::Never),
        }
    }

    /// An MCP tool: asks unless configured otherwise or annotated read-only by its server
    /// (`configured` is the tool's own setting, else the server's).
    pub fn mcp(server: impl Into<String>, configured: Option<Approval>, read_only: bool) -> Gate {
        let approval = configured.unwrap_or(if read_only {
            Approval::Never
        } else {
            Approval::Always
        });
        Gate {
            origin: Origin::Mcp(server.into()),
            approval,
        }
    }

    /// What happens to a call of the tool named `name`.
    pub fn decide(&self, name: &str, decider: Decider) -> Decision {
        match (decider, &self.origin, self.approval) {
            (Decider::Person, _, Approval::Always) => Decision::Ask,
            (Decider::Person, _, Approval::Never) => Decision::Run,
            (Decider::Policy(ApprovePolicy::All), _, _) => Decision::Run,
            (Decider::Policy(_), Origin::BuiltIn, _) => Decision::Run,
            (Decider::Policy(ApprovePolicy::ReadOnly), Origin::Mcp(_), Approval::Never) => {
                Decision::Run
            }
            (Decider::Policy(ApprovePolicy::ReadOnly), Origin::Mcp(server), Approval::Always) => {
                Decision::Refuse(format!(
                    "The user has not allowed \"{name}\" (from the MCP server \"{server}\") to \
                     run without approval, and nobody is there to approve it \
                     (livetalk was started with --approve read-only)."
                ))
            }
            (Decider::Policy(ApprovePolicy::None), Origin::Mcp(server), _) => {
                Decision::Refuse(format!(
                    "The user does not allow tools from the MCP server \"{server}\" to run \
                     (livetalk was started with --approve none), so \"{name}\" was not called."
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_person_is_asked_only_where_approval_is_always() {
        assert_eq!(
            Gate::built_in(None).decide("t", Decider::Person),
            Decision::Run
        );
        assert_eq!(
            Gate::built_in(Some(Approval::Always)).decide("t", Decider::Person),
            Decision::Ask
        );
        assert_eq!(
            Gate::mcp("s", None, false).decide("t", Decider::Person),
            Decision::Ask
        );
        assert_eq!(
            Gate::mcp("s", None, true).decide("t", Decider::Person),
            Decision::Run
        );
        assert_eq!(
            Gate::mcp("s", Some(Approval::Always), true).decide("t", Decider::Person),
            Decision::Ask
        );
    }

    #[test]
    fn headless_policies() {
        let asks = Gate::mcp("everything", None, false);
        let read_only = Gate::mcp("everything", None, true);
        let built_in = Gate::built_in(Some(Approval::Always));
        let policy = |p| Decider::Policy(p);
        for gate in [&asks, &read_only, &built_in] {
            assert_eq!(gate.decide("t", policy(ApprovePolicy::All)), Decision::Run);
        }
        assert_eq!(
            built_in.decide("t", policy(ApprovePolicy::ReadOnly)),
            Decision::Run
        );
        assert_eq!(
            read_only.decide("t", policy(ApprovePolicy::ReadOnly)),
            Decision::Run
        );
        let Decision::Refuse(why) = asks.decide("echo", policy(ApprovePolicy::ReadOnly)) else {
            panic!("an MCP tool that needs approval is refused headless");
        };
        assert!(
            why.contains("\"echo\"") && why.contains("--approve"),
            "{why}"
        );
        assert_eq!(
            built_in.decide("t", policy(ApprovePolicy::None)),
            Decision::Run
        );
        assert!(matches!(
            read_only.decide("t", policy(ApprovePolicy::None)),
            Decision::Refuse(_)
        ));
    }
}
