package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/pixspec"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// loadPixSpec reads the main module's copy of the Central Bank's API Pix
// specification (Apache-2.0; see ../testdata/bcb-pix-api/NOTICE): this
// module's root is bench/, where pixspec.Load would not find it.
func loadPixSpec(t *testing.T) *pixspec.Spec {
	t.Helper()
	raw, err := os.ReadFile("../" + pixspec.File)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := pixspec.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return spec
}

// The no-op API Pix server answers pix.cob as the specification says: the
// tool's PUT, the server's 201, a GET's 200 and 404 all validate against
// the published file with kin-openapi.
func TestPixServerSpeaksTheSpec(t *testing.T) {
	t.Parallel()
	spec := loadPixSpec(t)
	pix := newPixServer()
	defer pix.Close()
	tr := &pixspec.Transport{Spec: spec, Base: pix.client.Transport}
	cob, err := apipix.NewCob(apipix.Config{BaseURL: pix.srv.URL + "/api", ClientID: pixClientID, ClientSecret: pixClientSecret,
		Chave: pixChave, Client: &http.Client{Transport: tr}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	key := strings.Repeat("ab12", 16)
	p := derive.PayloadFromMap(map[string]string{"amount": "18000", "payer_tax_id": "52998224725", "payer_name": "Cliente 1", "intent_ref": "cob-test-1"})
	if _, err := cob.Execute(ctx, key, p); err != nil {
		t.Fatal(err)
	}
	if _, err := cob.Lookup(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := cob.Lookup(ctx, strings.Repeat("cd34", 16)); err == nil {
		t.Fatal("lookup of a txid never PUT found a charge")
	}
	if f := tr.Failures(); len(f) > 0 {
		t.Fatalf("not as the specification says: %+v", f)
	}
	if n := tr.Validated(); n < 3 {
		t.Fatalf("%d exchanges validated, want the PUT and two GETs", n)
	}
	if pix.puts.Load() != 1 || pix.tokens.Load() != 1 || pix.overwrites() != 0 {
		t.Fatalf("puts %d, tokens %d, overwrites %d", pix.puts.Load(), pix.tokens.Load(), pix.overwrites())
	}

	// The check can fail: the server's answer without its txid does not
	// validate.
	req, _ := http.NewRequest(http.MethodPut, "/api/cob/"+key[:apipix.IDLength], bytes.NewBufferString(`{"calendario":{"expiracao":86400},"valor":{"original":"180.00"},"chave":"`+pixChave+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer x")
	reqBody, _ := io.ReadAll(req.Body)
	broken := `{"calendario":{"criacao":"2026-12-01T10:00:00Z","expiracao":86400},"revisao":0,"status":"ATIVA","valor":{"original":"180.00"},"chave":"` + pixChave + `"}`
	if err := spec.ValidateResponse(req, reqBody, http.StatusCreated, http.Header{"Content-Type": {"application/json"}}, []byte(broken)); err == nil {
		t.Fatal("a cob without txid validated")
	}
}
