-- Audit of every proposal and its verdict; `seq` orders the audit (newest first) and backs
-- the pagination cursor.
CREATE TABLE decisions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    proposal_id TEXT NOT NULL UNIQUE,
    agent_id TEXT NOT NULL,
    job_id TEXT NOT NULL,
    job_name TEXT NOT NULL,
    cluster_id TEXT NOT NULL,
    region TEXT NOT NULL,
    verdict TEXT NOT NULL,
    received_at BIGINT NOT NULL,
    proposal TEXT NOT NULL,
    decision TEXT NOT NULL,
    outcome TEXT
);
CREATE INDEX decisions_job ON decisions (job_id, seq);
CREATE INDEX decisions_cluster ON decisions (cluster_id, seq);
CREATE INDEX decisions_region ON decisions (region, seq);

-- Latest proposal per job: the fleet view and the minimum-interval rate limit.
CREATE TABLE jobs (
    job_id TEXT PRIMARY KEY,
    job_name TEXT NOT NULL,
    cluster_id TEXT NOT NULL,
    region TEXT NOT NULL,
    last_proposal_id TEXT NOT NULL,
    last_verdict TEXT NOT NULL,
    last_received_at BIGINT NOT NULL,
    last_approved_at BIGINT
);

-- At most one approved action per job waiting for its outcome. The primary key is what
-- serializes approvals per job across coordinator replicas.
CREATE TABLE open_actions (
    job_id TEXT PRIMARY KEY,
    proposal_id TEXT NOT NULL,
    cluster_id TEXT NOT NULL,
    region TEXT NOT NULL,
    approved_at BIGINT NOT NULL
);
CREATE INDEX open_actions_cluster ON open_actions (cluster_id);
CREATE INDEX open_actions_region ON open_actions (region);

CREATE TABLE evacuations (
    region TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    since BIGINT NOT NULL
);

CREATE TABLE cluster_overrides (
    cluster_id TEXT PRIMARY KEY,
    overrides TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);
