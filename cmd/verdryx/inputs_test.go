package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/testkit/calltest"
	"github.com/verdryx/verdryx/tracegen"
)

// copySegments copies the segments of src into dir under name(i), i their
// index in src's segment order.
func copySegments(t *testing.T, src, dir string, name func(i int) string) {
	t.Helper()
	segs, _, err := segment.List(src)
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	for i, s := range segs {
		data, err := os.ReadFile(s.Path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name(i)), data, 0o644))
	}
}

// TestTracesEarlierGatewayNaming: a directory of calls-{seq:08}.parquet
// segments (earlier gateways), and one where an upgraded gateway went on
// with the current naming, report what the same segments under current
// names report.
func TestTracesEarlierGatewayNaming(t *testing.T) {
	want, errOut, code := tracesRun(t, "cost-per-correct", "--traces", tracesFixture("split"))
	require.Equal(t, 0, code, errOut)
	// The fixture also holds its expected reports: 2 other files.
	want = strings.Replace(want, "2 other files ignored", "0 other files ignored", 1)
	legacy := t.TempDir()
	copySegments(t, tracesFixture("split"), legacy, func(i int) string { return fmt.Sprintf("calls-%08d.parquet", i) })
	got, errOut, code := tracesRun(t, "cost-per-correct", "--traces", legacy)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got)

	mixed := t.TempDir()
	copySegments(t, tracesFixture("split"), mixed, func(i int) string {
		if i == 0 {
			return "calls-00000007.parquet"
		}
		return fmt.Sprintf("calls-3-1-%08d.parquet", i)
	})
	got, errOut, code = tracesRun(t, "cost-per-correct", "--traces", mixed)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, want, got)
}

// reportGroups runs cost-per-correct --json with args and returns its
// groups, the report proper (stats say where the calls came from).
func reportGroups(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, code := tracesRun(t, append([]string{"cost-per-correct", "--json"}, args...)...)
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Groups json.RawMessage `json:"groups"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotEmpty(t, rep.Groups)
	return string(rep.Groups)
}

// TestInputForms: a directory of calls-{seq:08}.parquet segments, a single
// exported .parquet file (under a name of its own), a directory of such
// exports, a JSON array export, NDJSON, CSV and standard input all give
// the report of the same records.
func TestInputForms(t *testing.T) {
	src := tracesFixture("split")
	var all []calls.Call
	segs, _, err := segment.List(src)
	require.NoError(t, err)
	for _, s := range segs {
		require.NoError(t, segment.Read(s.Path, func(c calls.Call) error { all = append(all, c); return nil }))
	}
	require.Greater(t, len(all), 2)

	dir := t.TempDir()
	legacy := filepath.Join(dir, "legacy")
	require.NoError(t, os.Mkdir(legacy, 0o755))
	copySegments(t, src, legacy, func(i int) string { return fmt.Sprintf("calls-%08d.parquet", i) })
	exports := filepath.Join(dir, "exports")
	require.NoError(t, os.Mkdir(exports, 0o755))
	single := filepath.Join(exports, "march export.parquet")
	require.NoError(t, tracegen.WriteFile(single, tracegen.Current, all, tracegen.Options{}))
	var arr, nd bytes.Buffer
	arr.WriteByte('[')
	for i, c := range all {
		line := calltest.RecordJSON(c)
		nd.Write(append(line, '\n'))
		if i > 0 {
			arr.WriteByte(',')
		}
		arr.Write(line)
	}
	arr.WriteString("]\n")
	array := filepath.Join(dir, "outcomes.json")
	require.NoError(t, os.WriteFile(array, arr.Bytes(), 0o644))
	ndjson := filepath.Join(dir, "calls.ndjson")
	require.NoError(t, os.WriteFile(ndjson, nd.Bytes(), 0o644))

	want := reportGroups(t, "--traces", src)
	for _, args := range [][]string{
		{"--traces", legacy}, {"--input", legacy}, {"--input", single}, {"--input", exports},
		{"--input", array}, {"--input", ndjson},
	} {
		require.JSONEq(t, want, reportGroups(t, args...), "%v", args)
	}

	// Standard input, records and Parquet alike.
	for _, data := range [][]byte{arr.Bytes(), nd.Bytes(), mustRead(t, single)} {
		var stdout, stderr bytes.Buffer
		cmd := newRoot(&stdout, &stderr)
		cmd.SetArgs([]string{"cost-per-correct", "--json", "--input", "-"})
		cmd.SetIn(bytes.NewReader(data))
		require.NoError(t, cmd.ExecuteContext(context.Background()), stderr.String())
		var rep struct {
			Groups json.RawMessage `json:"groups"`
		}
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &rep))
		require.JSONEq(t, want, string(rep.Groups))
	}

	// $TOKENFUSE_DATA_DIR is read when no source is given, and said so.
	t.Setenv("TOKENFUSE_DATA_DIR", legacy)
	out, errOut, code := tracesRun(t, "cost-per-correct", "--json")
	require.Equal(t, 0, code, errOut)
	require.Contains(t, errOut, "$TOKENFUSE_DATA_DIR, "+legacy)
	require.Contains(t, out, `"segments": 2`)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return b
}

// TestInputErrorsInWords: a bad record of a JSON array is named by file,
// place and field, in words, never by a Go type.
func TestInputErrorsInWords(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ name, data, want string }{
		{"a.json", `[{"outcome":"case_resolved","cost_usd":0.1},{"outcome":"x","step":"two"}]`,
			`a.json: record 2 (byte 43): field step: JSON string at byte 27: want a whole number from 0 to 4294967295`},
		{"b.json", `[{"outcome":"x"}, 3]`, `b.json: record 2 (byte 16): JSON number`},
		{"c.json", `{"outcome":"x","cost_microusd":"1"}`, `c.json:1: field cost_microusd`},
		{"d.csv", "outcome,step\nx,-1\n", `d.csv:2: field step: "-1": want a whole number from 0 to 4294967295`},
	} {
		path := filepath.Join(dir, tc.name)
		require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o644))
		_, errOut, code := tracesRun(t, "cost-per-correct", "--input", path)
		require.Equal(t, 2, code, errOut)
		require.Contains(t, errOut, tc.want)
		for _, goType := range []string{"struct", "int64", "uint32", "calls."} {
			require.NotContains(t, errOut, goType)
		}
	}
	_, errOut, code := tracesRun(t, "cost-per-correct", "--input", filepath.Join(dir, "none.parquet"))
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "none.parquet")
}
