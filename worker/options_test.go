package worker

import (
	"reflect"
	"testing"
)

// TestOptionsHaveNoCallbacks: Options is data. The worker runs the
// replay, serves /report, decides when it is drained and reports on
// Outputs; no field hands its behaviour back to the caller.
func TestOptionsHaveNoCallbacks(t *testing.T) {
	typ := reflect.TypeFor[Options]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if k := f.Type.Kind(); k == reflect.Func || k == reflect.Chan {
			t.Errorf("Options.%s is a %s: the worker's behaviour belongs in the worker", f.Name, k)
		}
	}
}
