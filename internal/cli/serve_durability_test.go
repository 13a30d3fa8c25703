package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/internal/freeport"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

// fsyncOffDB answers the settings query as a server with fsync off.
type fsyncOffDB struct{ sidecar.DB }

type fsyncOffRow struct{}

func (fsyncOffRow) Scan(dest ...any) error {
	*dest[0].(*string), *dest[1].(*string), *dest[2].(*string), *dest[3].(*string) = "off", "on", "on", ""
	*dest[4].(*int) = 0
	return nil
}

func (d fsyncOffDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if strings.Contains(sql, "current_setting('fsync')") {
		return fsyncOffRow{}
	}
	return d.DB.QueryRow(ctx, sql, args...)
}

// serve refuses a database with fsync off unless told it is a throwaway.
func TestCheckDurability(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t, nil)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	if err := checkDurability(ctx, pool, false, quiet); err != nil {
		t.Fatalf("the test server (fsync on): %v", err)
	}
	err := checkDurability(ctx, fsyncOffDB{pool}, false, quiet)
	if !errors.Is(err, sidecar.ErrUnsafeDatabase) || !strings.Contains(err.Error(), "--allow-unsafe-database") {
		t.Fatalf("fsync off: %v", err)
	}
	if err := checkDurability(ctx, fsyncOffDB{pool}, true, quiet); err != nil {
		t.Fatalf("fsync off, allowed: %v", err)
	}
}

// serve logs the durability settings at start-up, and --metrics-addr with
// --metrics-token moves /metrics to a listener of its own, behind the
// token.
func TestServeMetricsAddr(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.URL(t)
	suffix := randSuffix()
	// The metrics port is named before the server starts: drawn below the
	// ephemeral range, where no other test's connection takes it first.
	mport, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	maddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(mport))
	side := testutil.StartProc(t, bin, []string{
		"DATABASE_URL=" + dbURL,
		"RETRYSAFE_API_TOKENS=tenant-a=ma-token-a",
		"RETRYSAFE_PSP_URL=http://127.0.0.1:1",
		"RETRYSAFE_PSP_TOKEN=x",
		"RETRYSAFE_HMAC_KEY=" + testSecret,
		"RETRYSAFE_METRICS_TOKEN=scrape-secret",
	}, "serve", "--addr", "127.0.0.1:0", "--schema", "ma_side_"+suffix, "--migrate", "--max-conns", "2", "--metrics-addr", maddr)
	get := func(url, token string) int {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if c := get(side.URL+"/metrics", "scrape-secret"); c != http.StatusNotFound {
		t.Errorf("/metrics on the API address: HTTP %d", c)
	}
	if c := get("http://"+maddr+"/metrics", ""); c != http.StatusUnauthorized {
		t.Errorf("/metrics without the token: HTTP %d", c)
	}
	if c := get("http://"+maddr+"/metrics", "scrape-secret"); c != http.StatusOK {
		t.Errorf("/metrics with the token: HTTP %d", c)
	}
	if c := get(side.URL+"/readyz", ""); c != http.StatusOK {
		t.Errorf("/readyz: HTTP %d", c)
	}
	logs := side.Stderr.String()
	if !strings.Contains(logs, "serve: database durability") || !strings.Contains(logs, "fsync=on") {
		t.Errorf("start-up log lacks the durability settings:\n%s", logs)
	}
	if strings.Contains(logs, "scrape-secret") {
		t.Error("the metrics token was logged")
	}
}
