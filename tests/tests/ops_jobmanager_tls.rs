//! The agent against a JobManager that serves REST over TLS with mutual authentication, as
//! Flink does with `security.ssl.rest.enabled` and `security.ssl.rest.authentication-enabled`:
//! a TLS front (rustls, client certificate required, both sides signed by one private CA) on
//! loopback before the simulated JobManager. The agent binary collects through it and the
//! adaptive-scheduler realizer rescales through it; a wrong CA and a missing client
//! certificate fail with an error naming the key, and nothing is applied.

#[allow(dead_code)]
mod ops_support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use flink_autoscale_agent::actuation::{AdaptiveScheduler, Realizer};
use flink_autoscale_agent::config::Config;
use flink_autoscale_core::protocol::{Plan, Proposal, VertexProposal};
use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
use serde_json::Value;

/// A CA and a certificate it signed, as PEM files in a directory.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn issue(dir: &Path, name: &str) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let write = |file: &str, text: String| {
        let path = dir.join(format!("{name}-{file}"));
        std::fs::write(&path, text).unwrap();
        path
    };
    let leaf = |sans: Vec<String>| {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(sans)
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        (cert.pem(), key.serialize_pem())
    };
    let (server_cert, server_key) = leaf(vec!["127.0.0.1".into(), "localhost".into()]);
    let (client_cert, client_key) = leaf(vec!["flink-autoscale-agent".into()]);
    Pki {
        ca: write("ca.pem", ca.pem()),
        server_cert: write("server.pem", server_cert),
        server_key: write("server.key", server_key),
        client_cert: write("client.pem", client_cert),
        client_key: write("client.key", client_key),
    }
}

fn pem_certs(path: &Path) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Serves TLS on loopback, requiring a client certificate signed by `pki.ca`, and forwards
/// each connection's plaintext to `backend`. Runs until the runtime ends.
async fn tls_front(pki: &Pki, backend: SocketAddr) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for cert in pem_certs(&pki.ca) {
        roots.add(cert).unwrap();
    }
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_file(&pki.server_key).unwrap();
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(pem_certs(&pki.server_cert), key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let Ok(mut plain) = tokio::net::TcpStream::connect(backend).await else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    addr
}

fn agent_toml(
    dir: &Path,
    name: &str,
    front: SocketAddr,
    ca: &Path,
    client: Option<(&Path, &Path)>,
) -> PathBuf {
    let mut text = format!(
        "[jobmanager]\nurl = \"https://127.0.0.1:{}\"\nca_file = \"{}\"\n",
        front.port(),
        ca.display()
    );
    if let Some((cert, key)) = client {
        text.push_str(&format!(
            "client_cert_file = \"{}\"\nclient_key_file = \"{}\"\n",
            cert.display(),
            key.display()
        ));
    }
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).unwrap();
    path
}

/// `flink-autoscale-agent collect --config <file> --once`: (success, stdout, stderr).
fn collect(config: &Path) -> (bool, String, String) {
    let (status, out, err) = ops_support::run(
        Command::new(ops_support::binary(ops_support::AGENT_BIN))
            .args(["collect", "--once", "--config"])
            .arg(config),
    );
    (status.success(), out, err)
}

fn sim_job(sim: &ops_support::Daemon) -> (String, Vec<(String, u32)>) {
    let overview: Value = serde_json::from_str(&sim.get("/jobs/overview").body).unwrap();
    let jid = overview["jobs"][0]["jid"].as_str().unwrap().to_string();
    let job: Value = serde_json::from_str(&sim.get(&format!("/jobs/{jid}")).body).unwrap();
    let vertices = job["vertices"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            let p = v["parallelism"].as_u64().unwrap() as u32;
            (v["id"].as_str().unwrap().to_string(), p)
        })
        .collect();
    (jid, vertices)
}

