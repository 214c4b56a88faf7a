package store

// migrations are the forward schema steps, in order. Step i (0-based) takes
// the store from user_version i to i+1. Never edit a released step; append a
// new one. PRAGMA user_version = len(migrations) once all have run.
func migrations() []string {
	return []string{
		// 1: eval runs, per-case scores with their checks, unmeasured
		// cases with their reasons, baselines.
		`
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
	PRIMARY KEY (run_id, case_id)
);

CREATE TABLE baselines (
	id          TEXT PRIMARY KEY,
	eval_run_id TEXT NOT NULL REFERENCES eval_runs (id),
	mean_score  REAL NOT NULL,
	created_at  TEXT NOT NULL,
	label       TEXT NOT NULL DEFAULT ''
);
`,
		// 2: the worker's trace-call state, ingested segments and eval
		// request results (store/calls.go).
		workerSchema,
		// 3: an eval request is recorded with its run id before grading
		// starts (state running), committed with its run (state done), and
		// counts the events already emitted. Results recorded before this
		// step had emitted theirs.
		`
ALTER TABLE eval_requests ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE eval_requests ADD COLUMN state TEXT NOT NULL DEFAULT 'done';
ALTER TABLE eval_requests ADD COLUMN emitted INTEGER NOT NULL DEFAULT 0;
UPDATE eval_requests SET emitted = 2147483647;
`,
		// 4: a baseline label names one baseline. Stores written before
		// this step may hold a label several times (every call made a new
		// baseline): the newest keeps it, older ones stay reachable by id,
		// unlabelled.
		`
UPDATE baselines SET label = '' WHERE label <> '' AND rowid NOT IN (
	SELECT rowid FROM (
		SELECT rowid, ROW_NUMBER() OVER (PARTITION BY label ORDER BY created_at DESC, rowid DESC) AS n
		FROM baselines WHERE label <> ''
	) WHERE n = 1
);
CREATE UNIQUE INDEX baselines_label ON baselines (label) WHERE label <> '';
CREATE INDEX baselines_run ON baselines (eval_run_id);
`,
		// 5: trace state keyed by partition (store/partitions.go): per
		// partition its applied stream sequence and the snapshot revision
		// it descends from, the dedupe keys of the calls it applied (128-bit
		// digests) and the reduction state of each of its runs.
		partitionSchema,
		// 6: a typed case keeps typryx's verdict (answer id, template,
		// probabilities, or unanswered with its reason; the label posted)
		// as JSON beside its score; '' for every other case.
		`
ALTER TABLE scores ADD COLUMN typed TEXT NOT NULL DEFAULT '';
ALTER TABLE unmeasured ADD COLUMN typed TEXT NOT NULL DEFAULT '';
`,
	}
}
