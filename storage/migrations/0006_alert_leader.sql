-- The alert leader (issue 27, item 3). One node of the cluster evaluates the alert book and
-- delivers it; it is elected by a PostgreSQL advisory lock plus this lease row, whose epoch
-- every write of the book and every delivery record checks (a fenced write changes nothing).
CREATE TABLE alert_lease (
    id SMALLINT PRIMARY KEY CHECK (id = 1),
    holder TEXT,
    epoch BIGINT NOT NULL DEFAULT 0 CHECK (epoch >= 0),
    deadline TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    taken_at TIMESTAMPTZ
);
INSERT INTO alert_lease (id) VALUES (1);

-- The alert book: one row per alert, by its fingerprint (a hash of its sorted labels).
CREATE TABLE alerts (
    fingerprint TEXT PRIMARY KEY,
    labels JSONB NOT NULL,
    annotations JSONB NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('firing', 'resolved')),
    starts_at_unix_nano BIGINT NOT NULL,
    ends_at_unix_nano BIGINT,
    last_window_end_unix_nano BIGINT NOT NULL,
    window_ns BIGINT NOT NULL CHECK (window_ns > 0),
    exemplar_trace_ids TEXT[] NOT NULL,
    epoch BIGINT NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Deliveries that succeeded: one row per idempotency key (fingerprint, start, transition)
-- and target (an Alertmanager member or a webhook), written after the target accepted it.
CREATE TABLE alert_deliveries (
    idempotency_key TEXT NOT NULL,
    target TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    delivered_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (idempotency_key, target)
);
