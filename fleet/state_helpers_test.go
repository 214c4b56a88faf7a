package fleet

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/tracemsg"
)

// The two helpers below repeat partstate's in-package ones over its
// exported API: partstate's tests are in-package, so they cannot import a
// helper package that imports partstate. Generators and reductions are
// shared, in testkit/calltest.

// applyAll applies cs to s as records (key i), one message each.
func applyAll(t *testing.T, s *partstate.State, cs []calls.Call, from int) {
	t.Helper()
	for i := range cs {
		c := cs[i]
		key := fmt.Sprintf("call-%d", from+i)
		s.Begin()
		require.NoError(t, s.Apply(tracemsg.HashKey(key), &c, partstate.RecordOrder(c.TSMillis, key)))
	}
	s.Settle(true)
}

// memLoad is a day-table loader over tables kept by the test.
type memLoad map[int32][]byte

func (m memLoad) load(d int32, ref *partstate.DayRef) (*partstate.DayTable, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	return partstate.DecodeDayTable(b)
}

func (m memLoad) keys(d int32, ref *partstate.DayRef) ([]byte, error) {
	b, ok := m[d]
	if !ok {
		return nil, fmt.Errorf("no table for day %d", d)
	}
	_, _, _, keys, err := partstate.DayTableKeys(b)
	return keys, err
}

func (m memLoad) keep(tables []*partstate.DayTable) {
	for _, t := range tables {
		m[t.Day] = t.Encode(nil)
	}
}
