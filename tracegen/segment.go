// Package tracegen writes TokenFuse call-trace segments in the exact Parquet
// schema of TokenFuse's gateway (docs/traces.md, "TokenFuse segments":
// INT64, UTF8 strings, UINT64 and UINT32 logical integers, nullable
// tool_calls), deterministically: the same input gives the same bytes. It builds the fixtures under testdata/traces and the
// large directories of `verdryx bench traces`.
package tracegen

import (
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
)

// Layout is a segment schema variant.
type Layout int

// Layouts.
const (
	// Current is the 16-column schema: columns 1-15 required, tool_calls
	// nullable.
	Current Layout = iota
	// Nullable has columns 9-16 and step nullable: empty strings, a zero
	// saved_microusd, a nil ToolCalls and a missing step are written as nulls.
	Nullable
	// Old8 is the original 8-column schema (ts_millis .. step).
	Old8
	// NoRunID is the 16-column schema without run_id: a legacy per-call file.
	NoRunID
)

func (l Layout) String() string {
	switch l {
	case Current:
		return "current"
	case Nullable:
		return "nullable"
	case Old8:
		return "old8"
	case NoRunID:
		return "no-run-id"
	}
	return fmt.Sprintf("layout(%d)", int(l))
}

type currentRow struct {
	TSMillis      int64   `parquet:"ts_millis"`
	RunID         string  `parquet:"run_id,dict"`
	Model         string  `parquet:"model,dict"`
	Decision      string  `parquet:"decision,dict"`
	InputTokens   uint64  `parquet:"input_tokens"`
	OutputTokens  uint64  `parquet:"output_tokens"`
	CostMicroUSD  int64   `parquet:"cost_microusd"`
	Step          uint32  `parquet:"step"`
	AgentID       string  `parquet:"agent_id,dict"`
	SavedMicroUSD int64   `parquet:"saved_microusd"`
	ParentRunID   string  `parquet:"parent_run_id,dict"`
	OnBehalfOf    string  `parquet:"on_behalf_of,dict"`
	Outcome       string  `parquet:"outcome,dict"`
	KeyID         string  `parquet:"key_id,dict"`
	Unit          string  `parquet:"unit,dict"`
	ToolCalls     *uint32 `parquet:"tool_calls,optional"`
}

type nullableRow struct {
	TSMillis      int64   `parquet:"ts_millis"`
	RunID         string  `parquet:"run_id,dict"`
	Model         string  `parquet:"model,dict"`
	Decision      string  `parquet:"decision,dict"`
	InputTokens   uint64  `parquet:"input_tokens"`
	OutputTokens  uint64  `parquet:"output_tokens"`
	CostMicroUSD  int64   `parquet:"cost_microusd"`
	Step          *uint32 `parquet:"step,optional"`
	AgentID       *string `parquet:"agent_id,optional,dict"`
	SavedMicroUSD *int64  `parquet:"saved_microusd,optional"`
	ParentRunID   *string `parquet:"parent_run_id,optional,dict"`
	OnBehalfOf    *string `parquet:"on_behalf_of,optional,dict"`
	Outcome       *string `parquet:"outcome,optional,dict"`
	KeyID         *string `parquet:"key_id,optional,dict"`
	Unit          *string `parquet:"unit,optional,dict"`
	ToolCalls     *uint32 `parquet:"tool_calls,optional"`
}

type old8Row struct {
	TSMillis     int64  `parquet:"ts_millis"`
	RunID        string `parquet:"run_id,dict"`
	Model        string `parquet:"model,dict"`
	Decision     string `parquet:"decision,dict"`
	InputTokens  uint64 `parquet:"input_tokens"`
	OutputTokens uint64 `parquet:"output_tokens"`
	CostMicroUSD int64  `parquet:"cost_microusd"`
	Step         uint32 `parquet:"step"`
}

type noRunIDRow struct {
	TSMillis      int64   `parquet:"ts_millis"`
	Model         string  `parquet:"model,dict"`
	Decision      string  `parquet:"decision,dict"`
	InputTokens   uint64  `parquet:"input_tokens"`
	OutputTokens  uint64  `parquet:"output_tokens"`
	CostMicroUSD  int64   `parquet:"cost_microusd"`
	Step          uint32  `parquet:"step"`
	AgentID       string  `parquet:"agent_id,dict"`
	SavedMicroUSD int64   `parquet:"saved_microusd"`
	ParentRunID   string  `parquet:"parent_run_id,dict"`
	OnBehalfOf    string  `parquet:"on_behalf_of,dict"`
	Outcome       string  `parquet:"outcome,dict"`
	KeyID         string  `parquet:"key_id,dict"`
	Unit          string  `parquet:"unit,dict"`
	ToolCalls     *uint32 `parquet:"tool_calls,optional"`
}

func nullStr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// SegmentName returns the TokenFuse file name of a segment.
func SegmentName(pid, nanos, seq uint64) string {
	return fmt.Sprintf("calls-%x-%x-%08d.parquet", pid, nanos, seq)
}

