// Package confcheck checks the fields a configuration struct marks
// `required:"true"`, so that each package's Validate states what is
// required once, on the field, and names every missing field at once
// rather than the first.
//
// This package imports only the standard library.
package confcheck

import (
	"fmt"
	"reflect"
	"strings"
)

// Required returns nil when every field of the struct cfg tagged
// `required:"true"` is set, else an error wrapping sentinel that names the
// missing ones in field order ("DB is required", "DB and Queue are
// required"). A field is missing when it is its type's zero value, or an
// empty map or slice. cfg must be a struct or a pointer to one.
func Required(sentinel error, cfg any) error {
	v := reflect.Indirect(reflect.ValueOf(cfg))
	if v.Kind() != reflect.Struct {
		panic(fmt.Sprintf("confcheck: %T is not a struct", cfg))
	}
	var missing []string
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Tag.Get("required") != "true" {
			continue
		}
		fv := v.Field(i)
		switch {
		case fv.IsZero():
		case (fv.Kind() == reflect.Map || fv.Kind() == reflect.Slice) && fv.Len() == 0:
		default:
			continue
		}
		missing = append(missing, f.Name)
	}
	switch len(missing) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%w: %s is required", sentinel, missing[0])
	}
	last := len(missing) - 1
	return fmt.Errorf("%w: %s and %s are required", sentinel, strings.Join(missing[:last], ", "), missing[last])
}
