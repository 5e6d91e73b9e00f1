//! Whether a tool call waits for a person: the per-tool setting, where a tool comes from, what
//! its server claims about it, the headless policy, and the one decision made from them.
//!
//! What the user set wins: `always` never runs unasked (the TUI waits for the person; headless,
//! only `--approve all` runs it), `never` runs under every policy. Unset, the policy decides, and
//! an MCP server's annotations are only its claims: a tool it calls read-only runs unasked only
//! when no hint says it destroys anything.

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
    /// Every MCP call is refused unless the user set the tool to `never`; built-ins run.
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
    /// The policy `--approve` gave.
    Policy(ApprovePolicy),
    /// No `--approve` was given: the default policy applies, and a refusal says so rather
    /// than name a flag the user never typed.
    DefaultPolicy,
}

impl Decider {
    /// The headless decider: the policy `--approve` gave, or the default one.
    pub fn headless(given: Option<ApprovePolicy>) -> Self {
        given.map_or(Decider::DefaultPolicy, Decider::Policy)
    }
}

/// Why a call runs without anybody being asked: shown in the tool log and the tool list, so
/// a call that ran on a server's word says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unasked {
    /// One of livetalk's own tools, with no setting: they run at once.
    BuiltIn,
    /// The user set the tool (or its server) to `approval = "never"`.
    SetToNever,
    /// Its MCP server annotates it read-only and not destructive: the server's claim.
    ServerSaysReadOnly,
    /// A headless run started with `--approve all`.
    ApproveAll,
}

impl Unasked {
    /// In the user's words, after "ran without asking: ".
    pub fn reason(self) -> &'static str {
        match self {
            Unasked::BuiltIn => "a built-in tool",
            Unasked::SetToNever => "approval = \"never\" in your config",
            Unasked::ServerSaysReadOnly => "its server says it only reads",
            Unasked::ApproveAll => "--approve all",
        }
    }

    /// A few words for a narrow column, after "unasked".
    pub fn tag(self) -> &'static str {
        match self {
            Unasked::BuiltIn => "built-in",
            Unasked::SetToNever => "your config",
            Unasked::ServerSaysReadOnly => "server says read-only",
            Unasked::ApproveAll => "--approve all",
        }
    }

    /// False for livetalk's own tools, whose running at once is no news.
    pub fn worth_showing(self) -> bool {
        self != Unasked::BuiltIn
    }
}

/// What happens to one call before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it at once, nobody asked, for this reason.
    Run(Unasked),
    /// Wait for the user (its timeout paused meanwhile).
    Ask,
    /// Answer the model with this refusal instead of running the tool.
    Refuse(String),
}

/// What an MCP server's annotations claim about a tool (absent hints are `None`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Hints {
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
}

impl Hints {
    /// True only when the server calls it read-only and no hint contradicts that: a tool
    /// annotated both read-only and destructive is taken at its worse word.
    pub fn claims_read_only(self) -> bool {
        self.read_only == Some(true) && self.destructive != Some(true)
    }
}

/// A tool's origin, setting and claims, as the dispatcher needs them for every call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    pub origin: Origin,
    /// What the user set for the tool (its own setting, else its server's), if anything.
    pub configured: Option<Approval>,
    /// The server's word that the tool only reads (always false for built-ins).
    pub claims_read_only: bool,
}

impl Gate {
    /// A built-in tool: runs at once unless configured otherwise.
    pub fn built_in(configured: Option<Approval>) -> Gate {
        Gate {
            origin: Origin::BuiltIn,
            configured,
            claims_read_only: false,
        }
    }

    /// An MCP tool: asks unless configured otherwise or its server's hints claim it only reads
    /// (`configured` is the tool's own setting, else the server's).
    pub fn mcp(server: impl Into<String>, configured: Option<Approval>, hints: Hints) -> Gate {
        Gate {
            origin: Origin::Mcp(server.into()),
            configured,
            claims_read_only: hints.claims_read_only(),
        }
    }

