package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// logSeq is the log sequence of a run or baseline (0: not on the log as
// far as this store has read it).
func (s *Store) logSeq(ctx context.Context, id string) (uint64, error) {
	var seq sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT seq FROM quality_records WHERE id = ?`, id).Scan(&seq)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("log place of %s: %w", id, err)
	}
	return uint64(max(seq.Int64, 0)), nil
}
