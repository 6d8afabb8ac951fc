//! The web console in a real browser: headless Chromium (WebDriver) against the real
//! coordinator, `flink-sim` and agent binaries on loopback, on SQLite and on PostgreSQL.
//!
//! An approval rule holds the job's scale-ups for a person. The person signs in, finds the
//! agent's scale-up on the Pending page, approves it with a comment and watches the agent
//! apply it against the simulator, flags the job's region and sees the next scale-down
//! refused, pauses the cluster, and searches the audit. Screenshots of each page go to
//! `target/console-screenshots/<backend>/`.
//!
//! Build the binaries first (`scripts/test.sh` does: `cargo build --workspace --bins`).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use flink_autoscale_testkit::Daemon;
use serde_json::json;
use support::webdriver::Browser;
use support::{Db, ADMIN};

/// One browser at a time: two Chromiums on a 2-core machine slow both tests down.
static ONE_BROWSER: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the agent may take to propose, and to apply, once the load asks for it.
const LOOP_TIMEOUT: Duration = Duration::from_secs(120);
const REGION: &str = "console-region";
const CLUSTER: &str = "console-cluster";

/// One job whose middle vertex is overloaded from the start (6,000 records/s into 2 x 2,000),
/// with windows short enough for decisions within seconds.
const SCENARIO: &str = r#"
[cluster]
slots_per_taskmanager = 4

[[job]]
name = "console-orders"
downtime_ms = 500
checkpoint_interval_ms = 2000
state_size_bytes = 5_000_000

[job.config]
"job.autoscaler.enabled" = "true"
"job.autoscaler.target.utilization" = "0.7"
"job.autoscaler.stabilization.interval" = "3s"
"job.autoscaler.metrics.window" = "8s"
"job.autoscaler.scale-down.interval" = "2s"

[[job.vertex]]
name = "Source: Orders"
parallelism = 2
capacity = 10000
source = { partitions = 8, topic = "orders", rate = { kind = "constant", value = 6000 } }

[[job.vertex]]
name = "Enrich"
parallelism = 2
capacity = 2000

[[job.vertex]]
name = "Sink: Writer"
parallelism = 2
capacity = 20000

[[job.edge]]
from = "Source: Orders"
to = "Enrich"
ship_strategy = "HASH"

[[job.edge]]
from = "Enrich"
to = "Sink: Writer"
ship_strategy = "REBALANCE"
"#;

mod sqlite {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_person_runs_the_fleet_from_the_console() {
        super::scenario(super::Db::sqlite(), "sqlite").await;
    }
}

mod postgres {
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_person_runs_the_fleet_from_the_console() {
        if let Some(db) = super::Db::postgres() {
            super::scenario(db, "postgres").await;
        }
    }
}

fn binary(name: &str) -> PathBuf {
    flink_autoscale_testkit::binary(name).expect("the binary (cargo build --workspace --bins)")
}

fn screenshots(backend: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/console-screenshots")
        .join(backend)
}

