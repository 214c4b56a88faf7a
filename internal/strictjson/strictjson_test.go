package strictjson

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	type Embedded struct {
		Inner int `json:"inner"`
	}
	type target struct {
		Embedded
		Name string `json:"name"`
		N    int    `json:"n"`
	}
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"ok", `{"name":"a","n":1}`, ""},
		{"trailing space", "{\"name\":\"a\"}\n \t", ""},
		{"unknown field", `{"name":"a","cost_micro_usd":1}`, `unknown field "cost_micro_usd"`},
		{"trailing data", `{"name":"a"} {}`, "trailing data after the JSON value at byte 12"},
		{"type error", `{"n":"x"}`, "field n: JSON string at byte"},
		{"syntax", `{"n":1,}`, "byte 8: invalid character"},
		{"empty", ``, "empty input, want a JSON object"},
		{"top level", `[1]`, "JSON array at byte 1: want an object"},
		{"embedded", `{"inner":"x"}`, "field inner: JSON string at byte"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v target
			err := Decode([]byte(tc.in), &v)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("want nil, have %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("want error containing %q, have %v", tc.wantErr, err)
			}
		})
	}
}
