//! Approval policies, pending proposals, reviews, pauses, named admins and roles, over real
//! HTTP against the coordinator binary, on SQLite and on PostgreSQL.

mod support;

use std::time::{Duration, Instant};

use hyper::StatusCode;
use serde_json::{json, Value};
use support::{Db, Server, ADMIN, AGENT, VIEWER};

const BOB: &str = "bob-admin-token-0123456789abcdef";

/// Named admins (one in the old bare-token format), a viewer, generous rate limits.
fn start(db: &Db, extra: &[&str]) -> Server {
    Server::start_named(db, &format!("# admins\nalice:{ADMIN}\n{BOB}\n"), extra)
}

async fn verdict_of(s: &Server, id: &str) -> Value {
    let (status, body) = s
        .call("GET", &format!("/v1/proposals/{id}"), Some(AGENT), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn review(
    s: &Server,
    id: &str,
    action: &str,
    token: &str,
    comment: &str,
) -> (StatusCode, Value) {
    s.call(
        "POST",
        &format!("/v1/proposals/{id}/{action}"),
        Some(token),
        Some(json!({ "comment": comment })),
    )
    .await
}

fn code(decision: &Value) -> &str {
    decision["reasons"][0]["code"].as_str().unwrap_or("")
}

async fn set_manual_rule(s: &Server) {
    let rules = json!({ "rules": [
        { "name": "orders-by-hand", "jobs": ["orders*"], "action": "manual" }
    ]});
    let (status, body) = s
        .call("PUT", "/v1/policies", Some(ADMIN), Some(rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["rules"][0]["name"], "orders-by-hand", "{body}");
    assert_eq!(body["rules"][0]["source"], "api", "{body}");
}

async fn lifecycle(db: Db) {
    let s = start(&db, &["--approval-ttl", "3s"]);
    // No rule: today's behaviour, approved by the gates alone.
    assert_eq!(s.propose("auto-1", 1, 4, 8).await["verdict"], "approved");
    set_manual_rule(&s).await;

    // Pending, for the agent's poll and the pending queue.
    let p = s.propose("p1", 2, 4, 8).await;
    assert_eq!(
        (p["verdict"].as_str(), code(&p)),
        (Some("pending"), "manual_approval")
    );
    assert!(
        p["plan"].is_null(),
        "a pending verdict carries no plan: {p}"
    );
    assert_eq!(verdict_of(&s, "p1").await["verdict"], "pending");
    let (status, page) = s.call("GET", "/v1/pending", Some(VIEWER), None).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let ids: Vec<&str> = page["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["proposal_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["p1"]);
    // The job's slot is held: a proposal for another job in the same state does not block.

    // Roles: a viewer and an agent may not decide.
    for token in [VIEWER, AGENT] {
        let (status, body) = review(&s, "p1", "approve", token, "ok").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    }
    // A viewer reads everything an admin reads, and changes nothing.
    let (status, _) = s.call("GET", "/v1/decisions", Some(VIEWER), None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s
        .call(
            "PUT",
            "/v1/pauses/fleet",
            Some(VIEWER),
            Some(json!({ "reason": "x" })),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, who) = s.call("GET", "/v1/whoami", Some(VIEWER), None).await;
    assert_eq!(
        (status, &who["name"], &who["role"]),
        (StatusCode::OK, &json!("carol"), &json!("viewer"))
    );

    // Approve, by a named admin, with a comment; the audit says who, when and why.
    let (status, record) = review(&s, "p1", "approve", ADMIN, "peak traffic, go").await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["verdict"], "approved", "{record}");
    assert_eq!(record["review"]["by"], "alice", "{record}");
    assert_eq!(record["review"]["comment"], "peak traffic, go", "{record}");
    let v = verdict_of(&s, "p1").await;
    assert_eq!(v["verdict"], "approved", "{v}");
    assert!(v["plan"]["parallelism"].is_object(), "{v}");
    // Deciding twice is a conflict naming the first decision.
    let (status, body) = review(&s, "p1", "deny", BOB, "too late").await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("approved by alice"),
        "{body}"
    );

    // Deny needs a comment; the old bare-token admin is named by its fingerprint.
    s.propose("p2", 3, 4, 8).await;
    let (status, body) = review(&s, "p2", "deny", BOB, "  ").await;
    assert_eq!(
        (status, &body["field"]),
        (StatusCode::BAD_REQUEST, &json!("comment")),
        "{body}"
    );
    let (status, record) = review(&s, "p2", "deny", BOB, "not during the freeze").await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(
        (record["verdict"].as_str(), code(&record)),
        (Some("refused"), "denied")
    );
    let bob = record["review"]["by"].as_str().unwrap();
    assert!(
        bob.starts_with("token-") && !bob.contains("bob-admin"),
        "{bob}"
    );
    assert_eq!(verdict_of(&s, "p2").await["verdict"], "refused");

    // A newer proposal for the same job supersedes a pending one.
    s.propose("p3", 4, 4, 8).await;
    assert_eq!(s.propose("p4", 4, 4, 6).await["verdict"], "pending");
    let old = verdict_of(&s, "p3").await;
    assert_eq!(
        (old["verdict"].as_str(), code(&old)),
        (Some("refused"), "superseded"),
        "{old}"
    );
    let (status, _) = review(&s, "p3", "approve", ADMIN, "ok").await;
    assert_eq!(status, StatusCode::CONFLICT);

    // The gates run again at approval time: the region started evacuating meanwhile.
    let down = s.propose("p5", 5, 8, 4).await;
    assert_eq!(down["verdict"], "pending", "{down}");
    let (status, body) = s
        .call(
            "PUT",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            Some(json!({ "reason": "failover" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, record) = review(&s, "p5", "approve", ADMIN, "ok").await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(
        (record["verdict"].as_str(), code(&record)),
        (Some("refused"), "region_evacuating"),
        "{record}"
    );
    assert_eq!(record["review"]["by"], "alice");
    let (status, _) = s
        .call(
            "DELETE",
            "/v1/regions/eu-west-1/evacuation",
            Some(ADMIN),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    // Nobody decides: refused with approval_expired after approval_ttl.
    s.propose("p6", 6, 4, 8).await;
    let deadline = Instant::now() + Duration::from_secs(15);
    let expired = loop {
        let v = verdict_of(&s, "p6").await;
        if v["verdict"] != "pending" {
            break v;
        }
        assert!(Instant::now() < deadline, "p6 still pending: {v}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        (expired["verdict"].as_str(), code(&expired)),
        (Some("refused"), "approval_expired")
    );

    // Restart in the middle of a pending approval: nothing is lost.
    s.propose("p7", 7, 4, 8).await;
    s.terminate();
    let s = start(&db, &["--approval-ttl", "10min"]);
    assert_eq!(verdict_of(&s, "p7").await["verdict"], "pending");
    let (status, record) = review(&s, "p7", "approve", ADMIN, "after the restart").await;
    assert_eq!(
        (status, &record["verdict"]),
        (StatusCode::OK, &json!("approved")),
        "{record}"
    );

    // The admin actions record each admin's name.
    let (status, actions) = s.call("GET", "/v1/admin-actions", Some(VIEWER), None).await;
    assert_eq!(status, StatusCode::OK, "{actions}");
    let text = actions.to_string();
    for expected in ["\"alice\"", "set_policy", "approve", "deny", bob] {
        assert!(text.contains(expected), "{expected} missing: {text}");
    }
    s.terminate();
}

async fn pauses_and_bad_input(db: Db) {
    let s = start(&db, &[]);
    let (status, body) = s
        .call(
            "PUT",
            "/v1/pauses/cluster/c1",
            Some(ADMIN),
            Some(json!({ "reason": "INC-4711" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = s.propose("q1", 1, 4, 8).await;
    assert_eq!(
        (refused["verdict"].as_str(), code(&refused)),
        (Some("refused"), "paused"),
        "{refused}"
    );
    let message = refused["reasons"][0]["message"].as_str().unwrap();
    assert!(
        message.contains("cluster/c1") && message.contains("alice") && message.contains("INC-4711"),
        "{message}"
    );
    let (status, page) = s.call("GET", "/v1/pauses", Some(VIEWER), None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(page["pauses"][0]["set_by"], "alice", "{page}");
    let (status, _) = s
        .call("DELETE", "/v1/pauses/cluster/c1", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s
        .call("DELETE", "/v1/pauses/cluster/c1", Some(ADMIN), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(s.propose("q2", 1, 4, 8).await["verdict"], "approved");

    // A fleet pause with an expiry lifts by itself.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        + 1500;
    let (status, body) = s
        .call(
            "PUT",
            "/v1/pauses/fleet",
            Some(ADMIN),
            Some(json!({ "reason": "deploy freeze", "expires_at": soon })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(code(&s.propose("q3", 2, 4, 8).await), "paused");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(s.propose("q4", 2, 4, 8).await["verdict"], "approved");

    // Bad input: a 400 naming the field.
    let cases: Vec<(&str, &str, Value, &str)> = vec![
        (
            "PUT",
            "/v1/pauses/region/eu",
            json!({ "reason": "" }),
            "reason",
        ),
        (
            "PUT",
            "/v1/pauses/fleet",
            json!({ "reason": "x", "expires_at": 5 }),
            "expires_at",
        ),
        (
            "PUT",
            "/v1/pauses/planet/x",
            json!({ "reason": "x" }),
            "scope",
        ),
        (
            "PUT",
            "/v1/policies",
            json!({ "rules": [{ "name": "", "action": "manual" }] }),
            "rules[0].name",
        ),
        (
            "PUT",
            "/v1/policies",
            json!({ "rules": [{ "name": "a", "action": "manual", "scale_down_percent_at_least": 150 }] }),
            "rules[0].scale_down_percent_at_least",
        ),
        (
            "PUT",
            "/v1/policies",
            json!({ "rules": [{ "name": "a", "action": "manual", "windows": ["25:00:00-26:00:00"] }] }),
            "rules[0].windows[0]",
        ),
        (
            "PUT",
            "/v1/policies",
            json!({ "rules": [{ "name": "a", "action": "manual" }, { "name": "a", "action": "auto" }] }),
            "rules[1].name",
        ),
    ];
    for (method, path, body, field) in cases {
        let (status, answer) = s.call(method, path, Some(ADMIN), Some(body.clone())).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path} {body}: {answer}");
        assert_eq!(answer["field"], field, "{path} {body}: {answer}");
    }
    let (status, answer) = review(&s, "nope", "approve", ADMIN, "x").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{answer}");
    s.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_lifecycle_sqlite() {
    lifecycle(Db::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_lifecycle_postgres() {
    if let Some(db) = Db::postgres() {
        lifecycle(db).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_and_bad_input_sqlite() {
    pauses_and_bad_input(Db::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pauses_and_bad_input_postgres() {
    if let Some(db) = Db::postgres() {
        pauses_and_bad_input(db).await;
    }
}

/// Two replicas on one PostgreSQL schema, two admins approving and denying the same pending
/// proposals at the same moment: exactly one decision wins each time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_race_to_decide_postgres() {
    let Some(db) = Db::postgres() else {
        return;
    };
    let a = start(&db, &[]);
    let b = start(&db, &[]);
    set_manual_rule(&a).await;
    for round in 0..10u32 {
        let id = format!("race-{round}");
        a.propose(&id, 100 + round, 4, 8).await;
        let (ra, rb) = tokio::join!(
            review(&a, &id, "approve", ADMIN, "alice approves"),
            review(&b, &id, "deny", BOB, "bob denies"),
        );
        let wins = [ra.0, rb.0]
            .iter()
            .filter(|s| **s == StatusCode::OK)
            .count();
        let conflicts = [ra.0, rb.0]
            .iter()
            .filter(|s| **s == StatusCode::CONFLICT)
            .count();
        assert_eq!((wins, conflicts), (1, 1), "{id}: {ra:?} {rb:?}");
        let winner = if ra.0 == StatusCode::OK { &ra.1 } else { &rb.1 };
        let record = {
            let (status, r) = b
                .call("GET", &format!("/v1/decisions/{id}"), Some(VIEWER), None)
                .await;
            assert_eq!(status, StatusCode::OK);
            r
        };
        assert_eq!(record["verdict"], winner["verdict"], "{record}");
        assert_eq!(record["review"]["by"], winner["review"]["by"], "{record}");
        assert_eq!(verdict_of(&a, &id).await["verdict"], winner["verdict"]);
    }
    a.terminate();
    b.terminate();
}