async fn scenario(db: Db, backend: &str) {
    let _one = ONE_BROWSER.lock().await;
    let Some(browser) = Browser::start().await else {
        return;
    };
    let shots = screenshots(backend);
    let dir = db.dir();
    let server = support::Server::start(&db, &["--min-interval-seconds", "0"]);
    let base = server.base.clone();
    // Before the agent starts: its first scale-up waits for a person.
    let rules = json!({ "rules": [{
        "name": "orders-ups-by-hand", "jobs": ["console-orders"],
        "direction": "up", "action": "manual"
    }]});
    let (status, body) = server
        .call("PUT", "/v1/policies", Some(ADMIN), Some(rules))
        .await;
    assert_eq!(status, hyper::StatusCode::OK, "{body}");

    std::fs::write(dir.join("scenario.toml"), SCENARIO).expect("scenario");
    let sim = Daemon::start(
        "flink-sim",
        Command::new(binary("flink-sim"))
            .arg("--scenario")
            .arg(dir.join("scenario.toml"))
            .args(["--listen", "127.0.0.1:0"]),
        START_TIMEOUT,
    )
    .expect("start flink-sim");
    let job_id = {
        let jobs: serde_json::Value =
            serde_json::from_str(&sim.get("/jobs").body).expect("jobs JSON");
        jobs["jobs"][0]["id"].as_str().expect("a job").to_string()
    };
    flink_autoscale_testkit::write_private(&dir.join("agent.token"), support::AGENT)
        .expect("agent token");
    std::fs::write(dir.join("agent.toml"), agent_toml(sim.url(), &base, &dir))
        .expect("agent config");
    let agent = Daemon::start(
        "agent",
        Command::new(binary("flink-autoscale-agent"))
            .arg("run")
            .arg("--config")
            .arg(dir.join("agent.toml")),
        START_TIMEOUT,
    )
    .expect("start the agent");

    // Signing in: any console page sends a browser without a session to the form.
    browser.goto(&format!("{base}/ui/audit")).await;
    assert!(
        browser.current_url().await.contains("/ui/sign-in?next="),
        "{}",
        browser.current_url().await
    );
    browser.screenshot(&shots.join("sign-in.png")).await;
    browser.find("#token").await.type_text(ADMIN).await;
    browser.find("form button[type=submit]").await.click().await;
    assert_eq!(browser.wait_for_text("h1", "Audit").await, "Audit");
    let cookies = browser.cookies().await;
    let session = cookies
        .iter()
        .find(|c| c["name"] == "fa_session")
        .unwrap_or_else(|| panic!("no session cookie: {cookies:?}"));
    assert_eq!(session["httpOnly"], true, "{session}");
    assert_eq!(session["sameSite"], "Strict", "{session}");
    assert!(session["expiry"].as_u64().is_some(), "{session}");
    assert!(
        !browser.current_url().await.contains(ADMIN),
        "a token in a URL"
    );

    // The agent's scale-up waits on the Pending page, with its evidence; approve it.
    let pending = wait_for_row(
        &browser,
        &format!("{base}/ui/pending"),
        "tr[data-proposal] button.approve",
    )
    .await;
    assert!(
        pending.contains("Enrich") && pending.contains("orders-ups-by-hand"),
        "{pending}"
    );
    assert!(
        browser.find("#pending-count").await.text().await.trim() == "1",
        "the navigation counts the pending proposal"
    );
    let proposal_id = browser
        .execute(
            "return document.querySelector('tr[data-proposal]').dataset.proposal;",
            json!([]),
        )
        .await
        .as_str()
        .expect("a proposal id")
        .to_string();
    // Typed text keeps the list from refreshing under the click (console.js skips busy parts).
    browser
        .find("tr[data-proposal] input[name=comment]")
        .await
        .type_text("peak traffic, approved in the console")
        .await;
    browser.screenshot(&shots.join("pending.png")).await;
    browser
        .find("tr[data-proposal] button.approve")
        .await
        .click()
        .await;
    // The form comes back to /ui/pending: wait for the page without the row, not for a URL.
    wait_until(
        &browser,
        "return document.querySelector('#pending .empty') !== null \
         && document.querySelector('tr[data-proposal=\"' + arguments[0] + '\"]') === null;",
        json!([proposal_id]),
    )
    .await;

    // The agent applies it against the simulator; the audit says who approved it and why.
    let scale_up = wait_for_row(
        &browser,
        &format!("{base}/ui/audit?verdict=approved"),
        "tr[data-proposal] .outcome-applied",
    )
    .await;
    assert!(scale_up.contains("Enrich"), "{scale_up}");
    assert!(
        scale_up.contains("approved by") && scale_up.contains("approved in the console"),
        "{scale_up}"
    );
    browser.goto(&format!("{base}/ui/")).await;
    let fleet = browser.find("tr[data-job]").await.text().await;
    assert!(fleet.contains("console-orders"), "{fleet}");
    assert!(fleet.contains("applied"), "{fleet}");
    let now: u64 = text_number(&browser, "#slots-now").await;
    let before: u64 = text_number(&browser, "#slots-before").await;
    // One slot-sharing group: the widest vertex (2) before, the scaled-up Enrich now.
    assert_eq!(before, 2);
    assert!(now > before, "scaled up: {now} slots now, {before} before");
    browser.screenshot(&shots.join("fleet.png")).await;

    // The region starts a failover: flag it on the Regions page.
    browser.goto(&format!("{base}/ui/regions")).await;
    browser
        .find("#flag-region input[name=region]")
        .await
        .type_text(REGION)
        .await;
    browser
        .find("#flag-region input[name=reason]")
        .await
        .type_text("failover drill, INC-4711")
        .await;
    browser.find("#flag-region button").await.click().await;
    let flagged = wait_for_row_here(&browser, &format!("tr[data-region=\"{REGION}\"]")).await;
    assert!(flagged.contains("INC-4711"), "{flagged}");

    // Load drops: the agent proposes a scale-down, and the coordinator refuses it.
    sim_post(
        &sim,
        &format!("/_sim/jobs/{job_id}/rate"),
        json!({"multiplier": 0.2}),
    )
    .await;
    let refused = wait_for_row(
        &browser,
        &format!("{base}/ui/audit?verdict=refused"),
        "tr[data-proposal] .verdict-refused",
    )
    .await;
    assert!(refused.contains("region_evacuating"), "{refused}");

    // A deploy freeze: pause the cluster for an hour with the form.
    browser.goto(&format!("{base}/ui/regions")).await;
    browser
        .execute(
            "document.querySelector('#pause select[name=kind]').value = 'cluster';",
            json!([]),
        )
        .await;
    browser
        .find("#pause input[name=value]")
        .await
        .type_text(CLUSTER)
        .await;
    browser
        .find("#pause input[name=reason]")
        .await
        .type_text("deploy freeze, CHG-1234")
        .await;
    browser
        .find("#pause input[name=expires_in_minutes]")
        .await
        .type_text("60")
        .await;
    browser.find("#pause button").await.click().await;
    let paused =
        wait_for_row_here(&browser, &format!("tr[data-pause=\"cluster/{CLUSTER}\"]")).await;
    assert!(
        paused.contains("CHG-1234")
            && (paused.contains("in 59 min") || paused.contains("in 60 min")),
        "{paused}"
    );
    let (_, pauses) = server.call("GET", "/v1/pauses", Some(ADMIN), None).await;
    assert_eq!(
        pauses["pauses"][0]["scope"],
        format!("cluster/{CLUSTER}"),
        "{pauses}"
    );
    browser.screenshot(&shots.join("regions.png")).await;

    // The audit, searched with the form: only refusals of this cluster.
    browser.goto(&format!("{base}/ui/audit")).await;
    browser
        .find("input[name=cluster]")
        .await
        .type_text(CLUSTER)
        .await;
    browser
        .execute(
            "document.querySelector('select[name=verdict]').value = 'refused';",
            json!([]),
        )
        .await;
    browser.find("form.filters button").await.click().await;
    // The click starts a navigation; wait for it rather than read the old page.
    wait_for_url(
        &browser,
        &["verdict=refused", &format!("cluster={CLUSTER}")],
    )
    .await;
    browser.find("tr[data-proposal]").await;
    // All rows read in one script: the page may refresh its rows between two reads.
    let rows = browser
        .execute(
            "return Array.from(document.querySelectorAll('tr[data-proposal]')).map(r => r.innerText);",
            json!([]),
        )
        .await;
    let rows: Vec<String> = rows
        .as_array()
        .expect("row texts")
        .iter()
        .map(|t| t.as_str().unwrap_or_default().to_string())
        .collect();
    assert!(!rows.is_empty());
    for text in &rows {
        assert!(
            text.contains("refused") && !text.contains("approved"),
            "{text}"
        );
    }
    browser.screenshot(&shots.join("audit.png")).await;

    // The job's history, with its chart.
    browser.find("tr[data-proposal] a").await.click().await;
    wait_for_url(&browser, &[&format!("/ui/jobs/{job_id}")]).await;
    browser.find("svg.chart path.series").await;
    assert!(browser.find_all("svg.chart path.series").await.len() >= 3);
    browser.screenshot(&shots.join("job.png")).await;

    browser.quit().await;
    drop(agent);
    drop(sim);
    server.terminate();
}

