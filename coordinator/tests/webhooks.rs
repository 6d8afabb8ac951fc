//! Webhooks over real HTTP: the coordinator binary (SQLite and PostgreSQL) delivers
//! notifications to a receiver on loopback, retries a failed delivery, and never makes a
//! proposal wait for a webhook that does not answer.

#[macro_use]
mod support;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper::StatusCode;
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use support::{job, proposal, Db, Server, ADMIN, AGENT};

on_both_backends!(events_are_delivered_and_a_failure_is_retried);

/// How the receiver answers.
#[derive(Clone, Copy)]
enum Behaviour {
    /// `500` to the first request, `200` to the rest.
    FailFirst,
    /// Reads the request and never answers.
    Hang,
}

/// A webhook receiver on loopback that keeps every body it was sent.
struct Receiver {
    url: String,
    bodies: Arc<Mutex<Vec<Value>>>,
    attempts: Arc<Mutex<u32>>,
}

impl Receiver {
    async fn start(behaviour: Behaviour) -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook/secret-path", listener.local_addr().unwrap());
        let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let attempts: Arc<Mutex<u32>> = Arc::default();
        let (b, a) = (bodies.clone(), attempts.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (b, a) = (b.clone(), a.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (b, a) = (b.clone(), a.clone());
                        async move {
                            let bytes = req.into_body().collect().await.unwrap().to_bytes();
                            let attempt = {
                                let mut n = a.lock().unwrap();
                                *n += 1;
                                *n
                            };
                            let status = match behaviour {
                                Behaviour::Hang => std::future::pending().await,
                                Behaviour::FailFirst if attempt == 1 => {
                                    StatusCode::INTERNAL_SERVER_ERROR
                                }
                                Behaviour::FailFirst => {
                                    b.lock()
                                        .unwrap()
                                        .push(serde_json::from_slice(&bytes).unwrap());
                                    StatusCode::OK
                                }
                            };
                            let mut resp = hyper::Response::new(Full::new(Bytes::new()));
                            *resp.status_mut() = status;
                            Ok::<_, Infallible>(resp)
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Receiver {
            url,
            bodies,
            attempts,
        }
    }

    fn bodies(&self) -> Vec<Value> {
        self.bodies.lock().unwrap().clone()
    }

    fn attempts(&self) -> u32 {
        *self.attempts.lock().unwrap()
    }
}

/// Starts the coordinator with one webhook to `receiver` and short retries.
fn start(db: &Db, receiver: &Receiver, events: &str, timeout: &str) -> Server {
    let config = db.dir().join("coordinator.toml");
    std::fs::write(
        &config,
        format!(
            "[notifications]\nretry_initial = \"100ms\"\nretry_max = \"1s\"\n\
             [[notifications.webhooks]]\nname = \"ops\"\nurl = \"{}\"\nevents = {events}\n\
             timeout = \"{timeout}\"\n",
            receiver.url
        ),
    )
    .unwrap();
    let config = config.display().to_string();
    Server::start(
        db,
        &[
            "--config",
            &config,
            "--min-interval",
            "0s",
            "--max-in-flight-per-cluster",
            "100",
            "--max-in-flight-per-region",
            "100",
        ],
    )
}

async fn post(s: &Server, path: &str, token: &str, body: Value) -> Value {
    let (status, answer) = s.call("POST", path, Some(token), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{path}: {answer}");
    answer
}

/// Only job 1 needs a person.
async fn manual_rule_for_job_1(s: &Server) {
    let rules =
        json!({ "rules": [{ "name": "job-1-by-hand", "jobs": [job(1)], "action": "manual" }]});
    let (status, body) = s
        .call("PUT", "/v1/policies", Some(ADMIN), Some(rules))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn delivery_count(metrics: &str, result: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("flink_autoscale_coordinator_webhook_deliveries_total{"))
        .filter(|l| l.contains(&format!("result=\"{result}\"")) && l.contains("webhook=\"ops\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

async fn events_are_delivered_and_a_failure_is_retried(db: Db) {
    let receiver = Receiver::start(Behaviour::FailFirst).await;
    let s = start(&db, &receiver, r#"["pending", "refused", "applied"]"#, "5s");
    manual_rule_for_job_1(&s).await;

    // pending, then refused by a denial; applied after an approved proposal's outcome.
    let p = post(&s, "/v1/proposals", AGENT, proposal("w-1", &job(1), 4, 8)).await;
    assert_eq!(p["verdict"], "pending", "{p}");
    post(
        &s,
        "/v1/proposals/w-1/deny",
        ADMIN,
        json!({"comment": "not during the sale"}),
    )
    .await;
    let a = post(&s, "/v1/proposals", AGENT, proposal("w-2", &job(2), 4, 8)).await;
    assert_eq!(a["verdict"], "approved", "{a}");
    post(
        &s,
        "/v1/proposals/w-2/outcome",
        AGENT,
        json!({"status": "applied", "observed_parallelism": {support::vertex_id(2): 8}}),
    )
    .await;

    let deadline = Instant::now() + Duration::from_secs(20);
    while receiver.bodies().len() < 3 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut got: Vec<(String, String)> = receiver
        .bodies()
        .iter()
        .map(|b| {
            (
                b["event"].as_str().unwrap_or("?").to_string(),
                b["proposal_id"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect();
    got.sort();
    let want = [("applied", "w-2"), ("pending", "w-1"), ("refused", "w-1")]
        .map(|(e, p)| (e.to_string(), p.to_string()));
    assert_eq!(got, want, "each event delivered exactly once");
    for body in receiver.bodies() {
        let text = body["text"].as_str().unwrap_or_default();
        assert!(
            text.starts_with("flink-autoscale: rescale of orders") && text.contains("Map 4→8"),
            "a Slack-compatible text: {body}"
        );
        assert_eq!(body["job_name"], "orders", "{body}");
        assert_eq!(body["vertices"][1]["proposed_parallelism"], 8, "{body}");
    }
    let refused = receiver
        .bodies()
        .into_iter()
        .find(|b| b["event"] == "refused")
        .unwrap();
    assert_eq!(
        refused["review"]["comment"], "not during the sale",
        "{refused}"
    );
    assert_eq!(refused["reasons"][0]["code"], "denied", "{refused}");
    assert_eq!(receiver.attempts(), 4, "three deliveries and one retry");

    let (_, _, metrics) = s.raw_with_headers("GET", "/metrics", None, None).await;
    assert_eq!(delivery_count(&metrics, "delivered"), 3.0, "{metrics}");
    assert!(delivery_count(&metrics, "retried") >= 1.0, "{metrics}");
    assert!(
        !metrics.contains("secret-path"),
        "the URL never reaches the metrics"
    );
}

#[tokio::test]
async fn a_webhook_that_never_answers_does_not_slow_proposals() {
    let receiver = Receiver::start(Behaviour::Hang).await;
    let db = Db::sqlite();
    let s = start(&db, &receiver, r#"["pending", "refused"]"#, "30s");
    manual_rule_for_job_1(&s).await;
    let started = Instant::now();
    // Each proposal supersedes the previous one: a pending and a refused notice per step.
    for i in 0..10 {
        let p = post(
            &s,
            "/v1/proposals",
            AGENT,
            proposal(&format!("h-{i}"), &job(1), 4, 8),
        )
        .await;
        assert_eq!(p["verdict"], "pending", "{p}");
    }
    let elapsed = started.elapsed();
    // Synchronous delivery would hold the first proposal for the webhook's 30 s deadline.
    assert!(
        elapsed < Duration::from_secs(15),
        "10 proposals took {elapsed:?} with a hanging webhook"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while receiver.attempts() == 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(receiver.attempts() >= 1, "the delivery was attempted");
    let (_, _, metrics) = s.raw_with_headers("GET", "/metrics", None, None).await;
    assert_eq!(delivery_count(&metrics, "delivered"), 0.0, "{metrics}");
}
