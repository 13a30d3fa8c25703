package sandboxcheck_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/sandbox/psp"
	"github.com/retrysafe/retrysafe/tools"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// dropFirst asks the sandbox to drop the connection after executing the
// first POST of every key.
type dropFirst struct {
	seen sync.Map
	n    atomic.Int64
}

func (d *dropFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if k := r.Header.Get("Idempotency-Key"); r.Method == http.MethodPost && k != "" {
		if _, loaded := d.seen.LoadOrStore(k, true); !loaded {
			r = r.Clone(r.Context())
			r.Header.Set("X-Sandbox-Fault", "drop-after")
			d.n.Add(1)
		}
	}
	return (&http.Transport{DisableKeepAlives: true}).RoundTrip(r)
}

// 100 concurrent redeliveries against the sandbox PSP, whose first answer
// per key is lost after the charge was made: one charge per intent.
func TestSandboxPSP(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	pspPool, pspSchema := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	if err := psp.Migrate(ctx, pspPool, pspSchema); err != nil {
		t.Fatal(err)
	}
	srv, err := psp.New(pspPool, psp.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer hs.Close()

	rt := &dropFirst{}
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: hs.URL, Token: "merchant-1", Client: &http.Client{Transport: rt}})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(pix)
	d, err := reg.Deriver([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	store, _ := intent.New(intent.Config{Deriver: d, Logger: quiet})
	pool, _ := pgtest.Schema(t, &pgtest.Opts{MaxConns: 4})
	ex, err := executor.New(executor.Config{DB: pool, Intents: store, Tools: reg, Logger: quiet,
		Lease: 5 * time.Second, Timeout: 2 * time.Second, LeaseMargin: time.Second, BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}

	amounts := []any{"180,00", "180.00", 180, json.Number("180")}
	keys := []string{"529.982.247-25", "52998224725"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]int{}
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ref := fmt.Sprintf("inv-%d", i%2) // two intents, 50 callers each
			out, err := ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: ref, Action: tools.PixChargeName,
				Fields: map[string]any{"customer_id": "c1", "amount": amounts[i%4], "pix_key": keys[i%2]}}, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if out.Status == executor.StatusCompleted {
				var ch psp.Charge
				_ = json.Unmarshal(out.Response, &ch)
				mu.Lock()
				ids[ref+" "+ch.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Settle any caller that saw in_flight.
	for _, ref := range []string{"inv-0", "inv-1"} {
		out, err := ex.Execute(ctx, executor.Call{Tenant: "t1", Ref: ref, Action: tools.PixChargeName,
			Fields: map[string]any{"customer_id": "c1", "amount": "180", "pix_key": keys[0]}}, nil)
		if err != nil || out.Status != executor.StatusCompleted {
			t.Fatalf("%s: %+v %v", ref, out, err)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, hs.URL+"/v1/pix/charges", nil)
	req.Header.Set("Authorization", "Bearer merchant-1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []psp.Charge `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Data) != 2 || rt.n.Load() != 2 {
		t.Fatalf("sandbox holds %d charges for 2 intents (%d dropped answers): %+v", len(list.Data), rt.n.Load(), list.Data)
	}
	for _, c := range list.Data {
		if c.AmountCents != 18000 || c.PixKey != "52998224725" {
			t.Fatalf("charge %+v", c)
		}
	}
	if len(ids) != 2 {
		t.Fatalf("callers saw charges %v", ids)
	}
}