fn proposal(jid: &str, vertices: &[(String, u32)], to: u32) -> (Proposal, Plan) {
    let proposal = Proposal {
        proposal_id: "tls-1".into(),
        agent_id: "agent".into(),
        cluster_id: "cluster".into(),
        region: "region".into(),
        job_id: jid.into(),
        job_name: "orders-enrichment".into(),
        vertices: vertices
            .iter()
            .map(|(id, p)| VertexProposal {
                id: id.clone(),
                name: id.clone(),
                slot_sharing_group: None,
                current_parallelism: *p,
                proposed_parallelism: *p,
                evidence: None,
            })
            .collect(),
        checkpoint_state_bytes: None,
        slots_per_task_manager: 4,
        disk_bytes_per_task_manager: 1 << 30,
        current_task_managers: 3,
    };
    let plan = Plan {
        task_managers: 4,
        standby_task_managers: 0,
        parallelism: [(vertices[1].0.clone(), to)].into(),
    };
    (proposal, plan)
}

/// The realizer the agent builds for `config` (TLS from its `[jobmanager]` keys).
fn in_place(config: &Path) -> AdaptiveScheduler {
    let config = Config::load(Some(config), &Default::default()).expect("config");
    let tls = flink_autoscale_agent::flink::tls::client_config(&config.jobmanager)
        .expect("tls")
        .expect("an https URL");
    AdaptiveScheduler::with_tls(&config.jobmanager.url, Duration::from_secs(5), tls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_collects_and_rescales_over_mutual_tls_and_names_the_key_when_it_cannot() {
    let dir = tempfile::tempdir().unwrap();
    let pki = issue(dir.path(), "jm");
    let stranger = issue(dir.path(), "other");
    let sim = ops_support::start_simulator();
    let front = tls_front(&pki, sim.addr()).await;
    let (jid, vertices) = sim_job(&sim);
    let from = vertices[1].1;
    let client = Some((pki.client_cert.as_path(), pki.client_key.as_path()));

    // Trusting the CA and presenting the client certificate: the job is collected.
    let good = agent_toml(dir.path(), "good", front, &pki.ca, client);
    let (ok, out, err) = tokio::task::block_in_place(|| collect(&good));
    assert!(ok && out.contains(&jid), "collect over TLS:\n{out}\n{err}");

    // A CA that did not sign the JobManager's certificate: the error names jobmanager.ca_file.
    let wrong_ca = agent_toml(dir.path(), "wrong-ca", front, &stranger.ca, client);
    let (ok, out, err) = tokio::task::block_in_place(|| collect(&wrong_ca));
    assert!(
        !ok || !out.contains(&jid),
        "a wrong CA must not collect:\n{out}\n{err}"
    );
    assert!(
        format!("{out}{err}").contains("jobmanager.ca_file"),
        "the error names jobmanager.ca_file:\n{out}\n{err}"
    );
    let (proposal_, plan) = proposal(&jid, &vertices, from + 2);
    let refused = in_place(&wrong_ca).apply(&proposal_, &plan).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().contains("certificate")),
        "{refused:?}"
    );

    // No client certificate: the JobManager ends the handshake; the error names the keys.
    let anonymous = agent_toml(dir.path(), "anonymous", front, &pki.ca, None);
    let (ok, out, err) = tokio::task::block_in_place(|| collect(&anonymous));
    assert!(
        !ok || !out.contains(&jid),
        "no client certificate must not collect:\n{out}\n{err}"
    );
    assert!(
        format!("{out}{err}").contains("jobmanager.client_cert_file"),
        "the error names jobmanager.client_cert_file:\n{out}\n{err}"
    );
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(sim_job(&sim).1[1].1, from, "nothing was applied");

    // With both: the in-place rescale goes through the TLS front.
    let applied = in_place(&good).apply(&proposal_, &plan).await;
    assert!(applied.is_ok(), "{applied:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while sim_job(&sim).1[1].1 != from + 2 {
        assert!(
            Instant::now() < deadline,
            "the job did not reach {}",
            from + 2
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // check-config loads every file: a key file that is not a key is named.
    std::fs::write(dir.path().join("bad.key"), "not a key").unwrap();
    let bad = agent_toml(
        dir.path(),
        "bad-key",
        front,
        &pki.ca,
        Some((&pki.client_cert, &dir.path().join("bad.key"))),
    );
    let (status, _, stderr) = ops_support::run(
        Command::new(ops_support::binary(ops_support::AGENT_BIN))
            .args(["check-config", "--config"])
            .arg(&bad),
    );
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("jobmanager.client_key_file"), "{stderr}");
}
