//! The agent reaches a coordinator that serves HTTPS: a real coordinator process with a
//! self-signed certificate, and the agent's coordinator client trusting it through
//! `control.coordinator.ca_file`. A client that trusts only the system roots is refused at
//! the handshake, and that surfaces as "coordinator unavailable", never as a verdict.

use std::time::Duration;

use flink_autoscale_agent::control::http_client::trusted_roots;
use flink_autoscale_agent::gatekeeper::{CoordinatorClient, GateError, Gatekeeper};
use flink_autoscale_core::protocol::{Outcome, OutcomeStatus, Proposal, Verdict, VertexProposal};
use flink_autoscale_tests::coordinator_process::{Coordinator, AGENT_TOKEN};

fn proposal(id: &str) -> Proposal {
    Proposal {
        proposal_id: id.into(),
        agent_id: "agent-tls".into(),
        cluster_id: "cluster-tls".into(),
        region: "eu-west".into(),
        job_id: "0123456789abcdef0123456789abcdef".into(),
        job_name: "orders".into(),
        vertices: vec![VertexProposal {
            id: "fedcba9876543210fedcba9876543210".into(),
            name: "Map".into(),
            slot_sharing_group: None,
            current_parallelism: 2,
            proposed_parallelism: 4,
            evidence: None,
        }],
        checkpoint_state_bytes: Some(0),
        slots_per_task_manager: 1,
        disk_bytes_per_task_manager: 1 << 30,
        current_task_managers: 2,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_proposes_over_https_to_a_coordinator_its_ca_file_trusts() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let (cert_file, key_file) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_file, cert.cert.pem()).unwrap();
    std::fs::write(&key_file, cert.key_pair.serialize_pem()).unwrap();
    let coordinator = Coordinator::start(
        dir.path(),
        &[
            "--tls-cert-file",
            cert_file.to_str().unwrap(),
            "--tls-key-file",
            key_file.to_str().unwrap(),
        ],
    );
    assert!(
        coordinator.url.starts_with("https://"),
        "{}",
        coordinator.url
    );
    let timeout = Duration::from_secs(5);

    let trusting = CoordinatorClient::new(
        &coordinator.url,
        Some(AGENT_TOKEN.to_string()),
        timeout,
        trusted_roots(Some(&cert_file)).unwrap(),
    )
    .unwrap();
    // An authenticated answer: the coordinator checked the token and ran its gates.
    let decision = trusting.propose(&proposal("tls-1"), 0).await.unwrap();
    assert_eq!(decision.proposal_id, "tls-1");
    assert_eq!(decision.verdict, Verdict::Approved, "{decision:?}");
    let outcome = Outcome {
        status: OutcomeStatus::Applied,
        observed_parallelism: [("fedcba9876543210fedcba9876543210".to_string(), 4)].into(),
        error: None,
        restart_ms: Some(4_200),
        rescale: None,
    };
    trusting
        .report("0123456789abcdef0123456789abcdef", "tls-1", &outcome)
        .await
        .unwrap();

    let untrusting = CoordinatorClient::new(
        &coordinator.url,
        Some(AGENT_TOKEN.to_string()),
        timeout,
        trusted_roots(None).unwrap(),
    )
    .unwrap();
    match untrusting.propose(&proposal("tls-2"), 0).await {
        Err(GateError::Unavailable(message)) => {
            assert!(message.contains("certificate"), "{message}")
        }
        other => panic!("an untrusted certificate must fail the handshake: {other:?}"),
    }
}
