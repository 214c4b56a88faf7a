package calls

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
		return fmt.Errorf("field %s: JSON %s at byte %d is not a %s", field, te.Value, te.Offset, te.Type)
	case errors.As(err, &se):
		return fmt.Errorf("byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.EOF):
		return errors.New("empty input, want a JSON object")
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}
