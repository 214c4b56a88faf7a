package store

// schemaVersion is the user_version of a store this build writes and
// reads: the one schema below. Nothing has been released, so there is no
// migration: a file of another version is refused.
const schemaVersion = 1

// schema is the store's tables: eval runs, per-case scores with their
// checks and typed verdicts, unmeasured cases with their reasons,
// baselines (a label names at most one), and eval requests (claimed with
// their run id before grading starts, committed with their run, counting
// the result's events already emitted).
const schema = `
CREATE TABLE eval_runs (
	id              TEXT PRIMARY KEY,
	eval_set_id     TEXT NOT NULL,
	eval_set_digest TEXT NOT NULL,
	agent_id        TEXT NOT NULL DEFAULT '',
	model           TEXT NOT NULL,
	judge_id        TEXT NOT NULL DEFAULT '',
	verdryx_version TEXT NOT NULL,
	request_id      TEXT NOT NULL DEFAULT '',
	started_at      TEXT NOT NULL,
	finished_at     TEXT NOT NULL,
	provenance      TEXT NOT NULL
);
CREATE INDEX eval_runs_window ON eval_runs (eval_set_id, model, started_at);
CREATE INDEX eval_runs_agent ON eval_runs (agent_id);

CREATE TABLE scores (
	run_id      TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
	seq         INTEGER NOT NULL,
	case_id     TEXT NOT NULL,
	grader      TEXT NOT NULL,
	value       REAL NOT NULL CHECK (value >= 0 AND value <= 1),
	tokens      INTEGER NOT NULL,
	cost_usd    REAL NOT NULL,
	duration_ns INTEGER NOT NULL,
	checks      TEXT NOT NULL,
	output      TEXT NOT NULL,
	typed       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, case_id)
);

CREATE TABLE unmeasured (
	run_id      TEXT NOT NULL REFERENCES eval_runs (id) ON DELETE CASCADE,
	seq         INTEGER NOT NULL,
	case_id     TEXT NOT NULL,
	grader      TEXT NOT NULL,
	reason      TEXT NOT NULL,
	tokens      INTEGER NOT NULL,
	cost_usd    REAL NOT NULL,
	duration_ns INTEGER NOT NULL,
	checks      TEXT NOT NULL,
	output      TEXT NOT NULL,
	typed       TEXT NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, case_id)
);

CREATE TABLE baselines (
	id          TEXT PRIMARY KEY,
	eval_run_id TEXT NOT NULL REFERENCES eval_runs (id),
	mean_score  REAL NOT NULL,
	created_at  TEXT NOT NULL,
	label       TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX baselines_label ON baselines (label) WHERE label <> '';
CREATE INDEX baselines_run ON baselines (eval_run_id);

CREATE TABLE eval_requests (
	request_id TEXT PRIMARY KEY,
	result     TEXT NOT NULL,
	done_at    TEXT NOT NULL,
	run_id     TEXT NOT NULL DEFAULT '',
	state      TEXT NOT NULL DEFAULT 'done',
	emitted    INTEGER NOT NULL DEFAULT 0
);
`
