//! The typed router: a request line becomes one [`Endpoint`], or a 404/405 reason.
//!
//! Adding a route: add its variant to [`Endpoint`], list it under its path in
//! [`Endpoint::resolve`], and give it a method, a path template and an access level in the
//! matches below. Every match is exhaustive, so the compiler names each place a new variant
//! still needs, including its handler in `api::serve`.

use hyper::Method;

use crate::auth::Role;

/// Who may call an endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// No token (health, readiness, metrics).
    Public,
    /// Any valid token (who am I).
    AnyToken,
    /// An agent token: proposals and outcomes.
    Agent,
    /// An agent, viewer or admin token: a proposal's current verdict.
    AgentOrReader,
    /// A viewer or admin token: every read.
    Reader,
    /// An admin token: every change (approvals, pauses, flags, overrides, policies).
    Admin,
    /// A console page anyone may load: the sign-in form and the static assets.
    ConsoleOpen,
    /// A console page for a signed-in viewer or admin (a session cookie).
    ConsoleSignedIn,
    /// A console action for a signed-in admin.
    ConsoleAdmin,
}

impl Access {
    /// True when a token of `role` may call it.
    pub fn allows(self, role: Role) -> bool {
        match self {
            Access::Public | Access::AnyToken => true,
            Access::Agent => role == Role::Agent,
            Access::AgentOrReader => true,
            Access::Reader => matches!(role, Role::Viewer | Role::Admin),
            Access::Admin => role == Role::Admin,
            // The console checks its session itself; a bearer token never opens it.
            Access::ConsoleOpen | Access::ConsoleSignedIn | Access::ConsoleAdmin => false,
        }
    }

    /// The roles that may call it, for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Access::Public | Access::AnyToken | Access::AgentOrReader => "any",
            Access::Agent => "an agent",
            Access::Reader => "a viewer or admin",
            Access::Admin => "an admin",
            Access::ConsoleOpen => "no",
            Access::ConsoleSignedIn => "a console session of a viewer or admin",
            Access::ConsoleAdmin => "a console session of an admin",
        }
    }
}

/// One operation of the API: a method on a path, with the path's parameters (still
/// percent-encoded; handlers decode and validate them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint<'a> {
    Health,
    Ready,
    Metrics,
    WhoAmI,
    Propose,
    GetVerdict {
        proposal_id: &'a str,
    },
    ReportOutcome {
        proposal_id: &'a str,
    },
    Approve {
        proposal_id: &'a str,
    },
    Deny {
        proposal_id: &'a str,
    },
    ListPending,
    ListDecisions,
    GetDecision {
        proposal_id: &'a str,
    },
    ListJobs,
    ListRegions,
    FlagRegion {
        region: &'a str,
    },
    UnflagRegion {
        region: &'a str,
    },
    ListClusters,
    SetOverrides {
        cluster: &'a str,
    },
    DeleteOverrides {
        cluster: &'a str,
    },
    ListPauses,
    /// `kind` is `fleet`, `region`, `cluster` or `job` (checked by the handler); `value` is
    /// absent for `fleet`.
    SetPause {
        kind: &'a str,
        value: Option<&'a str>,
    },
    ClearPause {
        kind: &'a str,
        value: Option<&'a str>,
    },
    GetPolicy,
    SetPolicy,
    ListAdminActions,
    /// A page or form of the web console under `/ui/`.
    Console(ConsoleRoute<'a>),
}

