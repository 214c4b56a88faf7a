package calls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// DecodeStrict decodes JSON that arrives from outside the process into v:
// exactly one JSON value, no field v's type does not declare, and nothing but
// white space after it. An unknown field is an error naming it
// (`unknown field "cost_micro_usd"`); data after the first JSON value is an
// error giving its byte offset; a type error names the field and offset.
func DecodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeStrict(err)
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

func describeStrict(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		// An embedded struct's Go name is not a JSON key: drop it.
		field := strings.TrimPrefix(te.Field, "CallRecord.")
		if field == "" {
			field = "(top level)"
		}
		if field == "(top level)" {
			return fmt.Errorf("JSON %s at byte %d: want an object of the record's fields", te.Value, te.Offset)
		}
		return fmt.Errorf("field %s: JSON %s at byte %d: want %s", field, te.Value, te.Offset, typeWords(te.Type))
	case errors.As(err, &se):
		return fmt.Errorf("byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF):
		return errors.New("empty input, want a JSON object")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}
