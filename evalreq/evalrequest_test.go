package evalreq

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/internal/strictjson"
)

// fillDistinct sets every field of the struct v points to a non-zero value
// of its own, so a field dropped or swapped on the way shows.
func fillDistinct(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := range rv.NumField() {
		f := rv.Field(i)
		name := rv.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("v-" + name)
		case reflect.Int:
			f.SetInt(int64(10 + i))
		case reflect.Float64:
			f.SetFloat(0.01 * float64(1+i))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Pointer:
			p := reflect.New(f.Type().Elem())
			require.Equal(t, reflect.Uint64, p.Elem().Kind(), "field %s: extend fillDistinct", name)
			p.Elem().SetUint(uint64(1000 + i))
			f.Set(p)
		case reflect.Slice:
			if f.Type() == reflect.TypeOf([]string(nil)) {
				f.Set(reflect.ValueOf([]string{"v-" + name, "w-" + name}))
				continue
			}
			require.Equal(t, reflect.TypeOf(json.RawMessage(nil)), f.Type(), "field %s: extend fillDistinct", name)
			f.Set(reflect.ValueOf(json.RawMessage(fmt.Sprintf(`{"field":%q}`, name))))
		default:
			t.Fatalf("field %s: kind %s: extend fillDistinct", name, f.Kind())
		}
	}
}

// TestEvalRequestKeepsEveryField: every field of evalrun.Request but the
// in-process ones (json:"-") has a field of the same name, type and JSON key in
// Request, survives the JSON a requester sends (strictly decoded), and
// reaches evalrun.Request unchanged.
func TestEvalRequestKeepsEveryField(t *testing.T) {
	var req Request
	fillDistinct(t, &req)

	b, err := json.Marshal(req)
	require.NoError(t, err)
	var decoded Request
	require.NoError(t, strictjson.Decode(b, &decoded))
	require.Equal(t, req, decoded, "JSON round trip")

	g := decoded.GradingRequest()
	gt, et := reflect.TypeOf(g), reflect.TypeOf(req)
	gv, ev := reflect.ValueOf(g), reflect.ValueOf(req)
	for i := range gt.NumField() {
		gf := gt.Field(i)
		if gf.Tag.Get("json") == "-" {
			continue // in-process only, never sent (Set, RunID)
		}
		ef, ok := et.FieldByName(gf.Name)
		require.True(t, ok, "evalrun.Request.%s has no EvalRequest field", gf.Name)
		require.Equal(t, gf.Type, ef.Type, "field %s type", gf.Name)
		gkey, _, _ := strings.Cut(gf.Tag.Get("json"), ",")
		ekey, _, _ := strings.Cut(ef.Tag.Get("json"), ",")
		require.Equal(t, gkey, ekey, "field %s JSON key", gf.Name)
		require.Equal(t, ev.FieldByIndex(ef.Index).Interface(), gv.Field(i).Interface(), "field %s not kept", gf.Name)
	}
	for i := range et.NumField() {
		// ReplyTo, Judge and Index are the worker's: where the result goes,
		// which judge and which index generation grade it (the deps);
		// Models, Fresh and MinPairs make a comparison
		// (evalrun.CompareRequest, handleCompare).
		if name := et.Field(i).Name; !slices.Contains([]string{"ReplyTo", "Judge", "Index", "Models", "Fresh", "MinPairs"}, name) {
			_, ok := gt.FieldByName(name)
			require.True(t, ok, "EvalRequest.%s does not reach evalrun.Request", name)
		}
	}
}
