package grading

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// JUnitSuite is a run as JUnit XML, one testcase per eval case.
type JUnitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Props    []JUnitProp `xml:"properties>property"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitProp is one suite property (run_id, model, eval_set_digest).
type JUnitProp struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

// JUnitCase is one eval case.
type JUnitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *JUnitMessage `xml:"failure,omitempty"`
	Skipped   *JUnitMessage `xml:"skipped,omitempty"`
	// SystemOut is the case's model output, as promptfoo's JUnit carries it.
	SystemOut string `xml:"system-out,omitempty"`
}

// JUnitMessage is a failure or skip: a message and a body.
type JUnitMessage struct {
	Message string `xml:"message,attr"`
	Body    string `xml:",chardata"`
}

// WriteJUnit writes r to w as JUnit XML, with the XML header: a case
// under passMark is a failure whose body lists each failed check with its
// detail, an unmeasured case is skipped with its reason (a typed case
// typryx left unanswered with its reason and answer id); every case
// carries its model output in system-out.
func WriteJUnit(w io.Writer, r RunSummary, passMark float64) error {
	suite := JUnitSuite{
		Name:  r.EvalSetID,
		Tests: r.Cases,
		Time:  fmt.Sprintf("%.3f", r.FinishedAt.Sub(r.StartedAt).Seconds()),
		Props: []JUnitProp{{"run_id", r.ID}, {"model", r.Model}, {"eval_set_digest", r.EvalSetDigest}},
	}
	for _, s := range r.Scores {
		jc := JUnitCase{Name: s.CaseID, Classname: r.EvalSetID + "." + s.Grader, Time: fmt.Sprintf("%.3f", s.Duration.Seconds()),
			SystemOut: s.Output}
		switch {
		case s.Unanswered():
			jc.Skipped = &JUnitMessage{Message: fmt.Sprintf("unanswered by typryx: %s (answer %s)", s.Typed.Reason, s.Typed.AnswerID)}
			suite.Skipped++
		case !s.Graded():
			jc.Skipped = &JUnitMessage{Message: "unmeasured: " + s.Unmeasured}
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
			jc.Failure = &JUnitMessage{Message: msg, Body: body.String()}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, jc)
	}
	out, err := xml.MarshalIndent(suite, "", "  ")
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
