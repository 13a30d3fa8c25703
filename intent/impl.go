package intent

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/derive"
)

// isFieldError tells a bad extraction (kept, so a frozen intent can still
// be found) from a bad call (returned).
func isFieldError(err error) bool {
	return errors.Is(err, derive.ErrMissingField) || errors.Is(err, derive.ErrInvalidField) || errors.Is(err, derive.ErrAmbiguous)
}

func checkIDs(tenant, ref, action string) error {
	switch {
	case tenant == "":
		return fmt.Errorf("%w: empty tenant", ErrInvalid)
	case ref == "":
		return fmt.Errorf("%w: empty intent_ref", ErrInvalid)
	case action == "":
		return fmt.Errorf("%w: empty action", ErrInvalid)
	}
	for _, id := range [...]struct{ name, v string }{{"tenant", tenant}, {"intent_ref", ref}, {"action", action}} {
		if !Storable(id.v) {
			return fmt.Errorf("%w: %s %s", ErrInvalid, id.name, unstorable)
		}
		if len(id.v) > MaxIDLen {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, id.name, MaxIDLen)
		}
	}
	return nil
}

// MaxIDLen bounds a tenant, an intent_ref and an action, in bytes: the
// three together stay inside what a btree index entry may hold (about
// 2.7 kB), which PostgreSQL otherwise refuses at insert time (54000).
const MaxIDLen = 512

const unstorable = "contains a NUL character or invalid UTF-8, which the database refuses"

// Storable reports whether PostgreSQL stores s in a text or jsonb column
// of a UTF-8 database: valid UTF-8 without NUL (text refuses a NUL byte
// with 22021, jsonb "\u0000" with 22P05). Checked before a call is
// frozen or grouped, so that a value the database refuses never fails the
// commit group the call would have joined.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// unstorableField is a field error for the first payload value that
// Storable refuses, nil when there is none.
func unstorableField(p derive.Payload) error {
	for _, v := range p {
		if !Storable(v.Value) || !Storable(v.Name) {
			return &derive.FieldError{Field: v.Name, Reason: unstorable, Kind: derive.ErrInvalidField}
		}
	}
	return nil
}

// withRef returns a copy of fields with the intent_ref written into every
// reference field the schema names: the reference comes from the system, and
// a model that sent one of its own is overridden.
func (s *Store) withRef(action string, version int, ref string, fields map[string]any) (map[string]any, error) {
	schema, err := s.d.Schema(action, version)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		out[k] = v
	}
	for _, f := range schema.Fields {
		for _, rf := range s.refFields {
			if f.Name == rf {
				out[rf] = ref
			}
		}
	}
	return out, nil
}

// movesMoney reports whether the action's schema (at version) has a money
// field: completing it moved money, and amending it would move more.
func (s *Store) movesMoney(action string, version int) (bool, error) {
	schema, err := s.d.Schema(action, version)
	if err != nil {
		return false, err
	}
	for _, f := range schema.Fields {
		if f.Rule == derive.RuleMoney {
			return true, nil
		}
	}
	return false, nil
}

func (s *Store) derive(tenant, ref, action string, version int, fields map[string]any) (*derive.Result, error) {
	f, err := s.withRef(action, version, ref, fields)
	if err != nil {
		return nil, err
	}
	return s.d.Derive(tenant, action, f, &derive.Opts{Version: version})
}

// Extract implements the documented behaviour (see intent.go).
func (s *Store) extract(p FreezeParams) (*Extraction, error) {
	if err := checkIDs(p.Tenant, p.Ref, p.Action); err != nil {
		return nil, err
	}
	if !Storable(p.SourceRef) {
		return nil, fmt.Errorf("%w: source_ref %s", ErrInvalid, unstorable)
	}
	if len(p.SourceRef) > MaxIDLen {
		return nil, fmt.Errorf("%w: source_ref is longer than %d bytes", ErrInvalid, MaxIDLen)
	}
	r, err := s.derive(p.Tenant, p.Ref, p.Action, p.Version, p.Fields)
	if err == nil {
		if err = unstorableField(r.Payload); err != nil {
			r = nil
		}
	}
	x := &Extraction{FreezeParams: p, Result: r}
	if err != nil {
		if !isFieldError(err) {
			return nil, err
		}
		x.Err = err
	}
	return x, nil
}
