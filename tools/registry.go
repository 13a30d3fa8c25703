package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrysafe/retrysafe/derive"
)

// Registry holds the tools an agent may call. Register everything at
// start-up, then share the Registry: reads are safe for concurrent use.
type Registry struct {
	mu     sync.RWMutex
	byName map[string]Tool
	byFunc map[string]string // OpenAI function name -> tool name
}

// NewRegistry returns a registry holding ts.
func NewRegistry(ts ...Tool) (*Registry, error) {
	r := &Registry{byName: map[string]Tool{}, byFunc: map[string]string{}}
	for _, t := range ts {
		if err := r.Register(t); err != nil {
			return nil, err
		}
	}
	return r, nil
}

var funcNameRe = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// FunctionName is the OpenAI function name of a tool: its name with dots
// replaced by underscores (OpenAI accepts only [a-zA-Z0-9_-]).
func FunctionName(toolName string) string { return strings.ReplaceAll(toolName, ".", "_") }

// Register adds t. Its schema is validated now, not at the first call.
func (r *Registry) Register(t Tool) error {
	name := t.Name()
	s := t.Schema()
	if s.Action != name {
		return fmt.Errorf("tools: %q: schema action %q differs from the tool name", name, s.Action)
	}
	if err := s.Validate(); err != nil {
		return fmt.Errorf("tools: %q: %w", name, err)
	}
	fn := FunctionName(name)
	if !funcNameRe.MatchString(fn) {
		return fmt.Errorf("tools: %q: function name %q is not accepted by OpenAI", name, fn)
	}
	for _, sf := range t.SystemFields() {
		if !hasField(s, sf) {
			return fmt.Errorf("tools: %q: system field %q is not in the schema", name, sf)
		}
	}
	if p := t.Parameters(); p != nil && !json.Valid(p) {
		return fmt.Errorf("tools: %q: parameters are not valid JSON", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byName[name]; dup {
		return fmt.Errorf("tools: %q registered twice", name)
	}
	if other, dup := r.byFunc[fn]; dup {
		return fmt.Errorf("tools: %q and %q share function name %q", other, name, fn)
	}
	r.byName[name] = t
	r.byFunc[fn] = name
	return nil
}

func hasField(s derive.Schema, name string) bool {
	for _, f := range s.Fields {
		if f.Name == name {
			return true
		}
	}
	return false
}

// Tool returns the tool registered as name.
func (r *Registry) Tool(name string) (Tool, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.byName[name]
	return t, ok
}

// Names lists the registered tool names, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Schemas returns every registered tool's schema plus derive.BuiltinSchemas()
// for actions no tool claims.
func (r *Registry) Schemas() []derive.Schema {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []derive.Schema
	for _, n := range r.namesLocked() {
		out = append(out, r.byName[n].Schema())
		if e, ok := r.byName[n].(EarlierSchemas); ok {
			out = append(out, e.EarlierSchemas()...)
		}
	}
	for _, s := range derive.BuiltinSchemas() {
		if _, taken := r.byName[s.Action]; !taken {
			out = append(out, s)
		}
	}
	return out
}

func (r *Registry) namesLocked() []string {
	out := make([]string, 0, len(r.byName))
	for n := range r.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Deriver builds the derive.Deriver for every registered tool (at the
// version its schema declares, which becomes the action's default) plus
// derive.BuiltinSchemas().
func (r *Registry) Deriver(secret []byte) (*derive.Deriver, error) {
	defaults := map[string]int{}
	r.mu.RLock()
	for n, t := range r.byName {
		defaults[n] = t.Schema().Version
	}
	r.mu.RUnlock()
	return derive.New(derive.Config{Secret: secret, Schemas: r.Schemas(), DefaultVersions: defaults})
}

// OpenAITools returns one function definition per tool, sorted by name,
// for openai.ChatCompletionRequest.Tools.
func (r *Registry) OpenAITools() []openai.Tool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]openai.Tool, 0, len(r.byName))
	for _, n := range r.namesLocked() {
		t := r.byName[n]
		out = append(out, openai.Tool{
			Type: openai.ToolTypeFunction,
			Function: &openai.FunctionDefinition{
				Name:        FunctionName(n),
				Description: t.Description(),
				Parameters:  t.Parameters(),
			},
		})
	}
	return out
}

// Call is a model's tool call resolved against the registry.
type Call struct {
	Tool   Tool
	Action string         // the tool name
	Fields map[string]any // the model's arguments; numbers as json.Number
}

// ParseToolCall resolves a go-openai tool call: it finds the tool by its
// function name and decodes the arguments (numbers kept as json.Number, so
// money never passes through float64). System fields the model sent anyway
// are removed: they come from the system.
func (r *Registry) ParseToolCall(tc openai.ToolCall) (*Call, error) {
	return r.ParseFunctionCall(tc.Function.Name, tc.Function.Arguments)
}

// ParseFunctionCall is ParseToolCall for a bare name and JSON arguments.
func (r *Registry) ParseFunctionCall(funcName, arguments string) (*Call, error) {
	r.mu.RLock()
	name, ok := r.byFunc[funcName]
	if !ok {
		if _, direct := r.byName[funcName]; direct {
			name, ok = funcName, true
		}
	}
	t := r.byName[name]
	r.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, funcName)
	}
	fields := map[string]any{}
	if strings.TrimSpace(arguments) != "" {
		dec := json.NewDecoder(bytes.NewReader([]byte(arguments)))
		dec.UseNumber()
		if err := dec.Decode(&fields); err != nil {
			return nil, fmt.Errorf("tools: %s: arguments are not a JSON object: %w", name, err)
		}
	}
	for _, sf := range t.SystemFields() {
		delete(fields, sf)
	}
	return &Call{Tool: t, Action: name, Fields: fields}, nil
}
