package tools

import (
	"context"
	"encoding/json"

	"github.com/retrysafe/retrysafe/derive"
)

// RefField is the schema field that carries the intent_ref. The system fills
// it in from the intent; the model never sees it.
const RefField = "intent_ref"

// Tool is one action an agent may take.
//
// Implementations must be safe for concurrent use.
type Tool interface {
	// Name is the action name ("pix.charge"). It is the derive action and,
	// with dots replaced by underscores, the OpenAI function name.
	Name() string
	// Description is shown to the model.
	Description() string
	// Schema is the explicit field schema derive normalizes and keys. Its
	// Action must equal Name().
	Schema() derive.Schema
	// SystemFields lists schema fields filled in by the system, not the
	// model (typically RefField). They are left out of Parameters.
	SystemFields() []string
	// Parameters is the JSON schema of the model-facing parameters. Most
	// tools return ParametersFromSchema(t.Schema(), t.SystemFields()...).
	Parameters() json.RawMessage
	// Idempotent reports whether the provider honours the key passed to
	// Execute (an Idempotency-Key header or equivalent), so that calling
	// twice with one key acts once.
	Idempotent() bool
	// Execute performs the action for a frozen payload. key is the frozen
	// idempotency key and must reach the provider unchanged. The returned
	// JSON is stored and replayed to later callers. Errors should carry a
	// Class (see Error); unclassified errors count as uncertain.
	Execute(ctx context.Context, key string, payload derive.Payload) (json.RawMessage, error)
}

// Looker is implemented by tools whose provider can be asked about a key.
// Lookup returns the stored response of the action done under key, or an
// error matching ErrNotFound when the provider has no record of it. Any
// other error means the provider could not be asked (and nothing is
// concluded).
type Looker interface {
	Lookup(ctx context.Context, key string) (json.RawMessage, error)
}

// Func adapts plain functions to Tool, for tools written inline.
type Func struct {
	ToolName        string
	ToolDescription string
	// Fields is the schema. Fields.Action may be left empty (ToolName is
	// used); Fields.Version 0 means 2.
	Fields derive.Schema
	// System lists fields filled by the system (RefField when the schema
	// has it, if System is nil).
	System []string
	// Params overrides the generated JSON schema.
	Params json.RawMessage
	// HonoursKey: the provider deduplicates by the key (see Tool.Idempotent).
	HonoursKey bool
	Exec       func(ctx context.Context, key string, payload derive.Payload) (json.RawMessage, error)
	// Look, when set, makes the tool a Looker.
	Look func(ctx context.Context, key string) (json.RawMessage, error)
}

// Name implements Tool.
func (f *Func) Name() string { return f.ToolName }

// Description implements Tool.
func (f *Func) Description() string { return f.ToolDescription }

// Schema implements Tool.
func (f *Func) Schema() derive.Schema {
	s := f.Fields
	if s.Action == "" {
		s.Action = f.ToolName
	}
	if s.Version == 0 {
		s.Version = 2
	}
	return s
}

// SystemFields implements Tool.
func (f *Func) SystemFields() []string {
	if f.System != nil {
		return f.System
	}
	for _, fl := range f.Fields.Fields {
		if fl.Name == RefField {
			return []string{RefField}
		}
	}
	return nil
}

// Parameters implements Tool.
func (f *Func) Parameters() json.RawMessage {
	if f.Params != nil {
		return f.Params
	}
	return ParametersFromSchema(f.Schema(), f.SystemFields()...)
}

// Idempotent implements Tool.
func (f *Func) Idempotent() bool { return f.HonoursKey }

// Execute implements Tool.
func (f *Func) Execute(ctx context.Context, key string, p derive.Payload) (json.RawMessage, error) {
	return f.Exec(ctx, key, p)
}

// Lookup implements Looker. Without Look it reports ErrLookupUnsupported.
func (f *Func) Lookup(ctx context.Context, key string) (json.RawMessage, error) {
	if f.Look == nil {
		return nil, ErrLookupUnsupported
	}
	return f.Look(ctx, key)
}

// CanLookup implements LookupChecker.
func (f *Func) CanLookup() bool { return f.Look != nil }

// LookupChecker is implemented by Lookers whose lookup depends on
// configuration (an adapter without a lookup function, an HTTP tool without
// a lookup endpoint).
type LookupChecker interface {
	CanLookup() bool
}

// CanLookup returns t's Looker when t can really be asked about a key.
func CanLookup(t Tool) (Looker, bool) {
	l, ok := t.(Looker)
	if !ok {
		return nil, false
	}
	if c, ok := t.(LookupChecker); ok && !c.CanLookup() {
		return nil, false
	}
	return l, true
}