/// The web console's pages and forms (`/ui/`). HTML for browsers, signed in with a session
/// cookie (see `console::session`); every `POST` is a form carrying a CSRF token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsoleRoute<'a> {
    /// `GET /ui`: redirects to `/ui/`.
    Root,
    /// `GET /ui/`: every job, its parallelism and the slots saved.
    Fleet,
    /// `GET /ui/assets/{name}`: the stylesheet and the script, built into the binary.
    Asset {
        name: &'a str,
    },
    SignInForm,
    SignIn,
    SignOut,
    /// `GET /ui/audit`: the audit with filters and paging.
    Audit,
    /// `GET /ui/jobs/{job}`: one job's decisions and a chart of its parallelism.
    Job {
        job_id: &'a str,
    },
    /// `GET /ui/regions`: evacuating regions.
    Regions,
    /// `POST /ui/regions`: flag a region (form: region, reason).
    FlagRegion,
    /// `POST /ui/regions/{region}/clear`: lift a region's flag.
    UnflagRegion {
        region: &'a str,
    },
    /// `GET /ui/pending`: the proposals waiting for an admin, with their evidence.
    Pending,
    /// `POST /ui/pending/{proposal}/approve` (form: comment).
    ApprovePending {
        proposal_id: &'a str,
    },
    /// `POST /ui/pending/{proposal}/deny` (form: comment).
    DenyPending {
        proposal_id: &'a str,
    },
    /// `POST /ui/pauses`: pause a scope (form: kind, value, reason, expires_in_minutes).
    Pause,
    /// `POST /ui/pauses/{kind}[/{value}]/clear`: lift a pause; the scope is spelled as in
    /// `/v1/pauses/{kind}[/{value}]` (`fleet` has no value).
    LiftPause {
        kind: &'a str,
        value: Option<&'a str>,
    },
}

/// Why a request line names no endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRoute {
    /// No such path.
    NotFound,
    /// The path exists with other methods.
    MethodNotAllowed {
        template: &'static str,
        allow: Vec<Method>,
    },
}

impl<'a> Endpoint<'a> {
    /// The endpoint `method path` names. The path must be exactly as served: one leading
    /// `/`, no empty segments (`//v1/decisions` and trailing slashes are not found).
    /// `HEAD` is answered wherever `GET` is, without a body (hyper drops it).
    pub fn resolve(method: &Method, path: &'a str) -> Result<Endpoint<'a>, NoRoute> {
        use Endpoint as E;
        let segments: Vec<&str> = path
            .strip_prefix('/')
            .ok_or(NoRoute::NotFound)?
            .split('/')
            .collect();
        // The console's home, `/ui/`, is the one path that ends in `/`.
        let console_home = segments.as_slice() == ["ui", ""];
        if !console_home && segments.iter().any(|s| s.is_empty()) {
            return Err(NoRoute::NotFound);
        }
        // Every endpoint of the path, one per method.
        let on_path: Vec<Endpoint<'a>> = match segments.as_slice() {
            _ if console_home => vec![E::Console(ConsoleRoute::Fleet)],
            ["healthz"] => vec![E::Health],
            ["readyz"] => vec![E::Ready],
            ["metrics"] => vec![E::Metrics],
            ["v1", "whoami"] => vec![E::WhoAmI],
            ["v1", "proposals"] => vec![E::Propose],
            ["v1", "proposals", proposal_id] => vec![E::GetVerdict { proposal_id }],
            ["v1", "proposals", proposal_id, "outcome"] => {
                vec![E::ReportOutcome { proposal_id }]
            }
            ["v1", "proposals", proposal_id, "approve"] => vec![E::Approve { proposal_id }],
            ["v1", "proposals", proposal_id, "deny"] => vec![E::Deny { proposal_id }],
            ["v1", "pending"] => vec![E::ListPending],
            ["v1", "decisions"] => vec![E::ListDecisions],
            ["v1", "decisions", proposal_id] => vec![E::GetDecision { proposal_id }],
            ["v1", "jobs"] => vec![E::ListJobs],
            ["v1", "regions"] => vec![E::ListRegions],
            ["v1", "regions", region, "evacuation"] => {
                vec![E::FlagRegion { region }, E::UnflagRegion { region }]
            }
            ["v1", "clusters"] => vec![E::ListClusters],
            ["v1", "clusters", cluster, "overrides"] => {
                vec![E::SetOverrides { cluster }, E::DeleteOverrides { cluster }]
            }
            ["v1", "pauses"] => vec![E::ListPauses],
            ["v1", "pauses", kind] => vec![
                E::SetPause { kind, value: None },
                E::ClearPause { kind, value: None },
            ],
            ["v1", "pauses", kind, value] => vec![
                E::SetPause {
                    kind,
                    value: Some(value),
                },
                E::ClearPause {
                    kind,
                    value: Some(value),
                },
            ],
            ["v1", "policies"] => vec![E::GetPolicy, E::SetPolicy],
            ["v1", "admin-actions"] => vec![E::ListAdminActions],
            ["ui", rest @ ..] => ConsoleRoute::on_path(rest)
                .ok_or(NoRoute::NotFound)?
                .into_iter()
                .map(E::Console)
                .collect(),
            _ => return Err(NoRoute::NotFound),
        };
        let wanted = if method == Method::HEAD {
            &Method::GET
        } else {
            method
        };
        if let Some(endpoint) = on_path.iter().find(|e| e.method() == *wanted) {
            return Ok(*endpoint);
        }
        let mut allow: Vec<Method> = on_path.iter().map(Endpoint::method).collect();
        if allow.contains(&Method::GET) {
            allow.push(Method::HEAD);
        }
        Err(NoRoute::MethodNotAllowed {
            template: on_path[0].template(),
            allow,
        })
    }

