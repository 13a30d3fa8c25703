package mcpserver

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/retrysafe/retrysafe/server/internal/edge"
	"github.com/retrysafe/retrysafe/tools"
)

// Whatever a client sends as arguments and _meta, the parsing neither
// panics nor lets a model's intent_ref through as a field, and a reference
// it accepts is one the sidecar would accept.
func FuzzArgumentsAndReference(f *testing.F) {
	for _, seed := range []struct{ args, ref string }{
		{`{"customer_id":"C-42","amount":"R$ 180,00","pix_key":"529.982.247-25"}`, "NF-1"},
		{`{"amount":180.10,"intent_ref":"from-model"}`, ""},
		{`{"amount":1e400}`, " NF-1"},
		{`[1,2]`, "NF-\u0000"},
		{`null`, "NF-\u00e9"},
		{``, "x"},
		{`{"a":1}{"b":2}`, "NF-1"},
		{`{"intent_ref":7}`, "\xff"},
	} {
		f.Add(seed.args, seed.ref)
	}
	s := &Server{}
	modelRef := &served{action: "pix.charge", modelRef: true}
	hostOnly := &served{action: "pix.charge"}
	f.Fuzz(func(t *testing.T, args, ref string) {
		fields, model, errs := decodeArguments(json.RawMessage(args))
		if errs != nil {
			if fields != nil {
				t.Fatal("fields returned with errors")
			}
			return
		}
		if _, ok := fields[tools.RefField]; ok {
			t.Fatal("intent_ref left among the fields")
		}
		for _, sv := range []*served{modelRef, hostOnly} {
			req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Meta: mcp.Meta{MetaIntentRef: ref}}}
			got, source, bad := s.intentRef(sv, req, model)
			if bad != nil {
				if bad.Status != StatusInvalid || len(bad.Errors) != 1 {
					t.Fatalf("refusal %+v", bad)
				}
				continue
			}
			if got != ref || source != RefFromMeta || len(got) > edge.MaxRefLen || !edge.CleanIdentifier(got) || got == "" {
				t.Fatalf("accepted %q from %s", got, source)
			}
		}
	})
}