/// Waits until the browser's URL holds every one of `parts` (a click's navigation is under way).
async fn wait_for_url(browser: &Browser, parts: &[&str]) {
    let deadline = Instant::now() + LOOP_TIMEOUT;
    loop {
        let url = browser.current_url().await;
        if parts.iter().all(|p| url.contains(p)) {
            return;
        }
        assert!(Instant::now() < deadline, "{url} lacks one of {parts:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The text of the table row holding the first element `css`, read in one script (the page
/// may be navigating or refreshing its rows).
async fn row_text(browser: &Browser, css: &str) -> Option<String> {
    browser
        .execute(
            "const e = document.querySelector(arguments[0]); return e ? e.closest('tr').innerText : null;",
            json!([css]),
        )
        .await
        .as_str()
        .map(str::to_string)
}

/// Waits, without reloading, until an element `css` appears (a click's navigation is under
/// way); answers the text of its table row.
async fn wait_for_row_here(browser: &Browser, css: &str) -> String {
    let deadline = Instant::now() + LOOP_TIMEOUT;
    loop {
        if let Some(text) = row_text(browser, css).await {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {css:?} within {LOOP_TIMEOUT:?}; page:\n{}",
            browser.source().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits until `script` returns true on the current page.
async fn wait_until(browser: &Browser, script: &str, args: serde_json::Value) {
    let deadline = Instant::now() + LOOP_TIMEOUT;
    while browser.execute(script, args.clone()).await != json!(true) {
        assert!(
            Instant::now() < deadline,
            "not {script} within {LOOP_TIMEOUT:?}; page:\n{}",
            browser.source().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reloads `url` until an element `css` appears; answers the text of its table row.
async fn wait_for_row(browser: &Browser, url: &str, css: &str) -> String {
    let deadline = Instant::now() + LOOP_TIMEOUT;
    loop {
        browser.goto(url).await;
        if let Some(text) = row_text(browser, css).await {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "no {css:?} on {url} within {LOOP_TIMEOUT:?}; page:\n{}",
            browser.source().await
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn text_number(browser: &Browser, css: &str) -> u64 {
    let text = browser.find(css).await.text().await;
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{css}: {text:?} is not a number"))
}

async fn sim_post(sim: &Daemon, path: &str, body: serde_json::Value) {
    let response = flink_autoscale_testkit::http_request(
        sim.addr(),
        "POST",
        path,
        None,
        Some(&body.to_string()),
    );
    assert_eq!(response.status, 200, "{path}: {}", response.body);
}

fn agent_toml(jobmanager: &str, coordinator: &str, dir: &Path) -> String {
    format!(
        r#"[jobmanager]
url = "{jobmanager}"
fetcher_update_interval = "1s"
request_timeout = "1s"

[collector]
poll_interval = "1s"
poll_deadline = "1s"

[server]
listen = "127.0.0.1:0"

[control]
realizer = "adaptive-scheduler"
state_file = "{state}"
agent_id = "console-agent"
cluster_id = "{CLUSTER}"
region = "{REGION}"
slots_per_task_manager = 4
disk_bytes_per_task_manager = 10737418240
verify_deadline = "60s"
retry_initial = "1s"
retry_max = "5s"

[control.coordinator]
url = "{coordinator}"
token_file = "{tokens}"
request_timeout = "2s"
"#,
        state = dir.join("agent-state.json").display(),
        tokens = dir.join("agent.token").display(),
    )
}
