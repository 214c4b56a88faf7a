package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// partitionSchema is the worker's trace state keyed by partition. The store
// does not interpret run states or the partition's counters: they are the
// worker's encoding, kept as blobs. Dedupe keys are stored as one row per
// commit holding that commit's new keys (KeySize bytes each), so a batch
// costs one insert for its keys rather than one per call; the worker keeps
// the partition's keys in memory and checks them there.
const partitionSchema = `
CREATE TABLE partitions (
	part     INTEGER PRIMARY KEY,
	last_seq INTEGER NOT NULL,
	base_rev INTEGER NOT NULL,
	meta     BLOB NOT NULL
);
CREATE TABLE partition_keys (
	part INTEGER NOT NULL,
	keys BLOB NOT NULL
);
CREATE INDEX partition_keys_part ON partition_keys (part);
CREATE TABLE partition_runs (
	part  INTEGER NOT NULL,
	run   BLOB NOT NULL,
	state BLOB NOT NULL,
	PRIMARY KEY (part, run)
) WITHOUT ROWID;
`

// KeySize is the size of a partition dedupe key: a 128-bit digest of the
// call's identity.
const KeySize = 16

// Key is a partition dedupe key.
type Key = [KeySize]byte

// PartitionMeta is a partition's head: the highest stream sequence applied,
// the revision of the shared snapshot the state descends from (0: none) and
// the worker's encoded partition counters.
type PartitionMeta struct {
	LastSeq uint64
	BaseRev uint64
	Meta    []byte
}

// RunState is the encoded reduction state of one run of a partition.
type RunState struct {
	Run   []byte
	State []byte
}

// PartitionCommit is what one batch changes in a partition: the new head,
// the dedupe keys it added, the run states it changed (added or replaced)
// and the runs it removed (Drop, applied before Runs).
type PartitionCommit struct {
	Head PartitionMeta
	Keys []Key
	Runs []RunState
	Drop [][]byte
}

// keysPerRow bounds the keys of one partition_keys row (64 KiB).
const keysPerRow = 4096

// CommitPartition applies c to partition part in one transaction: either
// all of it is stored or none. The keys must be new to the partition (the
// caller deduplicates). It is safe for concurrent use (SQLite serialises
// writers).
func (s *Store) CommitPartition(ctx context.Context, part int, c PartitionCommit) error {
	return s.CommitPartitions(ctx, []PartCommit{{Part: part, Commit: c}})
}

// PartCommit is one partition's commit in a group (CommitPartitions).
type PartCommit struct {
	Part   int
	Commit PartitionCommit
}

