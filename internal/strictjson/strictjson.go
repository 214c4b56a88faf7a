// Package strictjson decodes JSON that arrives from outside the process
// strictly, with errors that name the field and byte offset in the words
// of the JSON, never of Go. It imports nothing of verdryx.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// Decode decodes JSON that arrives from outside the process into v:
// exactly one JSON value, no field v's type does not declare, and nothing but
// white space after it. An unknown field is an error naming it
// (`unknown field "cost_micro_usd"`); data after the first JSON value is an
// error giving its byte offset; a type error names the field and offset.
func Decode(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describe(err, reflect.TypeOf(v))
	}
	off := dec.InputOffset()
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("trailing data after the JSON value at byte %d", off)
	}
	return nil
}

// typeWords says what a value of type t is, in words a user of the JSON
// reads: never a Go type name.
func typeWords(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number from %d to %d", -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number from 0 to %d", uint64(1)<<(t.Bits()-1)*2-1)
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "an object"
}

// Describe words an error of an encoding/json Decoder (a syntax error, a
// type error, an early end) as Decode does.
func Describe(err error) error { return describe(err, nil) }

func describe(err error, t reflect.Type) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := dropEmbedded(t, te.Field)
		if field == "" {
			want := "another JSON value"
			if t != nil {
				want = typeWords(t)
			}
			return fmt.Errorf("JSON %s at byte %d: want %s", te.Value, te.Offset, want)
		}
		return fmt.Errorf("field %s: JSON %s at byte %d: want %s", field, te.Value, te.Offset, typeWords(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF):
		return errors.New("empty input, want a JSON object")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}

// dropEmbedded drops from a decoding error's field path the Go names of
// the embedded structs it passes through (encoding/json names them, but
// they are not keys of the JSON): t is the type decoded into.
func dropEmbedded(t reflect.Type, path string) string {
	var keep []string
	for _, seg := range strings.Split(path, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t != nil && t.Kind() == reflect.Struct {
			if f, ok := t.FieldByName(seg); ok && f.Anonymous {
				t = f.Type
				continue
			}
		}
		if seg != "" {
			keep = append(keep, seg)
		}
		t = nil // past the first key, nested types are not followed
	}
	return strings.Join(keep, ".")
}
