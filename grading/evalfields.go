package grading

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
)

// unknownFields returns, sorted, the keys of the JSON object raw that no
// field of struct type t decodes: matched as encoding/json matches them
// (exact or case-insensitive, embedded structs' fields included, `json:"-"`
// fields excluded). An error means raw is not a JSON object.
func unknownFields(raw []byte, t reflect.Type) ([]string, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, err
	}
	if obj == nil {
		return nil, errors.New("not a JSON object")
	}
	known := jsonFieldNames(t)
	var out []string
	for k := range obj {
		if !containsFold(known, k) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out, nil
}

// jsonFieldNames are the JSON names of t's exported fields, with the
// fields of embedded structs promoted.
func jsonFieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			names = append(names, jsonFieldNames(f.Type)...)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

func containsFold(names []string, k string) bool {
	for _, n := range names {
		if strings.EqualFold(n, k) {
			return true
		}
	}
	return false
}

// decodeLenient decodes the JSON object raw into v, reporting each
// unknown key and the first value of a wrong type through add (field, msg)
// and decoding everything else, so one bad field does not hide the
// others. It returns false when raw is not a JSON object at all.
func decodeLenient(raw []byte, v any, add func(field, msg string)) bool {
	unknown, err := unknownFields(raw, reflect.TypeOf(v).Elem())
	if err != nil {
		add("", "decode: "+describeJSONError(raw, err))
		return false
	}
	for _, k := range unknown {
		add("", fmt.Sprintf("decode: unknown field %q", k))
	}
	if err := json.Unmarshal(raw, v); err != nil {
		var te *json.UnmarshalTypeError
		if !errors.As(err, &te) {
			add("", "decode: "+describeJSONError(raw, err))
			return false
		}
		add(te.Field, "decode: "+strings.TrimPrefix(err.Error(), "json: "))
	}
	return true
}
