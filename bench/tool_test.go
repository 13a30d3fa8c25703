package main

import (
	"context"
	"reflect"
	"testing"
)

// The provider answers a key's first request with a new charge and every
// later one with the same charge, marked replayed, and counts the extra
// requests.
func TestProviderReplaysUnderAKey(t *testing.T) {
	t.Parallel()
	p := newProvider()
	t.Cleanup(p.Close)
	ctx := context.Background()
	a1, err := p.charge(ctx, "key-a", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := p.charge(ctx, "key-b", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	a2, err := p.charge(ctx, "key-a", []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if string(a1) != string(a2) || string(a1) == string(b) {
		t.Errorf("answers: a %s then %s, b %s", a1, a2, b)
	}
	if extra, keys := p.duplicates(); extra != 1 || keys != 1 {
		t.Errorf("duplicates = %d extra under %d keys, want 1 under 1", extra, keys)
	}
}

// What the provider keeps per key holds no pointer, so that the garbage
// collector does not scan the keys of a long run (see provider).
func TestProviderKeepsNoPointers(t *testing.T) {
	t.Parallel()
	for _, typ := range []reflect.Type{reflect.TypeFor[keyHash](), reflect.TypeFor[keyRecord]()} {
		if hasPointers(typ) {
			t.Errorf("%v holds a pointer", typ)
		}
	}
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}
