package tools_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// A built-in tool configured without a client keeps its connections to the
// provider between concurrent calls. net/http's default transport keeps two
// idle per host, so each round of 16 concurrent calls would open 14 new
// connections (14 TLS handshakes against a real PSP); the provider holds
// every round until all 16 calls are in, so that 16 connections are in use
// at once.
func TestDefaultClientKeepsConnections(t *testing.T) {
	t.Parallel()
	const conc, rounds = 16, 5
	held := toolstest.NewRounds(conc)
	srv := httptest.NewUnstartedServer(held.Hold(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"ch_1","status":"paid"}`))
	}), nil))
	srv.Config.ConnState = held.ConnState
	srv.Start()
	t.Cleanup(srv.Close)

	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	p := derive.Payload{{Name: "amount", Value: "100"}, {Name: "pix_key", Value: "a@b.co"}}
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range conc {
			wg.Go(func() {
				if _, err := pix.Execute(context.Background(), "k", p); err != nil {
					t.Errorf("round %d call %d: %v", r, i, err)
				}
			})
		}
		wg.Wait()
	}
	t.Logf("%d rounds of %d concurrent calls opened %d connections", rounds, conc, held.Opened())
	// A connection back in the pool a moment after its caller returned can
	// be missed by the next round's first calls: allow a few of those.
	if got, most := held.Opened(), int64(conc+conc/2); got > most {
		t.Fatalf("%d rounds of %d concurrent calls opened %d connections, want at most %d: the default client drops idle connections", rounds, conc, got, most)
	}
	if got := held.Opened(); got < conc {
		t.Fatalf("opened %d connections for %d concurrent calls held at once", got, conc)
	}
}