    /// What happens to a call of the tool named `name`.
    pub fn decide(&self, name: &str, decider: Decider) -> Decision {
        let from = match &self.origin {
            Origin::BuiltIn => "a built-in tool".to_owned(),
            Origin::Mcp(server) => format!("from the MCP server \"{server}\""),
        };
        // The headless policy, if nobody is there; and how the run came to have it.
        let (policy, started) = match decider {
            Decider::Person => (None, String::new()),
            Decider::Policy(policy) => (
                Some(policy),
                format!(
                    "livetalk was started with --approve {}",
                    policy_flag(policy)
                ),
            ),
            Decider::DefaultPolicy => (
                Some(ApprovePolicy::default()),
                format!(
                    "livetalk runs headless and no --approve was given, so --approve {} applies",
                    policy_flag(ApprovePolicy::default())
                ),
            ),
        };
        match (self.configured, &self.origin, policy) {
            (Some(Approval::Never), _, _) => Decision::Run(Unasked::SetToNever),
            (Some(Approval::Always), _, None) => Decision::Ask,
            (None, Origin::BuiltIn, _) => Decision::Run(Unasked::BuiltIn),
            (_, _, Some(ApprovePolicy::All)) => Decision::Run(Unasked::ApproveAll),
            (Some(Approval::Always), _, Some(_)) => Decision::Refuse(format!(
                "The user wants to approve every call of \"{name}\" ({from}) and nobody is there \
                 to approve it ({started}), so it was not called."
            )),
            (None, Origin::Mcp(_), Some(ApprovePolicy::None)) => Decision::Refuse(format!(
                "The user does not allow MCP tools to run unattended ({started}), so \
                 \"{name}\" ({from}) was not called."
            )),
            (None, Origin::Mcp(_), _) if self.claims_read_only => {
                Decision::Run(Unasked::ServerSaysReadOnly)
            }
            (None, Origin::Mcp(_), None) => Decision::Ask,
            (None, Origin::Mcp(_), Some(_)) => Decision::Refuse(format!(
                "The user has not allowed \"{name}\" ({from}) to run without approval, and \
                 nobody is there to approve it ({started})."
            )),
        }
    }

    /// Why calls of this tool run unasked at the TUI, or `None` when they wait for the user.
    pub fn unasked_in_person(&self) -> Option<Unasked> {
        match self.decide("", Decider::Person) {
            Decision::Run(why) => Some(why),
            Decision::Ask | Decision::Refuse(_) => None,
        }
    }
}