    /// The HTTP method this endpoint answers.
    pub fn method(&self) -> Method {
        use Endpoint as E;
        match self {
            E::Health
            | E::Ready
            | E::Metrics
            | E::WhoAmI
            | E::GetVerdict { .. }
            | E::ListPending
            | E::ListDecisions
            | E::GetDecision { .. }
            | E::ListJobs
            | E::ListRegions
            | E::ListClusters
            | E::ListPauses
            | E::GetPolicy
            | E::ListAdminActions => Method::GET,
            E::Propose | E::ReportOutcome { .. } | E::Approve { .. } | E::Deny { .. } => {
                Method::POST
            }
            E::FlagRegion { .. } | E::SetOverrides { .. } | E::SetPause { .. } | E::SetPolicy => {
                Method::PUT
            }
            E::UnflagRegion { .. } | E::DeleteOverrides { .. } | E::ClearPause { .. } => {
                Method::DELETE
            }
            E::Console(route) => route.method(),
        }
    }

    /// The path with its parameters named, for metrics labels and messages.
    pub fn template(&self) -> &'static str {
        use Endpoint as E;
        match self {
            E::Health => "/healthz",
            E::Ready => "/readyz",
            E::Metrics => "/metrics",
            E::WhoAmI => "/v1/whoami",
            E::Propose => "/v1/proposals",
            E::GetVerdict { .. } => "/v1/proposals/{id}",
            E::ReportOutcome { .. } => "/v1/proposals/{id}/outcome",
            E::Approve { .. } => "/v1/proposals/{id}/approve",
            E::Deny { .. } => "/v1/proposals/{id}/deny",
            E::ListPending => "/v1/pending",
            E::ListDecisions => "/v1/decisions",
            E::GetDecision { .. } => "/v1/decisions/{id}",
            E::ListJobs => "/v1/jobs",
            E::ListRegions => "/v1/regions",
            E::FlagRegion { .. } | E::UnflagRegion { .. } => "/v1/regions/{region}/evacuation",
            E::ListClusters => "/v1/clusters",
            E::SetOverrides { .. } | E::DeleteOverrides { .. } => {
                "/v1/clusters/{cluster}/overrides"
            }
            E::ListPauses => "/v1/pauses",
            E::SetPause { value: None, .. } | E::ClearPause { value: None, .. } => {
                "/v1/pauses/{scope}"
            }
            E::SetPause { value: Some(_), .. } | E::ClearPause { value: Some(_), .. } => {
                "/v1/pauses/{kind}/{value}"
            }
            E::GetPolicy | E::SetPolicy => "/v1/policies",
            E::ListAdminActions => "/v1/admin-actions",
            E::Console(route) => route.template(),
        }
    }

    /// Who may call it.
    pub fn access(&self) -> Access {
        use Endpoint as E;
        match self {
            E::Health | E::Ready | E::Metrics => Access::Public,
            E::WhoAmI => Access::AnyToken,
            E::Propose | E::ReportOutcome { .. } => Access::Agent,
            E::GetVerdict { .. } => Access::AgentOrReader,
            E::ListPending
            | E::ListDecisions
            | E::GetDecision { .. }
            | E::ListJobs
            | E::ListRegions
            | E::ListClusters
            | E::ListPauses
            | E::GetPolicy
            | E::ListAdminActions => Access::Reader,
            E::Approve { .. }
            | E::Deny { .. }
            | E::FlagRegion { .. }
            | E::UnflagRegion { .. }
            | E::SetOverrides { .. }
            | E::DeleteOverrides { .. }
            | E::SetPause { .. }
            | E::ClearPause { .. }
            | E::SetPolicy => Access::Admin,
            E::Console(route) => route.access(),
        }
    }
}

