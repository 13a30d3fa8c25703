package sidecar_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/server/sidecar"
)

// unsafeDB answers the settings query as a server with fsync,
// full_page_writes and synchronous_commit off and an asynchronous standby
// would; everything else goes to the pool.
type unsafeDB struct{ sidecar.DB }

type settingsRow struct{}

func (settingsRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*string), *dest[2].(*string), *dest[3].(*string) = "off", "off", "off", ""
	*dest[4].(*int) = 1
	return nil
}

func (d unsafeDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "current_setting('fsync')") {
		return settingsRow{}
	}
	return d.DB.QueryRow(ctx, sql, args...)
}

// /readyz reports the durability settings; fsync=off makes it not ready
// unless the database is declared a throwaway.
func TestReadyzDurability(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	r := h.do(http.MethodGet, "/readyz", "", "")
	var hl sidecar.Health
	if err := json.Unmarshal(r.body, &hl); err != nil || r.status != http.StatusOK || hl.Settings == nil || hl.Settings.Fsync != "on" || hl.Settings.SynchronousCommit == "" {
		t.Fatalf("readyz: HTTP %d %s", r.status, r.body)
	}
	for _, allow := range []bool{false, true} {
		u := newHarness(t, &harnessOpts{side: func(c *sidecar.Config) { c.DB = unsafeDB{c.DB}; c.AllowUnsafeDatabase = allow }})
		r := u.do(http.MethodGet, "/readyz", "", "")
		var hl sidecar.Health
		if err := json.Unmarshal(r.body, &hl); err != nil {
			t.Fatal(err)
		}
		want, status := http.StatusServiceUnavailable, "unavailable"
		if allow {
			want, status = http.StatusOK, "ok"
		}
		if r.status != want || hl.Status != status || len(hl.Warnings) != 4 || !strings.Contains(hl.Warnings[0], "fsync=off") ||
			!strings.Contains(strings.Join(hl.Warnings, "\n"), "asynchronous") {
			t.Fatalf("allow %v: HTTP %d %s", allow, r.status, r.body)
		}
	}
}

// /metrics names tenants: behind a token when one is set.
func TestMetricsToken(t *testing.T) {
	t.Parallel()
	h := newHarness(t, &harnessOpts{side: func(c *sidecar.Config) { c.MetricsToken = "metrics-secret" }})
	if r := h.do(http.MethodGet, "/metrics", "", ""); r.status != http.StatusUnauthorized || strings.Contains(string(r.body), "retrysafe_") {
		t.Fatalf("no token: HTTP %d", r.status)
	}
	if r := h.do(http.MethodGet, "/metrics", tokenA, ""); r.status != http.StatusUnauthorized {
		t.Fatalf("an API token: HTTP %d", r.status)
	}
	if r := h.do(http.MethodGet, "/metrics", "metrics-secret", ""); r.status != http.StatusOK || !strings.Contains(string(r.body), "go_goroutines") {
		t.Fatalf("the metrics token: HTTP %d", r.status)
	}
	off := newHarness(t, &harnessOpts{side: func(c *sidecar.Config) { c.NoMetrics = true }})
	if r := off.do(http.MethodGet, "/metrics", "", ""); r.status != http.StatusNotFound {
		t.Fatalf("NoMetrics: HTTP %d", r.status)
	}
}
