//! Real Flink 2.3.0 serving its REST API over https with mutual authentication
//! (`security.ssl.rest.enabled`, `security.ssl.rest.authentication-enabled`), keys made with
//! `keytool` and `openssl` ([`RestTls`]). One cluster, in order:
//! 1. the harness's client (CA + the agent's certificate) uploads and runs the load job and
//!    waits for RUNNING; plain http gets only a redirect; Flink's CLI (same configuration
//!    file) submits, lists and cancels a second job;
//! 2. two agents with the adaptive-scheduler realizer watch the overloaded job at once, one
//!    trusting an unrelated CA, one without a client certificate: each says which key to fix,
//!    never has usable data, proposes nothing; the job keeps its parallelism;
//! 3. an agent with the right CA and certificate collects, proposes cpu-map 1 -> p under its
//!    local gates and rescales the job in place through `PUT /jobs/:jid/resource-requirements`.

use std::path::Path;
use std::time::{Duration, Instant};

use flink_autoscale_tests::flink_harness::{
    fully_running, job_status, metric_sum, must, start_agent_setup, vertex, within, AgentDaemon,
    AgentSetup, ClusterSettings, FlinkCluster, FlinkRest, LoadJobSpec, RestTls, VertexStatus,
};
use hyper::body::Bytes;
use hyper::Method;
use serde_json::Value;

const TEST_BUDGET: Duration = Duration::from_secs(300);
/// At least Flink's `metrics.fetcher.update-interval` (10 s).
const POLL_S: u64 = 11;
/// cpu-map waits 1 ms per record (~900 records/s per subtask at most): 800/s keeps one
/// subtask busy ~0.9, above the band [0.2, 0.6] below.
const SLEEP_MICROS: u64 = 1000;
const RATE: f64 = 800.0;
const AUTOSCALER: &str = r#"
[autoscaler]
enabled = true
"metrics.window" = "30s"
"stabilization.interval" = "30s"
"utilization.target" = 0.4
"target.utilization.boundary" = 0.2
"vertex.max-parallelism" = 4
"restart.time" = "15s"
"catch-up.duration" = "2min"
"#;
/// One `bin/flink` call (a JVM start; `run` also builds the job graph).
const CLI_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the misconfigured agents watch: past their first polls and a few retries.
const MISCONFIGURED_FOR: Duration = Duration::from_secs(20);
const METRIC_JOB_USABLE: &str = "flink_autoscale_agent_job_data_usable";
const METRIC_ERRORS: &str = "flink_autoscale_agent_errors_total";
const METRIC_PROPOSALS: &str = "flink_autoscale_agent_proposals_total";
const PROPOSING: &str = "proposing a rescale";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_rescales_a_real_flink_over_mutual_tls_and_names_the_key_when_it_cannot() {
    within(TEST_BUDGET, "the REST-over-TLS scenario", scenario()).await;
}

