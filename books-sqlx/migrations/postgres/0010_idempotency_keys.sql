-- Idempotency keys (`Idempotency-Key` on creates): each key's request fingerprint and
-- the answer it got, written in the transaction that writes the book, so a retried
-- create finds either both or neither. Not data the version covers: no trigger.
CREATE TABLE idempotency_keys (
    key          TEXT        PRIMARY KEY,
    fingerprint  BYTEA       NOT NULL,
    status       INTEGER     NOT NULL,
    content_type TEXT        NOT NULL,
    location     TEXT        NOT NULL,
    etag         TEXT        NOT NULL,
    body         BYTEA       NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);

-- Expired keys are forgotten a small batch at a time.
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
