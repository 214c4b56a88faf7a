package segname

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	cases := []struct {
		name            string
		ok              bool
		pid, nanos, seq uint64
	}{
		{"calls-1a2b-187a0000-00000000.parquet", true, 0x1a2b, 0x187a0000, 0},
		{"calls-ff-100-00000012.parquet", true, 0xff, 0x100, 12},
		{"calls-1-2-123456789.parquet", true, 1, 2, 123456789},
		{"calls-1-2-3.parquet", false, 0, 0, 0},
		{"calls-ZZ-2-00000003.parquet", false, 0, 0, 0},
		{"calls-1-2-00000003.parquet.tmp", false, 0, 0, 0},
		{"other-1-2-00000003.parquet", false, 0, 0, 0},
		{"calls-1-2-0000000x.parquet", false, 0, 0, 0},
		// Earlier gateways: calls-{seq:08}.parquet, pid and nanos 0.
		{"calls-00000000.parquet", true, 0, 0, 0},
		{"calls-00000042.parquet", true, 0, 0, 42},
		{"calls-123456789.parquet", true, 0, 0, 123456789},
		{"calls-0000042.parquet", false, 0, 0, 0},
		{"calls-0000004a.parquet", false, 0, 0, 0},
		{"calls--00000042.parquet", false, 0, 0, 0},
		{"calls-1-00000042.parquet", false, 0, 0, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pid, nanos, seq, ok := Parse(tc.name)
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, []uint64{tc.pid, tc.nanos, tc.seq}, []uint64{pid, nanos, seq})
			}
		})
	}
}