impl<'a> ConsoleRoute<'a> {
    /// Every console endpoint of the path below `/ui` (but `/ui/`, see `Endpoint::resolve`).
    fn on_path(rest: &[&'a str]) -> Option<Vec<ConsoleRoute<'a>>> {
        use ConsoleRoute as C;
        Some(match rest {
            [] => vec![C::Root],
            ["assets", name] => vec![C::Asset { name }],
            ["sign-in"] => vec![C::SignInForm, C::SignIn],
            ["sign-out"] => vec![C::SignOut],
            ["audit"] => vec![C::Audit],
            ["jobs", job_id] => vec![C::Job { job_id }],
            ["regions"] => vec![C::Regions, C::FlagRegion],
            ["regions", region, "clear"] => vec![C::UnflagRegion { region }],
            ["pending"] => vec![C::Pending],
            ["pending", proposal_id, "approve"] => vec![C::ApprovePending { proposal_id }],
            ["pending", proposal_id, "deny"] => vec![C::DenyPending { proposal_id }],
            ["pauses"] => vec![C::Pause],
            ["pauses", kind, "clear"] => vec![C::LiftPause { kind, value: None }],
            ["pauses", kind, value, "clear"] => vec![C::LiftPause {
                kind,
                value: Some(value),
            }],
            _ => return None,
        })
    }

    pub fn method(&self) -> Method {
        use ConsoleRoute as C;
        match self {
            C::Root
            | C::Fleet
            | C::Asset { .. }
            | C::SignInForm
            | C::Audit
            | C::Job { .. }
            | C::Regions
            | C::Pending => Method::GET,
            C::SignIn
            | C::SignOut
            | C::FlagRegion
            | C::UnflagRegion { .. }
            | C::ApprovePending { .. }
            | C::DenyPending { .. }
            | C::Pause
            | C::LiftPause { .. } => Method::POST,
        }
    }

    pub fn template(&self) -> &'static str {
        use ConsoleRoute as C;
        match self {
            C::Root => "/ui",
            C::Fleet => "/ui/",
            C::Asset { .. } => "/ui/assets/{name}",
            C::SignInForm | C::SignIn => "/ui/sign-in",
            C::SignOut => "/ui/sign-out",
            C::Audit => "/ui/audit",
            C::Job { .. } => "/ui/jobs/{job}",
            C::Regions | C::FlagRegion => "/ui/regions",
            C::UnflagRegion { .. } => "/ui/regions/{region}/clear",
            C::Pending => "/ui/pending",
            C::ApprovePending { .. } => "/ui/pending/{proposal}/approve",
            C::DenyPending { .. } => "/ui/pending/{proposal}/deny",
            C::Pause => "/ui/pauses",
            C::LiftPause { value: None, .. } => "/ui/pauses/{scope}/clear",
            C::LiftPause { value: Some(_), .. } => "/ui/pauses/{kind}/{value}/clear",
        }
    }

    pub fn access(&self) -> Access {
        use ConsoleRoute as C;
        match self {
            C::Root | C::Asset { .. } | C::SignInForm | C::SignIn => Access::ConsoleOpen,
            C::Fleet | C::SignOut | C::Audit | C::Job { .. } | C::Regions | C::Pending => {
                Access::ConsoleSignedIn
            }
            C::FlagRegion
            | C::UnflagRegion { .. }
            | C::ApprovePending { .. }
            | C::DenyPending { .. }
            | C::Pause
            | C::LiftPause { .. } => Access::ConsoleAdmin,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(method, path template)` of every operation `docs/openapi.yaml` describes.
    fn documented_operations() -> Vec<(String, String)> {
        let spec = include_str!("../../docs/openapi.yaml");
        let mut ops = Vec::new();
        let mut path = None;
        for line in spec.lines().skip_while(|l| *l != "paths:").skip(1) {
            if !line.starts_with(' ') && !line.is_empty() {
                break;
            }
            if let Some(p) = line.strip_prefix("  /").and_then(|l| l.strip_suffix(':')) {
                path = Some(format!("/{p}"));
            } else if let Some(m) = line.strip_prefix("    ").and_then(|l| l.strip_suffix(':')) {
                if ["get", "post", "put", "delete"].contains(&m) {
                    ops.push((m.to_ascii_uppercase(), path.clone().expect("a path")));
                }
            }
        }
        ops
    }

    /// The API's endpoints (the console's HTML pages are not part of it). A new variant
    /// fails to compile in the match below until it is listed here and in the OpenAPI file.
    fn api_endpoints() -> Vec<Endpoint<'static>> {
        use Endpoint as E;
        let all = vec![
            E::Health,
            E::Ready,
            E::Metrics,
            E::Propose,
            E::ReportOutcome { proposal_id: "p" },
            E::ListDecisions,
            E::ListJobs,
            E::ListRegions,
            E::FlagRegion { region: "r" },
            E::UnflagRegion { region: "r" },
            E::ListClusters,
            E::SetOverrides { cluster: "c" },
            E::DeleteOverrides { cluster: "c" },
            E::WhoAmI,
            E::GetVerdict { proposal_id: "p" },
            E::Approve { proposal_id: "p" },
            E::Deny { proposal_id: "p" },
            E::ListPending,
            E::GetDecision { proposal_id: "p" },
            E::ListPauses,
            E::SetPause {
                kind: "fleet",
                value: None,
            },
            E::ClearPause {
                kind: "fleet",
                value: None,
            },
            E::SetPause {
                kind: "k",
                value: Some("v"),
            },
            E::ClearPause {
                kind: "k",
                value: Some("v"),
            },
            E::GetPolicy,
            E::SetPolicy,
            E::ListAdminActions,
        ];
        for e in &all {
            match e {
                E::Health
                | E::Ready
                | E::Metrics
                | E::Propose
                | E::ReportOutcome { .. }
                | E::ListDecisions
                | E::ListJobs
                | E::ListRegions
                | E::FlagRegion { .. }
                | E::UnflagRegion { .. }
                | E::ListClusters
                | E::SetOverrides { .. }
                | E::DeleteOverrides { .. }
                | E::WhoAmI
                | E::GetVerdict { .. }
                | E::Approve { .. }
                | E::Deny { .. }
                | E::ListPending
                | E::GetDecision { .. }
                | E::ListPauses
                | E::SetPause { .. }
                | E::ClearPause { .. }
                | E::GetPolicy
                | E::SetPolicy
                | E::ListAdminActions
                | E::Console(_) => {}
            }
        }
        all
    }

    #[test]
    fn the_openapi_description_matches_the_router() {
        let documented = documented_operations();
        for e in api_endpoints() {
            let op = (e.method().to_string(), e.template().to_string());
            assert!(
                documented.contains(&op),
                "docs/openapi.yaml does not describe {} {}",
                op.0,
                op.1
            );
        }
        // And it describes nothing the router does not serve.
        for (method, template) in &documented {
            let path = template.replace(['{', '}'], "");
            let method = Method::from_bytes(method.as_bytes()).unwrap();
            let e = Endpoint::resolve(&method, &path)
                .unwrap_or_else(|e| panic!("docs/openapi.yaml: {method} {template}: {e:?}"));
            assert_eq!(e.template(), template, "{method} {template}");
        }
        assert_eq!(documented.len(), api_endpoints().len(), "{documented:?}");
    }

    #[test]
    fn request_lines_resolve_to_endpoints() {
        use Endpoint as E;
        let cases: &[(Method, &str, Result<Endpoint, NoRoute>)] = &[
            (Method::GET, "/healthz", Ok(E::Health)),
            (Method::HEAD, "/healthz", Ok(E::Health)),
            (Method::HEAD, "/readyz", Ok(E::Ready)),
            (Method::POST, "/v1/proposals", Ok(E::Propose)),
            (
                Method::POST,
                "/v1/proposals/p%2F1/outcome",
                Ok(E::ReportOutcome {
                    proposal_id: "p%2F1",
                }),
            ),
            (
                Method::PUT,
                "/v1/regions/eu/evacuation",
                Ok(E::FlagRegion { region: "eu" }),
            ),
            (
                Method::DELETE,
                "/v1/regions/eu/evacuation",
                Ok(E::UnflagRegion { region: "eu" }),
            ),
            (
                Method::DELETE,
                "/v1/clusters/c1/overrides",
                Ok(E::DeleteOverrides { cluster: "c1" }),
            ),
            (
                Method::GET,
                "/v1/proposals/p1",
                Ok(E::GetVerdict { proposal_id: "p1" }),
            ),
            (
                Method::POST,
                "/v1/proposals/p1/approve",
                Ok(E::Approve { proposal_id: "p1" }),
            ),
            (
                Method::PUT,
                "/v1/pauses/fleet",
                Ok(E::SetPause {
                    kind: "fleet",
                    value: None,
                }),
            ),
            (
                Method::DELETE,
                "/v1/pauses/cluster/c1",
                Ok(E::ClearPause {
                    kind: "cluster",
                    value: Some("c1"),
                }),
            ),
            (Method::PUT, "/v1/policies", Ok(E::SetPolicy)),
            (
                Method::POST,
                "/v1/pauses/fleet",
                Err(NoRoute::MethodNotAllowed {
                    template: "/v1/pauses/{scope}",
                    allow: vec![Method::PUT, Method::DELETE],
                }),
            ),
            (Method::GET, "/v1/pauses/region/r/x", Err(NoRoute::NotFound)),
            (Method::GET, "/ui/", Ok(E::Console(ConsoleRoute::Fleet))),
            (Method::HEAD, "/ui/", Ok(E::Console(ConsoleRoute::Fleet))),
            (Method::GET, "/ui", Ok(E::Console(ConsoleRoute::Root))),
            (Method::GET, "/ui//", Err(NoRoute::NotFound)),
            (Method::GET, "/ui/audit/", Err(NoRoute::NotFound)),
            (
                Method::GET,
                "/ui/sign-in",
                Ok(E::Console(ConsoleRoute::SignInForm)),
            ),
            (
                Method::POST,
                "/ui/sign-in",
                Ok(E::Console(ConsoleRoute::SignIn)),
            ),
            (
                Method::POST,
                "/ui/regions",
                Ok(E::Console(ConsoleRoute::FlagRegion)),
            ),
            (
                Method::POST,
                "/ui/regions/eu/clear",
                Ok(E::Console(ConsoleRoute::UnflagRegion { region: "eu" })),
            ),
            (
                Method::GET,
                "/ui/jobs/abc",
                Ok(E::Console(ConsoleRoute::Job { job_id: "abc" })),
            ),
            (
                Method::DELETE,
                "/ui/regions",
                Err(NoRoute::MethodNotAllowed {
                    template: "/ui/regions",
                    allow: vec![Method::GET, Method::POST, Method::HEAD],
                }),
            ),
            (
                Method::GET,
                "/ui/pending",
                Ok(E::Console(ConsoleRoute::Pending)),
            ),
            (
                Method::POST,
                "/ui/pending/p%2F1/approve",
                Ok(E::Console(ConsoleRoute::ApprovePending {
                    proposal_id: "p%2F1",
                })),
            ),
            (
                Method::POST,
                "/ui/pending/p1/deny",
                Ok(E::Console(ConsoleRoute::DenyPending { proposal_id: "p1" })),
            ),
            (
                Method::GET,
                "/ui/pending/p1/approve",
                Err(NoRoute::MethodNotAllowed {
                    template: "/ui/pending/{proposal}/approve",
                    allow: vec![Method::POST],
                }),
            ),
            (
                Method::POST,
                "/ui/pauses",
                Ok(E::Console(ConsoleRoute::Pause)),
            ),
            (
                Method::POST,
                "/ui/pauses/fleet/clear",
                Ok(E::Console(ConsoleRoute::LiftPause {
                    kind: "fleet",
                    value: None,
                })),
            ),
            (
                Method::POST,
                "/ui/pauses/cluster/c1/clear",
                Ok(E::Console(ConsoleRoute::LiftPause {
                    kind: "cluster",
                    value: Some("c1"),
                })),
            ),
            (
                Method::POST,
                "/ui/pauses/region/clear/clear",
                Ok(E::Console(ConsoleRoute::LiftPause {
                    kind: "region",
                    value: Some("clear"),
                })),
            ),
            (
                Method::POST,
                "/ui/pauses/cluster/c1",
                Err(NoRoute::NotFound),
            ),
            (Method::GET, "/ui/nothing", Err(NoRoute::NotFound)),
            (Method::GET, "//v1/decisions", Err(NoRoute::NotFound)),
            (Method::GET, "/v1/decisions/", Err(NoRoute::NotFound)),
            (Method::GET, "/v1//regions", Err(NoRoute::NotFound)),
            (Method::GET, "v1/decisions", Err(NoRoute::NotFound)),
            (Method::GET, "/v1/nothing", Err(NoRoute::NotFound)),
            (
                Method::PATCH,
                "/v1/regions/eu/evacuation",
                Err(NoRoute::MethodNotAllowed {
                    template: "/v1/regions/{region}/evacuation",
                    allow: vec![Method::PUT, Method::DELETE],
                }),
            ),
            (
                Method::POST,
                "/healthz",
                Err(NoRoute::MethodNotAllowed {
                    template: "/healthz",
                    allow: vec![Method::GET, Method::HEAD],
                }),
            ),
            (
                Method::HEAD,
                "/v1/proposals",
                Err(NoRoute::MethodNotAllowed {
                    template: "/v1/proposals",
                    allow: vec![Method::POST],
                }),
            ),
        ];
        for (method, path, want) in cases {
            assert_eq!(&Endpoint::resolve(method, path), want, "{method} {path}");
        }
    }

    #[test]
    fn roles_reach_what_their_access_allows() {
        use Role::*;
        let cases: &[(Access, &[Role])] = &[
            (Access::AnyToken, &[Agent, Viewer, Admin]),
            (Access::Agent, &[Agent]),
            (Access::AgentOrReader, &[Agent, Viewer, Admin]),
            (Access::Reader, &[Viewer, Admin]),
            (Access::Admin, &[Admin]),
        ];
        for (access, allowed) in cases {
            for role in Role::ALL {
                assert_eq!(
                    access.allows(role),
                    allowed.contains(&role),
                    "{access:?} {role:?}"
                );
            }
        }
    }

    #[test]
    fn only_health_readiness_and_metrics_are_public() {
        let public = ["/healthz", "/readyz", "/metrics"];
        for path in public {
            let e = Endpoint::resolve(&Method::GET, path).unwrap();
            assert_eq!(e.access(), Access::Public, "{path}");
        }
        let agent = Endpoint::resolve(&Method::POST, "/v1/proposals/x/outcome").unwrap();
        assert_eq!(agent.access(), Access::Agent);
        let admin = Endpoint::resolve(&Method::PUT, "/v1/clusters/c/overrides").unwrap();
        assert_eq!(admin.access(), Access::Admin);
        let read = Endpoint::resolve(&Method::GET, "/v1/pending").unwrap();
        assert_eq!(read.access(), Access::Reader);
        // The console: only the sign-in form and the assets without a session; every form
        // that changes something needs an admin.
        for (method, path, access) in [
            (Method::GET, "/ui/sign-in", Access::ConsoleOpen),
            (Method::POST, "/ui/sign-in", Access::ConsoleOpen),
            (Method::GET, "/ui/assets/console.css", Access::ConsoleOpen),
            (Method::GET, "/ui/", Access::ConsoleSignedIn),
            (Method::GET, "/ui/audit", Access::ConsoleSignedIn),
            (Method::POST, "/ui/sign-out", Access::ConsoleSignedIn),
            (Method::POST, "/ui/regions", Access::ConsoleAdmin),
            (Method::POST, "/ui/regions/r/clear", Access::ConsoleAdmin),
            (Method::GET, "/ui/pending", Access::ConsoleSignedIn),
            (Method::POST, "/ui/pending/p/approve", Access::ConsoleAdmin),
            (Method::POST, "/ui/pending/p/deny", Access::ConsoleAdmin),
            (Method::POST, "/ui/pauses", Access::ConsoleAdmin),
            (Method::POST, "/ui/pauses/fleet/clear", Access::ConsoleAdmin),
            (Method::POST, "/ui/pauses/job/j/clear", Access::ConsoleAdmin),
        ] {
            let e = Endpoint::resolve(&method, path).unwrap();
            assert_eq!(e.access(), access, "{method} {path}");
        }
    }
}
