-- The central team's console: approvals with a person in the loop, pause switches, named
-- admins, approval policies through the API, webhook notifications.

-- A proposal an approval rule held for a person: the rule, its expiry, and the review.
ALTER TABLE decisions ADD COLUMN approval TEXT;
ALTER TABLE decisions ADD COLUMN review TEXT;
-- The pending queue and the audit's verdict filter, newest first.
CREATE INDEX decisions_verdict ON decisions (verdict, seq);

-- A pending proposal holds its job's open action until it is decided or expires.
ALTER TABLE open_actions ADD COLUMN pending_until BIGINT;

-- Slots at the job's first proposal (the fleet view's saving).
ALTER TABLE jobs ADD COLUMN baseline_slots BIGINT;

ALTER TABLE evacuations ADD COLUMN set_by TEXT;
ALTER TABLE cluster_overrides ADD COLUMN updated_by TEXT;

CREATE TABLE pauses (
    scope TEXT PRIMARY KEY,
    reason TEXT NOT NULL,
    set_by TEXT NOT NULL,
    since BIGINT NOT NULL,
    expires_at BIGINT
);

-- The approval rules set through the API (one row); the configuration's come first.
CREATE TABLE approval_policy (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    rules TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- Every admin action, with the admin's name.
CREATE TABLE admin_actions (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at BIGINT NOT NULL,
    admin TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL
);

-- Webhook deliveries still to make (a bounded queue: the oldest beyond the capacity are
-- dropped and counted). A row is leased by one replica while it is being delivered.
CREATE TABLE notifications (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at BIGINT NOT NULL,
    webhook TEXT NOT NULL,
    event TEXT NOT NULL,
    body TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_until BIGINT,
    last_error TEXT
);
CREATE INDEX notifications_due ON notifications (next_attempt_at);
