//! The per-cluster and per-region caps are exact, also with several writers and two replicas
//! deciding at once on one PostgreSQL database (and on SQLite, with its single writer).

mod support;

use futures_util::future::join_all;
use hyper::StatusCode;
use serde_json::Value;
use support::{job, proposal, Db, Server, AGENT};

/// Rounds of 40 concurrent proposals (the probe that found the overshoot ran 12).
const TRIALS: u32 = 12;
const JOBS: u32 = 40;
const CAP: u32 = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_cap_is_exact_with_two_postgres_replicas() {
    let Some(db) = Db::postgres() else { return };
    let flags = [
        "--database-writers",
        "4",
        "--max-in-flight-per-cluster",
        "5",
        "--max-in-flight-per-region",
        "1000",
    ];
    let replicas = [Server::start(&db, &flags), Server::start(&db, &flags)];
    race(
        &replicas,
        |trial, _| format!("cluster-{trial}"),
        |_| "eu".into(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn region_cap_is_exact_with_two_postgres_replicas() {
    let Some(db) = Db::postgres() else { return };
    let flags = [
        "--database-writers",
        "4",
        "--max-in-flight-per-cluster",
        "1000",
        "--max-in-flight-per-region",
        "5",
    ];
    let replicas = [Server::start(&db, &flags), Server::start(&db, &flags)];
    // Eight clusters share each trial's region.
    race(
        &replicas,
        |trial, n| format!("c-{trial}-{}", n % 8),
        |trial| format!("region-{trial}"),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_cap_is_exact_on_sqlite() {
    let db = Db::sqlite();
    let flags = ["--max-in-flight-per-cluster", "5"];
    let replicas = [Server::start(&db, &flags)];
    race(
        &replicas,
        |trial, _| format!("cluster-{trial}"),
        |trial| format!("region-{trial}"),
    )
    .await;
}

/// Per trial, 40 jobs propose at once, spread over the replicas; exactly `CAP` are approved
/// and every refusal names the cap.
async fn race(
    replicas: &[Server],
    cluster: impl Fn(u32, u32) -> String,
    region: impl Fn(u32) -> String,
) {
    let mut approvals = Vec::new();
    for trial in 0..TRIALS {
        let calls = (0..JOBS).map(|n| {
            let mut p = proposal(&format!("cap-{trial}-{n}"), &job(trial * 1000 + n), 4, 6);
            p["cluster_id"] = Value::String(cluster(trial, n));
            p["region"] = Value::String(region(trial));
            let server = &replicas[n as usize % replicas.len()];
            server.call("POST", "/v1/proposals", Some(AGENT), Some(p))
        });
        let answers = join_all(calls).await;
        let mut approved = 0;
        for (status, answer) in &answers {
            assert_eq!(*status, StatusCode::OK, "{answer}");
            match answer["verdict"].as_str() {
                Some("approved") => approved += 1,
                Some("refused") => {
                    let code = answer["reasons"][0]["code"].as_str().unwrap_or("");
                    assert!(
                        code == "cluster_concurrency" || code == "region_concurrency",
                        "{answer}"
                    );
                }
                _ => panic!("{answer}"),
            }
        }
        approvals.push(approved);
    }
    eprintln!("approvals per trial (cap {CAP}): {approvals:?}");
    assert!(approvals.iter().all(|&a| a == CAP), "{approvals:?}");
}
