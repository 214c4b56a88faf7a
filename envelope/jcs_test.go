package envelope

import (
	"bytes"
	"encoding/json"
	"flag"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "update golden files")

// canonicalViaEncoder decodes raw the way Event does and canonicalizes with
// the writer's encoder.
func canonicalViaEncoder(t testing.TB, raw []byte) []byte {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	var buf bytes.Buffer
	require.NoError(t, appendCanonical(&buf, v))
	return buf.Bytes()
}

// TestCanonicalGolden checks both canonicalizers (the reference library and
// the writer's encoder) against the golden files in testdata/canonical.
func TestCanonicalGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/canonical/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, inputs)
	for _, in := range inputs {
		t.Run(filepath.Base(in), func(t *testing.T) {
			raw, err := os.ReadFile(in)
			require.NoError(t, err)
			ref, err := CanonicalizeJSON(raw)
			require.NoError(t, err)
			golden := strings.TrimSuffix(in, ".json") + ".golden"
			if *update {
				require.NoError(t, os.WriteFile(golden, ref, 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			require.Equal(t, string(want), string(ref), "reference canonicalizer")
			require.Equal(t, string(want), string(canonicalViaEncoder(t, raw)), "writer encoder")
		})
	}
}

// TestRFC8785Examples pins the RFC's own published outputs, independent of
// the golden files.
func TestRFC8785Examples(t *testing.T) {
	raw, err := os.ReadFile("testdata/canonical/rfc8785-3.2.2.json")
	require.NoError(t, err)
	want := `{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`
	require.Equal(t, want, string(canonicalViaEncoder(t, raw)))

	raw, err = os.ReadFile("testdata/canonical/rfc8785-3.2.3-sorting.json")
	require.NoError(t, err)
	want = `{"\r":"Carriage Return","1":"One","` + "\u0080" + `":"Control","ö":"Latin Small Letter O With Diaeresis","€":"Euro Sign","😀":"Emoji: Grinning Face","דּ":"Hebrew Letter Dalet With Dagesh"}`
	require.Equal(t, want, string(canonicalViaEncoder(t, raw)))
}

// TestNumberFormatting covers ECMAScript number serialization, including
// the IEEE 754 samples of RFC 8785 appendix B.
func TestNumberFormatting(t *testing.T) {
	cases := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"}, // -0
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, c := range cases {
		var buf bytes.Buffer
		require.NoError(t, appendFloat(&buf, math.Float64frombits(c.bits)))
		require.Equal(t, c.want, buf.String(), "bits %016x", c.bits)
	}
	for _, c := range []struct {
		in   float64
		want string
	}{{1e21, "1e+21"}, {1e-7, "1e-7"}, {0.1, "0.1"}, {2.00, "2"}, {-1.5, "-1.5"}, {123456789012, "123456789012"}} {
		var buf bytes.Buffer
		require.NoError(t, appendFloat(&buf, c.in))
		require.Equal(t, c.want, buf.String())
	}
	var buf bytes.Buffer
	require.Error(t, appendFloat(&buf, math.NaN()))
	require.Error(t, appendFloat(&buf, math.Inf(1)))
}

func TestLessUTF16(t *testing.T) {
	// U+FB33 sorts after U+1F600 in code points but before it in UTF-16
	// (the emoji is a surrogate pair starting 0xD83D).
	require.True(t, lessUTF16("\U0001F600", "\uFB33"))
	require.False(t, lessUTF16("\uFB33", "\U0001F600"))
	require.True(t, lessUTF16("a", "b"))
	require.True(t, lessUTF16("ab", "abc"))
	require.False(t, lessUTF16("abc", "abc"))
	require.True(t, lessUTF16("z", "é"))
}

func TestStringEscaping(t *testing.T) {
	cases := map[string]string{
		"plain":       `"plain"`,
		"a\"b":        `"a\"b"`,
		"a\\b":        `"a\\b"`,
		"\x01\x1f":    `"\u0001\u001f"`,
		"\x7f":        "\"\x7f\"",
		"é😀":          `"é😀"`,
		"</script>":   `"</script>"`,
		"\b\f\n\r\t":  `"\b\f\n\r\t"`,
		"bad\xffutf8": "\"bad\ufffdutf8\"",
	}
	for in, want := range cases {
		var buf bytes.Buffer
		appendString(&buf, in)
		require.Equal(t, want, buf.String(), "input %q", in)
	}
}

// FuzzCanonical decodes arbitrary JSON, canonicalizes it with both
// implementations and checks that they agree, that canonicalization is
// idempotent and that the canonical form decodes to the same value.
func FuzzCanonical(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/canonical/*.json")
	for _, in := range inputs {
		raw, err := os.ReadFile(in)
		if err == nil {
			f.Add(raw)
		}
	}
	f.Add([]byte(`{"a":[1,2,{"b":null}],"c":"\u00e9"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return
		}
		c1, err := ev.MarshalJSON()
		if err != nil {
			return // e.g. numbers out of float64 range
		}
		var ev2 Event
		if err := json.Unmarshal(c1, &ev2); err != nil {
			t.Fatalf("canonical form does not decode: %v\n%s", err, c1)
		}
		c2, err := ev2.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("not idempotent:\n%s\n%s", c1, c2)
		}
		ref, err := CanonicalizeJSON(c1)
		if err != nil {
			return // the reference refuses some inputs encoding/json accepts (e.g. duplicate keys)
		}
		if !bytes.Equal(ref, c1) {
			t.Fatalf("encoder and reference disagree:\n%s\n%s", c1, ref)
		}
	})
}
