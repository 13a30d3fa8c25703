package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"
)

// CountsText writes counts by name for people: "duplicate 2, processed 1",
// names sorted, never Go's map syntax.
func CountsText(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s %d", n, m[n])
	}
	return strings.Join(parts, ", ")
}

// durationText writes d as a flag takes it, without the zero units that
// time.Duration.String adds: "6h", "1m", "1h30m", "200ms", not "6h0m0s".
func durationText(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// jsonProblem says what is wrong with a JSON request line in JSON's words,
// not Go's: the field and the type it wants ("\"fields\" must be an
// object, not a string"), where the syntax broke, or the unknown field,
// never a Go struct or map[string]interface {}.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		want := jsonKind(te.Type)
		got, _, _ := strings.Cut(te.Value, " ") // "number 1.5": the value is not echoed
		if got == "number" && want == "a whole number" {
			return fmt.Sprintf("%q must be a whole number", te.Field)
		}
		return fmt.Sprintf("%q must be %s, not %s", te.Field, want, map[string]string{
			"string": "a string", "number": "a number", "bool": "true or false", "array": "an array", "object": "an object"}[got])
	case errors.As(err, &se):
		return fmt.Sprintf("not JSON (at byte %d)", se.Offset)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON value a Go type is read from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	}
	return "another JSON value"
}