// Options tunes a segment's physical layout.
type Options struct {
	// RowGroupRows cuts a row group every this many rows; <= 0 means one
	// row group per Close.
	RowGroupRows int64
	// PageBytes is the page buffer size in bytes; <= 0 keeps parquet-go's
	// default. Small values make several pages per column chunk.
	PageBytes int
}

// SegmentWriter streams calls into one segment.
type SegmentWriter struct {
	layout Layout
	write  func([]calls.Call) error
	close  func() error
}

// NewSegmentWriter returns a writer of layout to w. Close finishes the file
// (it does not close w).
func NewSegmentWriter(w io.Writer, layout Layout, opts Options) (*SegmentWriter, error) {
	wopts := []parquet.WriterOption{parquet.CreatedBy("verdryx-tracegen", "1", "")}
	if opts.RowGroupRows > 0 {
		wopts = append(wopts, parquet.MaxRowsPerRowGroup(opts.RowGroupRows))
	}
	if opts.PageBytes > 0 {
		wopts = append(wopts, parquet.PageBufferSize(opts.PageBytes))
	}
	sw := &SegmentWriter{layout: layout}
	switch layout {
	case Current:
		gw := parquet.NewGenericWriter[currentRow](w, wopts...)
		sw.write = convertWrite(gw, func(c *calls.Call) currentRow {
			return currentRow{c.TSMillis, c.RunID, c.Model, c.Decision, c.InputTokens, c.OutputTokens,
				c.CostMicroUSD, c.Step, c.AgentID, c.SavedMicroUSD, c.ParentRunID, c.OnBehalfOf,
				c.Outcome, c.KeyID, c.Unit, c.ToolCalls}
		})
		sw.close = gw.Close
	case Nullable:
		gw := parquet.NewGenericWriter[nullableRow](w, wopts...)
		sw.write = convertWrite(gw, func(c *calls.Call) nullableRow {
			r := nullableRow{TSMillis: c.TSMillis, RunID: c.RunID, Model: c.Model, Decision: c.Decision,
				InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CostMicroUSD: c.CostMicroUSD,
				AgentID: nullStr(c.AgentID), ParentRunID: nullStr(c.ParentRunID), OnBehalfOf: nullStr(c.OnBehalfOf),
				Outcome: nullStr(c.Outcome), KeyID: nullStr(c.KeyID), Unit: nullStr(c.Unit), ToolCalls: c.ToolCalls}
			if c.HasStep {
				st := c.Step
				r.Step = &st
			}
			if c.SavedMicroUSD != 0 {
				v := c.SavedMicroUSD
				r.SavedMicroUSD = &v
			}
			return r
		})
		sw.close = gw.Close
	case Old8:
		gw := parquet.NewGenericWriter[old8Row](w, wopts...)
		sw.write = convertWrite(gw, func(c *calls.Call) old8Row {
			return old8Row{c.TSMillis, c.RunID, c.Model, c.Decision, c.InputTokens, c.OutputTokens, c.CostMicroUSD, c.Step}
		})
		sw.close = gw.Close
	case NoRunID:
		gw := parquet.NewGenericWriter[noRunIDRow](w, wopts...)
		sw.write = convertWrite(gw, func(c *calls.Call) noRunIDRow {
			return noRunIDRow{c.TSMillis, c.Model, c.Decision, c.InputTokens, c.OutputTokens,
				c.CostMicroUSD, c.Step, c.AgentID, c.SavedMicroUSD, c.ParentRunID, c.OnBehalfOf,
				c.Outcome, c.KeyID, c.Unit, c.ToolCalls}
		})
		sw.close = gw.Close
	default:
		return nil, fmt.Errorf("tracegen: unknown layout %d", int(layout))
	}
	return sw, nil
}

func convertWrite[T any](gw *parquet.GenericWriter[T], conv func(*calls.Call) T) func([]calls.Call) error {
	var buf []T
	return func(cl []calls.Call) error {
		buf = buf[:0]
		for i := range cl {
			buf = append(buf, conv(&cl[i]))
		}
		_, err := gw.Write(buf)
		return err
	}
}

// Write appends calls to the segment.
func (sw *SegmentWriter) Write(cl []calls.Call) error {
	if err := sw.write(cl); err != nil {
		return fmt.Errorf("write %s segment rows: %w", sw.layout, err)
	}
	return nil
}

// Close flushes the last row group and writes the footer.
func (sw *SegmentWriter) Close() error {
	if err := sw.close(); err != nil {
		return fmt.Errorf("close %s segment: %w", sw.layout, err)
	}
	return nil
}

// WriteFile writes calls as one segment file at path.
func WriteFile(path string, layout Layout, cl []calls.Call, opts Options) (err error) {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create segment: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close segment file: %w", cerr)
		}
	}()
	sw, err := NewSegmentWriter(f, layout, opts)
	if err != nil {
		return err
	}
	if err := sw.Write(cl); err != nil {
		return err
	}
	return sw.Close()
}
