package junit

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/verdryx/verdryx/grading"
)

// Suite is a run as JUnit XML, one testcase per eval case.
type Suite struct {
	XMLName  xml.Name `xml:"testsuite"`
	Name     string   `xml:"name,attr"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Time     string   `xml:"time,attr"`
	Props    []Prop   `xml:"properties>property"`
	Cases    []Case   `xml:"testcase"`
}

// Prop is one suite property (run_id, model, eval_set_digest).
type Prop struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// Case is one eval case.
type Case struct {
	Name      string   `xml:"name,attr"`
	Classname string   `xml:"classname,attr"`
	Time      string   `xml:"time,attr"`
	Failure   *Message `xml:"failure,omitempty"`
	Skipped   *Message `xml:"skipped,omitempty"`
	// SystemOut is the case's model output, as promptfoo's JUnit carries it.
	SystemOut string `xml:"system-out,omitempty"`
}

// Message is a failure or skip: a message and a body.
type Message struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// Write writes r to w as JUnit XML, with the XML header: a case
// under passMark is a failure whose body lists each failed check with its
// detail, an unmeasured case is skipped with its reason (a typed case
// typryx left unanswered with its reason and answer id); every case
// carries its model output in system-out.
func Write(w io.Writer, r grading.RunSummary, passMark float64) error {
	return write(w, NewSuite(r, passMark, r.EvalSetID))
}

// Suites is several runs as JUnit XML, a testsuite each.
type Suites struct {
	XMLName xml.Name `xml:"testsuites"`
	Name    string   `xml:"name,attr"`
	Suites  []Suite  `xml:"testsuite"`
}

// WriteComparison writes the runs of a model comparison as JUnit XML: a
// testsuite per model named "<eval set> @ <model>", one testcase per
// case and model (classname "<eval set>.<model>.<grader>"), each as
// Write makes it.
func WriteComparison(w io.Writer, name string, runs []grading.RunSummary, passMark float64) error {
	all := Suites{Name: name}
	for _, r := range runs {
		s := NewSuite(r, passMark, r.EvalSetID+"."+r.Model)
		s.Name = r.EvalSetID + " @ " + r.Model
		all.Suites = append(all.Suites, s)
	}
	return write(w, all)
}

func write(w io.Writer, v any) error {
	out, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	if _, err := w.Write(append(out, '\n')); err != nil {
		return fmt.Errorf("junit: %w", err)
	}
	return nil
}

// NewSuite is run r as a testsuite (see Write); class prefixes each
// testcase's classname.
func NewSuite(r grading.RunSummary, passMark float64, class string) Suite {
	suite := Suite{
		Name:  r.EvalSetID,
		Tests: r.Cases,
		Time:  fmt.Sprintf("%.3f", r.FinishedAt.Sub(r.StartedAt).Seconds()),
		Props: []Prop{{"run_id", r.ID}, {"model", r.Model}, {"eval_set_digest", r.EvalSetDigest}},
	}
	for _, s := range r.Scores {
		jc := Case{Name: s.CaseID, Classname: class + "." + s.Grader, Time: fmt.Sprintf("%.3f", s.Duration.Seconds()),
			SystemOut: s.Output}
		switch {
		case s.Unanswered():
			jc.Skipped = &Message{Message: fmt.Sprintf("unanswered by typryx: %s (answer %s)", s.Typed.Reason, s.Typed.AnswerID)}
			suite.Skipped++
		case !s.Graded():
			jc.Skipped = &Message{Message: "unmeasured: " + s.Unmeasured}
			suite.Skipped++
		case s.Value < passMark:
			var body strings.Builder
			for _, ch := range s.Checks {
				if !ch.OK {
					fmt.Fprintf(&body, "%s: %s\n", ch.Name, ch.Detail)
				}
			}
			msg := fmt.Sprintf("score %.3f under %.3f", s.Value, passMark)
			if f := s.Failing(); len(f) > 0 {
				msg += "; failed: " + strings.Join(f, ", ")
			}
			jc.Failure = &Message{Message: msg, Body: body.String()}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, jc)
	}
	return suite
}