/// The policy as `--approve` spells it.
fn policy_flag(policy: ApprovePolicy) -> String {
    clap::ValueEnum::to_possible_value(&policy)
        .map(|value| value.get_name().to_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const READ_ONLY: Hints = Hints {
        read_only: Some(true),
        destructive: Some(false),
    };
    const CONTRADICTORY: Hints = Hints {
        read_only: Some(true),
        destructive: Some(true),
    };
    const POLICIES: [ApprovePolicy; 3] = [
        ApprovePolicy::All,
        ApprovePolicy::ReadOnly,
        ApprovePolicy::None,
    ];

    #[test]
    fn a_person_is_asked_unless_the_tool_is_built_in_set_to_never_or_claimed_read_only() {
        let person = |gate: Gate| gate.decide("t", Decider::Person);
        assert_eq!(
            person(Gate::built_in(None)),
            Decision::Run(Unasked::BuiltIn)
        );
        assert_eq!(
            person(Gate::built_in(Some(Approval::Always))),
            Decision::Ask
        );
        assert_eq!(
            person(Gate::mcp("s", None, Hints::default())),
            Decision::Ask
        );
        assert_eq!(
            person(Gate::mcp("s", None, READ_ONLY)),
            Decision::Run(Unasked::ServerSaysReadOnly)
        );
        assert_eq!(
            person(Gate::mcp("s", Some(Approval::Always), READ_ONLY)),
            Decision::Ask
        );
        assert_eq!(
            person(Gate::mcp("s", Some(Approval::Never), Hints::default())),
            Decision::Run(Unasked::SetToNever)
        );
    }

    #[test]
    fn a_refusal_names_the_flag_only_when_it_was_given() {
        let gate = Gate::mcp("files", None, Hints::default());
        let Decision::Refuse(why) = gate.decide("delete_all_files", Decider::headless(None)) else {
            panic!("the default policy refuses an unannotated MCP tool");
        };
        assert!(!why.contains("started with"), "{why}");
        assert!(
            why.contains("no --approve was given, so --approve read-only applies"),
            "{why}"
        );
        let given = gate.decide(
            "delete_all_files",
            Decider::headless(Some(ApprovePolicy::ReadOnly)),
        );
        let Decision::Refuse(why) = given else {
            panic!("--approve read-only refuses it too");
        };
        assert!(why.contains("started with --approve read-only"), "{why}");
        // The default is read-only in everything but its words.
        for (hints, configured) in [
            (READ_ONLY, None),
            (Hints::default(), Some(Approval::Always)),
            (Hints::default(), Some(Approval::Never)),
        ] {
            let gate = Gate::mcp("s", configured, hints);
            let same = |d: Decision| match d {
                Decision::Refuse(_) => None,
                other => Some(other),
            };
            assert_eq!(
                same(gate.decide("t", Decider::DefaultPolicy)),
                same(gate.decide("t", Decider::Policy(ApprovePolicy::ReadOnly)))
            );
        }
    }

    #[test]
    fn hints_that_contradict_or_destroy_ask() {
        for hints in [
            CONTRADICTORY,
            Hints {
                read_only: Some(false),
                destructive: Some(true),
            },
            Hints {
                read_only: None,
                destructive: Some(false),
            },
            Hints {
                read_only: Some(true),
                destructive: None,
            },
        ] {
            let gate = Gate::mcp("s", None, hints);
            let expected = if hints
                == (Hints {
                    read_only: Some(true),
                    destructive: None,
                }) {
                Decision::Run(Unasked::ServerSaysReadOnly)
            } else {
                Decision::Ask
            };
            assert_eq!(gate.decide("t", Decider::Person), expected, "{hints:?}");
        }
        let Decision::Refuse(why) = Gate::mcp("files", None, CONTRADICTORY)
            .decide("delete_all_files", Decider::Policy(ApprovePolicy::ReadOnly))
        else {
            panic!("a tool claimed both read-only and destructive is refused headless");
        };
        assert!(
            why.contains("\"delete_all_files\"") && why.contains("--approve read-only"),
            "{why}"
        );
    }

    #[test]
    fn what_the_user_set_wins_over_every_policy() {
        for origin in [
            Gate::built_in(Some(Approval::Always)),
            Gate::mcp("s", Some(Approval::Always), READ_ONLY),
        ] {
            for policy in POLICIES {
                let decision = origin.decide("t", Decider::Policy(policy));
                if policy == ApprovePolicy::All {
                    assert_eq!(decision, Decision::Run(Unasked::ApproveAll));
                } else {
                    let Decision::Refuse(why) = decision else {
                        panic!("\"always\" never runs unasked under {policy:?}: {origin:?}");
                    };
                    assert!(why.contains("approve every call"), "{why}");
                }
            }
        }
        for origin in [
            Gate::built_in(Some(Approval::Never)),
            Gate::mcp("s", Some(Approval::Never), CONTRADICTORY),
        ] {
            for policy in POLICIES {
                assert_eq!(
                    origin.decide("t", Decider::Policy(policy)),
                    Decision::Run(Unasked::SetToNever),
                    "{origin:?} under {policy:?}"
                );
            }
        }
    }

    #[test]
    fn unset_the_policy_decides() {
        let policy = Decider::Policy;
        let asks = Gate::mcp("everything", None, Hints::default());
        let read_only = Gate::mcp("everything", None, READ_ONLY);
        let built_in = Gate::built_in(None);
        for gate in [&asks, &read_only, &built_in] {
            assert_eq!(
                gate.decide("t", policy(ApprovePolicy::All)),
                if gate.origin == Origin::BuiltIn {
                    Decision::Run(Unasked::BuiltIn)
                } else {
                    Decision::Run(Unasked::ApproveAll)
                }
            );
        }
        for p in [ApprovePolicy::ReadOnly, ApprovePolicy::None] {
            assert_eq!(
                built_in.decide("t", policy(p)),
                Decision::Run(Unasked::BuiltIn)
            );
        }
        assert_eq!(
            read_only.decide("t", policy(ApprovePolicy::ReadOnly)),
            Decision::Run(Unasked::ServerSaysReadOnly)
        );
        let Decision::Refuse(why) = asks.decide("echo", policy(ApprovePolicy::ReadOnly)) else {
            panic!("an MCP tool that needs approval is refused headless");
        };
        assert!(
            why.contains("\"echo\"") && why.contains("--approve read-only"),
            "{why}"
        );
        for gate in [&asks, &read_only] {
            let Decision::Refuse(why) = gate.decide("t", policy(ApprovePolicy::None)) else {
                panic!("--approve none refuses unset MCP tools: {gate:?}");
            };
            assert!(why.contains("--approve none"), "{why}");
        }
    }
}