// CommitPartitions applies the commits of several partitions in one
// transaction (one sync to disk for all of them): either all of them are
// stored or none. Commits of one partition apply in order.
func (s *Store) CommitPartitions(ctx context.Context, cs []PartCommit) (err error) {
	if len(cs) == 0 {
		return nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("commit partition %d: %w", cs[0].Part, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	for _, c := range cs {
		if err = commitPartition(ctx, tx, c.Part, c.Commit); err != nil {
			return err
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit partition %d: %w", cs[0].Part, err)
	}
	return nil
}

func commitPartition(ctx context.Context, tx *sql.Tx, part int, c PartitionCommit) error {
	for len(c.Keys) > 0 {
		n := min(len(c.Keys), keysPerRow)
		b := make([]byte, 0, n*KeySize)
		for _, k := range c.Keys[:n] {
			b = append(b, k[:]...)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO partition_keys (part, keys) VALUES (?, ?)`, part, b); err != nil {
			return fmt.Errorf("commit partition %d: keys: %w", part, err)
		}
		c.Keys = c.Keys[n:]
	}
	for _, run := range c.Drop {
		if _, err := tx.ExecContext(ctx, `DELETE FROM partition_runs WHERE part = ? AND run = ?`, part, run); err != nil {
			return fmt.Errorf("commit partition %d: drop run: %w", part, err)
		}
	}
	if len(c.Runs) > 0 {
		stmt, err := tx.PrepareContext(ctx, `INSERT OR REPLACE INTO partition_runs (part, run, state) VALUES (?, ?, ?)`)
		if err != nil {
			return fmt.Errorf("commit partition %d: runs: %w", part, err)
		}
		defer stmt.Close()
		for _, r := range c.Runs {
			if _, err := stmt.ExecContext(ctx, part, r.Run, r.State); err != nil {
				return fmt.Errorf("commit partition %d: run state: %w", part, err)
			}
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO partitions (part, last_seq, base_rev, meta) VALUES (?, ?, ?, ?)`,
		part, int64(c.Head.LastSeq), int64(c.Head.BaseRev), nonNil(c.Head.Meta)); err != nil {
		return fmt.Errorf("commit partition %d: head: %w", part, err)
	}
	return nil
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// ReplacePartition replaces everything stored for partition part with c
// (a state loaded from a snapshot), in one transaction.
func (s *Store) ReplacePartition(ctx context.Context, part int, c PartitionCommit) (err error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("replace partition %d: %w", part, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	for _, q := range []string{`DELETE FROM partition_keys WHERE part = ?`, `DELETE FROM partition_runs WHERE part = ?`, `DELETE FROM partitions WHERE part = ?`} {
		if _, err = tx.ExecContext(ctx, q, part); err != nil {
			return fmt.Errorf("replace partition %d: %w", part, err)
		}
	}
	if err = commitPartition(ctx, tx, part, c); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("replace partition %d: %w", part, err)
	}
	return nil
}

// SetPartitionBase records that partition part's state was published as
// snapshot revision rev.
func (s *Store) SetPartitionBase(ctx context.Context, part int, rev uint64) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE partitions SET base_rev = ? WHERE part = ?`, int64(rev), part); err != nil {
		return fmt.Errorf("partition %d: record snapshot revision %d: %w", part, rev, err)
	}
	return nil
}

// PartitionHead returns partition part's head, and false when nothing is
// stored for it.
func (s *Store) PartitionHead(ctx context.Context, part int) (PartitionMeta, bool, error) {
	var m PartitionMeta
	var last, base int64
	err := s.db.QueryRowContext(ctx, `SELECT last_seq, base_rev, meta FROM partitions WHERE part = ?`, part).Scan(&last, &base, &m.Meta)
	if errors.Is(err, sql.ErrNoRows) {
		return PartitionMeta{}, false, nil
	}
	if err != nil {
		return PartitionMeta{}, false, fmt.Errorf("partition %d head: %w", part, err)
	}
	m.LastSeq, m.BaseRev = uint64(last), uint64(base)
	return m, true, nil
}

// Partitions lists the partitions with a stored head, ascending.
func (s *Store) Partitions(ctx context.Context) ([]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT part FROM partitions ORDER BY part`)
	if err != nil {
		return nil, fmt.Errorf("list partitions: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var p int
		if err := rows.Scan(&p); err != nil {
			return nil, fmt.Errorf("list partitions: %w", err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// EachPartitionKey calls fn with every dedupe key of partition part.
func (s *Store) EachPartitionKey(ctx context.Context, part int, fn func(Key)) error {
	rows, err := s.db.QueryContext(ctx, `SELECT keys FROM partition_keys WHERE part = ?`, part)
	if err != nil {
		return fmt.Errorf("partition %d keys: %w", part, err)
	}
	defer rows.Close()
	var b sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&b); err != nil {
			return fmt.Errorf("partition %d keys: %w", part, err)
		}
		if len(b)%KeySize != 0 {
			return fmt.Errorf("partition %d keys: a row of %d bytes", part, len(b))
		}
		for i := 0; i < len(b); i += KeySize {
			fn(Key(b[i : i+KeySize]))
		}
	}
	return rows.Err()
}

// EachPartitionRun calls fn with every run state of partition part; the
// slices are valid only during the call.
func (s *Store) EachPartitionRun(ctx context.Context, part int, fn func(run, state []byte) error) error {
	rows, err := s.db.QueryContext(ctx, `SELECT run, state FROM partition_runs WHERE part = ?`, part)
	if err != nil {
		return fmt.Errorf("partition %d runs: %w", part, err)
	}
	defer rows.Close()
	var run, state sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&run, &state); err != nil {
			return fmt.Errorf("partition %d runs: %w", part, err)
		}
		if err := fn(run, state); err != nil {
			return err
		}
	}
	return rows.Err()
}

// PartitionRun returns the state of one run of partition part, and whether
// it is stored.
func (s *Store) PartitionRun(ctx context.Context, part int, run []byte) ([]byte, bool, error) {
	var state []byte
	err := s.db.QueryRowContext(ctx, `SELECT state FROM partition_runs WHERE part = ? AND run = ?`, part, run).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("partition %d run: %w", part, err)
	}
	return state, true, nil
}
