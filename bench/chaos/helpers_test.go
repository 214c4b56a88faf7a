package chaos

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/segment"
)

// callPrint identifies a call by every field it carries.
type callPrint [16]byte

func fingerprint(c calls.Call) callPrint {
	h := sha256.New()
	var b [8]byte
	num := func(v uint64) { binary.LittleEndian.PutUint64(b[:], v); h.Write(b[:]) }
	str := func(s string) { num(uint64(len(s))); h.Write([]byte(s)) }
	num(uint64(c.TSMillis))
	str(c.RunID)
	str(c.Model)
	str(c.Decision)
	num(c.InputTokens)
	num(c.OutputTokens)
	num(uint64(c.CostMicroUSD))
	num(uint64(c.Step))
	str(c.AgentID)
	num(uint64(c.SavedMicroUSD))
	str(c.ParentRunID)
	str(c.OnBehalfOf)
	str(c.Outcome)
	str(c.KeyID)
	str(c.Unit)
	if c.ToolCalls == nil {
		num(1 << 40)
	} else {
		num(uint64(*c.ToolCalls))
	}
	var p callPrint
	copy(p[:], h.Sum(nil))
	return p
}

// directCalls counts every call of dir by fingerprint, reading each segment
// whole or not at all, as cost-per-correct does.
func directCalls(dir string) (map[callPrint]int, int64, error) {
	segs, _, err := segment.List(dir)
	if err != nil {
		return nil, 0, fmt.Errorf("list %s: %w", dir, err)
	}
	counts := make(map[callPrint]int)
	var n int64
	for _, s := range segs {
		var prints []callPrint
		err := segment.Read(s.Path, func(c calls.Call) error {
			prints = append(prints, fingerprint(c))
			return nil
		})
		if err != nil {
			if segment.IsError(err) {
				continue
			}
			return nil, 0, fmt.Errorf("read %s: %w", s.Path, err)
		}
		for _, p := range prints {
			counts[p]++
		}
		n += int64(len(prints))
	}
	return counts, n, nil
}
