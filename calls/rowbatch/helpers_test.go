package rowbatch

import "github.com/verdryx/verdryx/calls"

// Row at a time forms of AppendRows, for tests: appendRow is the
// reference AppendRows is checked against, appendCall builds batches from
// calls.

// appendRow adds row i of src as segment row row; a column src was not
// filled with (nil) is taken as zero (null). Rows must be appended in
// increasing row order.
func (b *Builder) appendRow(src *calls.Batch, i int, row uint64) {
	b.rows = append(b.rows, row)
	b.ts = append(b.ts, at(src.TSMillis, i))
	b.cost = append(b.cost, at(src.CostMicroUSD, i))
	b.saved = append(b.saved, at(src.SavedMicroUSD, i))
	b.in = append(b.in, at(src.InputTokens, i))
	b.out = append(b.out, at(src.OutputTokens, i))
	b.step = append(b.step, at(src.Step, i))
	b.stepNull = append(b.stepNull, src.Step == nil || src.StepNull != nil && src.StepNull[i])
	b.tool = append(b.tool, at(src.ToolCalls, i))
	b.toolNull = append(b.toolNull, src.ToolCalls == nil || src.ToolNull != nil && src.ToolNull[i])
	for k, f := range stringFields {
		b.str[k] = append(b.str[k], at(src.Strings(f), i))
	}
}

// at is col[i], or zero for a column the batch was not filled with.
func at[T any](col []T, i int) T {
	if col == nil {
		var z T
		return z
	}
	return col[i]
}

// appendCall adds c as segment row row, interning its strings into runs
// and syms (pass the same tables to Encode).
func (b *Builder) appendCall(c *calls.Call, row uint64, runs, syms *calls.Symbols) {
	b.rows = append(b.rows, row)
	b.ts = append(b.ts, c.TSMillis)
	b.cost = append(b.cost, c.CostMicroUSD)
	b.saved = append(b.saved, c.SavedMicroUSD)
	b.in = append(b.in, c.InputTokens)
	b.out = append(b.out, c.OutputTokens)
	b.step = append(b.step, c.Step)
	b.stepNull = append(b.stepNull, !c.HasStep)
	tool, null := uint32(0), c.ToolCalls == nil
	if !null {
		tool = *c.ToolCalls
	}
	b.tool = append(b.tool, tool)
	b.toolNull = append(b.toolNull, null)
	for k, f := range stringFields {
		t := syms
		if f == calls.FieldRunID {
			t = runs
		}
		b.str[k] = append(b.str[k], t.InternString(*stringField(c, f)))
	}
}
