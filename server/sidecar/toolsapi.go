package sidecar

import (
	"encoding/json"
	"net/http"

	"github.com/retrysafe/retrysafe/tools"
)

// ToolJSON describes one tool to an agent: what to show its model.
type ToolJSON struct {
	Name string `json:"name"`
	// FunctionName is the OpenAI function name (dots become underscores).
	FunctionName string `json:"function_name"`
	Description  string `json:"description"`
	// Parameters is the JSON schema of the model-facing fields (system
	// fields such as intent_ref left out: the agent sends intent_ref
	// beside the fields).
	Parameters json.RawMessage `json:"parameters"`
	// Idempotent: the provider deduplicates by the key.
	Idempotent bool `json:"idempotent"`
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request, tenant string) {
	out := struct {
		Tools []ToolJSON `json:"tools"`
	}{Tools: []ToolJSON{}}
	for _, n := range s.cfg.Tools.Names() {
		t, ok := s.cfg.Tools.Tool(n)
		if !ok {
			continue
		}
		out.Tools = append(out.Tools, ToolJSON{
			Name: n, FunctionName: tools.FunctionName(n), Description: t.Description(),
			Parameters: t.Parameters(), Idempotent: t.Idempotent(),
		})
	}
	writeJSON(w, http.StatusOK, out)
}