async fn scenario() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let t0 = Instant::now();
    let tls = must("make the keys", RestTls::generate(dir.path()).await);
    let stranger = must(
        "make an unrelated CA",
        RestTls::unrelated_ca(dir.path(), "stranger").await,
    );
    eprintln!(
        "[timing] keytool/openssl: {:.1} s",
        t0.elapsed().as_secs_f64()
    );

    // 1. The cluster over https; the harness's client submits the job and sees it RUNNING.
    let spec = LoadJobSpec {
        rate: RATE,
        work: 1000,
        sleep_micros: SLEEP_MICROS,
        source_parallelism: 1,
        rebalance_after_source: true,
        map_parallelism: 1,
        keyed_parallelism: 1,
        sink_parallelism: 1,
        ..LoadJobSpec::default()
    };
    let settings = ClusterSettings {
        rest_tls: Some(tls.clone()),
        ..ClusterSettings::on("2.3.0")
    };
    let t = Instant::now();
    let AgentSetup {
        agent,
        mut cluster,
        job,
    } = must(
        "start the TLS cluster and the load job, locate the agent",
        start_agent_setup(settings, &spec).await,
    );
    eprintln!(
        "[timing] cluster start + job RUNNING over https: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let url = cluster.rest_url().to_owned();
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    let jid = job.job_id.clone();
    let config = must(
        "GET /jobmanager/config",
        cluster.rest().get("/jobmanager/config").await,
    );
    for key in [
        "security.ssl.rest.enabled",
        "security.ssl.rest.authentication-enabled",
    ] {
        assert_eq!(
            config_value(&config, key).as_deref(),
            Some("true"),
            "{key}: {config}"
        );
    }
    let plain = url.replacen("https://", "http://", 1);
    let plain_answer = FlinkRest::new(&plain)
        .send(Method::GET, "/overview", None, Bytes::new())
        .await;
    // Flink's RedirectingSslHandler answers plain http with a redirect and nothing else.
    assert!(
        plain_answer
            .as_ref()
            .is_ok_and(|r| r.status.is_redirection() && r.body == ""),
        "plain http must get only a redirect: {plain_answer:?}"
    );
    let map_id = vertex_id(&cluster, &jid, vertex::CPU_MAP).await;

    // 2. Wrong CA and no client certificate, side by side, while Flink's CLI runs a job.
    let wrong_ca = write_agent_toml(dir.path(), "wrong-ca", &url, &jid, &stranger, Some(&tls));
    let no_cert = write_agent_toml(dir.path(), "no-cert", &url, &jid, &tls.ca_pem, None);
    let t = Instant::now();
    let wrong_ca = must(
        "start the agent with a wrong CA",
        AgentDaemon::start_as(&cluster, "agent-wrong-ca", &agent, &wrong_ca).await,
    );
    let no_cert = must(
        "start the agent without a client certificate",
        AgentDaemon::start_as(&cluster, "agent-no-cert", &agent, &no_cert).await,
    );
    the_cli_works_over_tls(&mut cluster, &jid).await;
    eprintln!(
        "[timing] two agents started, bin/flink run, list, cancel over https: {:.1} s",
        t.elapsed().as_secs_f64()
    );
    tokio::time::sleep(MISCONFIGURED_FOR.saturating_sub(t.elapsed())).await;
    for (agent_, key) in [
        (&wrong_ca, "jobmanager.ca_file"),
        (&no_cert, "jobmanager.client_cert_file"),
    ] {
        let error = refused_and_idle(agent_, &jid, key).await;
        eprintln!("[tls] without {key} right, the agent logs: {error}");
    }
    drop((wrong_ca, no_cert));
    let (_, vertices) = job_status(&must(
        "GET /jobs/:jid",
        cluster.rest().get(&format!("/jobs/{jid}")).await,
    ));
    assert_eq!(
        parallelism_of(&vertices, &map_id),
        Some(1),
        "nothing applied without TLS set right: {vertices:?}"
    );
    eprintln!(
        "[timing] misconfigured agents: {:.1} s",
        t.elapsed().as_secs_f64()
    );

    // 3. The right CA and certificate: usable data, a proposal, the rescale in place.
    let good = write_agent_toml(dir.path(), "good", &url, &jid, &tls.ca_pem, Some(&tls));
    let t = Instant::now();
    let good = must(
        "start the agent with the right CA and certificate",
        AgentDaemon::start(&cluster, &agent, &good).await,
    );
    let labels = [("job_id", jid.as_str())];
    let mut usable_after = None;
    let deadline = Instant::now() + Duration::from_secs(150);
    let rescaled = loop {
        let metrics = must("scrape the agent", good.metrics().await);
        if usable_after.is_none() && metric_sum(&metrics, METRIC_JOB_USABLE, &labels) == 1.0 {
            usable_after = Some(t.elapsed());
        }
        let details = must(
            "GET /jobs/:jid",
            cluster.rest().get(&format!("/jobs/{jid}")).await,
        );
        let (state, vertices) = job_status(&details);
        if fully_running(&state, &vertices)
            && parallelism_of(&vertices, &map_id).is_some_and(|p| p > 1)
        {
            break vertices;
        }
        assert!(
            Instant::now() < deadline,
            "no rescale within 150 s; job: {vertices:?}\nagent:\n{}",
            good.log_tail(30)
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let p = parallelism_of(&rescaled, &map_id).unwrap_or_default();
    let proposals: Vec<(u64, u64)> = good
        .events_with_message(PROPOSING)
        .iter()
        .filter(|e| e["vertex_id"] == map_id.as_str())
        .filter_map(|e| Some((e["current"].as_u64()?, e["proposed"].as_u64()?)))
        .collect();
    assert_eq!(
        proposals,
        vec![(1, p)],
        "the agent proposed cpu-map 1 -> {p} once\n{}",
        good.log_tail(30)
    );
    let usable_after = usable_after.unwrap_or_else(|| {
        panic!(
            "the agent never reported usable data\n{}",
            good.log_tail(30)
        )
    });
    eprintln!(
        "[timing] good agent start -> usable data {:.1} s; -> RUNNING at cpu-map {p} over https {:.1} s",
        usable_after.as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    drop(good);
    cluster.stop();
}

/// Flink's CLI reads the cluster's `config.yaml`, so it presents `rest.p12` and trusts the CA:
/// it submits a second, small load job, lists it beside `jid`, and cancels it.
async fn the_cli_works_over_tls(cluster: &mut FlinkCluster, jid: &str) {
    let jar = cluster.installation().load_job_jar.display().to_string();
    let mut args = vec!["run", "-d", "-c", "loadjob.LoadJob", jar.as_str()];
    args.extend(["--name", "cli-submitted", "--rate", "10"]);
    args.extend([
        "--p-source",
        "1",
        "--p-map",
        "1",
        "--p-agg",
        "1",
        "--p-sink",
        "1",
    ]);
    let submitted = must("bin/flink run", cluster.run_cli(&args, CLI_TIMEOUT).await);
    let cli_jid = submitted
        .lines()
        .find_map(|line| line.split("JobID ").nth(1))
        .map(|id| id.trim().to_owned())
        .unwrap_or_else(|| panic!("no job id in the CLI's output:\n{submitted}"));
    must(
        "the CLI's job RUNNING",
        cluster
            .wait_for_job(&cli_jid, Duration::from_secs(60), fully_running)
            .await,
    );
    let listed = must(
        "bin/flink list",
        cluster.run_cli(&["list", "-r"], CLI_TIMEOUT).await,
    );
    for id in [jid, cli_jid.as_str()] {
        assert!(
            listed
                .lines()
                .any(|l| l.contains(id) && l.contains("RUNNING")),
            "the CLI lists {id} as RUNNING:\n{listed}"
        );
    }
    must(
        "bin/flink cancel",
        cluster.run_cli(&["cancel", &cli_jid], CLI_TIMEOUT).await,
    );
    must(
        "the CLI's job CANCELED",
        cluster
            .poll_until(&format!("/jobs/{cli_jid}"), Duration::from_secs(30), |d| {
                d["state"] == "CANCELED"
            })
            .await,
    );
}

/// Checks that a misconfigured agent logged a failed poll naming `key`, had no usable data,
/// and proposed nothing; returns the logged error.
async fn refused_and_idle(agent: &AgentDaemon, jid: &str, key: &str) -> String {
    let error = agent
        .log_events()
        .iter()
        .filter_map(|e| e["error"].as_str().map(str::to_owned))
        .find(|error| error.contains(key))
        .unwrap_or_else(|| panic!("no logged error names {key}\n{}", agent.log_tail(30)));
    let metrics = must("scrape the agent", agent.metrics().await);
    let job = [("job_id", jid)];
    assert!(
        metric_sum(&metrics, METRIC_ERRORS, &[]) >= 2.0,
        "failed polls are counted\n{metrics}"
    );
    assert_ne!(
        metric_sum(&metrics, METRIC_JOB_USABLE, &job),
        1.0,
        "no usable data without TLS set right"
    );
    assert_eq!(metric_sum(&metrics, METRIC_PROPOSALS, &[]), 0.0);
    assert!(agent.events_with_message(PROPOSING).is_empty());
    error
}

/// Writes `<dir>/<name>.toml` for an agent with the adaptive-scheduler realizer and local
/// gates; `client` presents that setup's agent certificate.
fn write_agent_toml(
    dir: &Path,
    name: &str,
    url: &str,
    jid: &str,
    ca: &Path,
    client: Option<&RestTls>,
) -> std::path::PathBuf {
    let identity = client.map_or_else(String::new, |tls| {
        format!(
            "client_cert_file = \"{}\"\nclient_key_file = \"{}\"\n",
            tls.client_cert_pem.display(),
            tls.client_key_pem.display()
        )
    });
    let text = format!(
        r#"
[jobmanager]
url = "{url}"
ca_file = "{ca}"
{identity}request_timeout = "5s"
connect_timeout = "2s"
fetcher_update_interval = "10s"
[collector]
poll_interval = "{POLL_S}s"
poll_deadline = "10s"
backoff_initial = "1s"
backoff_max = "4s"
jobs = ["{jid}"]
[server]
listen = "127.0.0.1:0"
shutdown_grace = "1s"
[log]
format = "json"
level = "info"
{AUTOSCALER}
[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
agent_id = "real-flink-tls-{name}"
cluster_id = "real-flink-tls"
slots_per_task_manager = 8
disk_bytes_per_task_manager = 10737418240
verify_deadline = "3min"
[control.gates]
min_interval = "0s"
"#,
        ca = ca.display(),
        state = dir.join(format!("{name}-state.json")).display(),
    );
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(&path, text).expect("write the agent's config");
    path
}

/// A key's value in `/jobmanager/config` (a list of `{"key", "value"}`).
fn config_value(config: &Value, key: &str) -> Option<String> {
    config
        .as_array()?
        .iter()
        .find(|entry| entry["key"] == key)
        .and_then(|entry| entry["value"].as_str().map(str::to_owned))
}

async fn vertex_id(cluster: &FlinkCluster, jid: &str, name: &str) -> String {
    let details = must(
        "GET /jobs/:jid",
        cluster.rest().get(&format!("/jobs/{jid}")).await,
    );
    let (_, vertices) = job_status(&details);
    vertices
        .iter()
        .find(|v| v.name == name)
        .map(|v| v.id.clone())
        .unwrap_or_else(|| panic!("no vertex {name}: {details}"))
}

fn parallelism_of(vertices: &[VertexStatus], id: &str) -> Option<u64> {
    vertices.iter().find(|v| v.id == id).map(|v| v.parallelism)
}
