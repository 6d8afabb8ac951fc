//! SIGHUP rereads the token files, all or nothing, and never ends the process.

mod support;

use std::time::{Duration, Instant};

use flink_autoscale_testkit::Signal;
use hyper::StatusCode;
use support::{job, proposal, Db, Server, ADMIN, AGENT};

const NEW_AGENT: &str = "agent-token-rotated-0123456789";

async fn propose_with(server: &Server, token: &str, id: &str) -> StatusCode {
    let (status, _) = server
        .call(
            "POST",
            "/v1/proposals",
            Some(token),
            Some(proposal(id, &job(1), 4, 6)),
        )
        .await;
    status
}

async fn wait_for_log(server: &Server, needle: &str) {
    let until = Instant::now() + Duration::from_secs(15);
    while !server.stderr().contains(needle) {
        assert!(
            Instant::now() < until,
            "no {needle:?} in:\n{}",
            server.stderr()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_rereads_token_files_and_keeps_the_old_set_on_a_bad_file() {
    let db = Db::sqlite();
    let mut server = Server::start(&db, &["--log-format", "json"]);
    let agent_file = db.dir().join("agent.tokens");
    assert_eq!(propose_with(&server, AGENT, "r-1").await, StatusCode::OK);

    // Rotate: the new token replaces the old one.
    std::fs::write(&agent_file, format!("{NEW_AGENT}\n")).unwrap();
    server.signal(Signal::Hup);
    wait_for_log(&server, "tokens reloaded").await;
    assert!(server.try_wait().is_none(), "SIGHUP ended the coordinator");
    assert_eq!(
        propose_with(&server, AGENT, "r-2").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        propose_with(&server, NEW_AGENT, "r-3").await,
        StatusCode::OK
    );
    let log = server.stderr();
    assert!(
        log.contains(r#""agent_added":1"#) && log.contains(r#""agent_removed":1"#),
        "{log}"
    );
    assert!(
        !log.contains(NEW_AGENT) && !log.contains(AGENT),
        "a token was logged"
    );

    // A bad file (a short token, then no file at all) changes nothing and says why.
    for bad in [Some("short\n"), None] {
        match bad {
            Some(text) => std::fs::write(&agent_file, text).unwrap(),
            None => std::fs::remove_file(&agent_file).unwrap(),
        }
        let refusals = server.stderr().matches("reload refused").count();
        server.signal(Signal::Hup);
        let until = Instant::now() + Duration::from_secs(15);
        while server.stderr().matches("reload refused").count() == refusals {
            assert!(Instant::now() < until, "no refusal logged");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(server.stderr().contains("auth.agent_tokens_file"));
        assert_eq!(
            propose_with(&server, NEW_AGENT, "r-3").await,
            StatusCode::OK,
            "the previous set stays"
        );
    }
    let (status, _) = server.call("GET", "/v1/regions", Some(ADMIN), None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(server.terminate().success());
}
