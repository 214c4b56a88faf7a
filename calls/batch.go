package calls

// Field names one column of a TokenFuse segment, in schema order.
type Field uint8

// The sixteen segment columns (docs/traces.md, "TokenFuse segments"), in
// schema order.
const (
	FieldTSMillis Field = iota
	FieldRunID
	FieldModel
	FieldDecision
	FieldInputTokens
	FieldOutputTokens
	FieldCostMicroUSD
	FieldStep
	FieldAgentID
	FieldSavedMicroUSD
	FieldParentRunID
	FieldOnBehalfOf
	FieldOutcome
	FieldKeyID
	FieldUnit
	FieldToolCalls
	NumFields
)

// Name returns the Parquet column name of f.
func (f Field) Name() string {
	return [NumFields]string{
		ColTSMillis, ColRunID, ColModel, ColDecision, ColInputTokens, ColOutputTokens,
		ColCostMicroUSD, ColStep, ColAgentID, ColSavedMicro, ColParentRunID, ColOnBehalfOf,
		ColOutcome, ColKeyID, ColUnit, ColToolCalls,
	}[f]
}

// Required reports whether a segment must carry f: columns 1-8 except
// run_id, whose absence marks a legacy per-call file, and step, whose
// absence makes ordering fall back to encounter order.
func (f Field) Required() bool { return f < FieldStep && f != FieldRunID }

// FieldByName returns the field called name.
func FieldByName(name string) (Field, bool) {
	for f := range NumFields {
		if f.Name() == name {
			return f, true
		}
	}
	return 0, false
}

// FieldSet is a set of fields.
type FieldSet uint32

// AllFields holds every column.
const AllFields FieldSet = 1<<NumFields - 1

// Fields returns the set holding fs.
func Fields(fs ...Field) FieldSet {
	var s FieldSet
	for _, f := range fs {
		s |= 1 << f
	}
	return s
}

// Has reports whether f is in s.
func (s FieldSet) Has(f Field) bool { return s&(1<<f) != 0 }

// Batch is a column-oriented block of calls from one segment. Every column of
// the requested FieldSet has Len entries, whether or not the segment had the
// column (absent and null values are zero, strings id 0 = ""). String columns
// hold ids into the Symbols the batch was filled with (run_id into the run
// table, every other string into the shared table). StepNull and ToolNull are
// non-nil only when some entry of that column in this batch was null (or the
// column is absent, for step). HasRunID is false for a segment without a
// run_id column.
type Batch struct {
	Len      int
	HasRunID bool

	TSMillis      []int64
	RunID         []int32
	Model         []int32
	Decision      []int32
	InputTokens   []uint64
	OutputTokens  []uint64
	CostMicroUSD  []int64
	Step          []uint32
	StepNull      []bool
	AgentID       []int32
	SavedMicroUSD []int64
	ParentRunID   []int32
	OnBehalfOf    []int32
	Outcome       []int32
	KeyID         []int32
	Unit          []int32
	ToolCalls     []uint32
	ToolNull      []bool
}

// Strings returns the id column of a string field, or nil.
func (b *Batch) Strings(f Field) []int32 {
	switch f {
	case FieldRunID:
		return b.RunID
	case FieldModel:
		return b.Model
	case FieldDecision:
		return b.Decision
	case FieldAgentID:
		return b.AgentID
	case FieldParentRunID:
		return b.ParentRunID
	case FieldOnBehalfOf:
		return b.OnBehalfOf
	case FieldOutcome:
		return b.Outcome
	case FieldKeyID:
		return b.KeyID
	case FieldUnit:
		return b.Unit
	}
	return nil
}

// Call returns row i of b as a Call, resolving string ids through runs (for
// run_id) and syms (every other string).
func (b *Batch) Call(i int, runs, syms *Symbols) Call {
	c := Call{HasRunID: b.HasRunID, HasStep: true}
	str := func(col []int32, t *Symbols) string {
		if col == nil {
			return ""
		}
		return t.Name(col[i])
	}
	if b.TSMillis != nil {
		c.TSMillis = b.TSMillis[i]
	}
	c.RunID = str(b.RunID, runs)
	c.Model = str(b.Model, syms)
	c.Decision = str(b.Decision, syms)
	if b.InputTokens != nil {
		c.InputTokens = b.InputTokens[i]
	}
	if b.OutputTokens != nil {
		c.OutputTokens = b.OutputTokens[i]
	}
	if b.CostMicroUSD != nil {
		c.CostMicroUSD = b.CostMicroUSD[i]
	}
	if b.Step != nil {
		c.Step = b.Step[i]
	}
	if b.Step == nil || (b.StepNull != nil && b.StepNull[i]) {
		c.HasStep = false
	}
	c.AgentID = str(b.AgentID, syms)
	if b.SavedMicroUSD != nil {
		c.SavedMicroUSD = b.SavedMicroUSD[i]
	}
	c.ParentRunID = str(b.ParentRunID, syms)
	c.OnBehalfOf = str(b.OnBehalfOf, syms)
	c.Outcome = str(b.Outcome, syms)
	c.KeyID = str(b.KeyID, syms)
	c.Unit = str(b.Unit, syms)
	if b.ToolCalls != nil && (b.ToolNull == nil || !b.ToolNull[i]) {
		v := b.ToolCalls[i]
		c.ToolCalls = &v
	}
	return c
}
