-- Web console sign-ins. Only digests are kept: the SHA-256 of the session id (the cookie) and
-- of the token signed in with, so a database reader can neither use a session nor learn a
-- token, and a token revoked from the token files ends its sessions at the next request.
-- Numbered 0010 to leave 0002..0009 to the API's own migrations.
CREATE TABLE console_sessions (
    id_digest TEXT PRIMARY KEY,
    token_digest TEXT NOT NULL,
    csrf TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_expiry ON console_sessions (expires_at);
