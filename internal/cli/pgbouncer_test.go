package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// `retrysafe serve --migrate` with DATABASE_URL pointing at PgBouncer (the
// Debian package, pool_mode=session, every other setting its default), as
// many deployments put it in front of PostgreSQL: it migrates, serves,
// charges once and replays, and the rows land in its own schema. Before,
// it could not connect at all: search_path went as a startup parameter,
// which PgBouncer refuses unless configured to track it.
func TestServeThroughPgBouncer(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	dbURL := pgtest.URL(t)
	bouncer := testutil.StartPgBouncer(t, dbURL, "session")
	const pspToken = "merchant-token-pgb"
	psp, side, sideSchema := startSidecar(t, bin, dbURL, bouncer, "pgb", "tenant-a=pgb-token-a", pspToken)

	client := &http.Client{}
	post := func(ref string) answer {
		return callHTTP(t, client, http.MethodPost, side.URL+"/v1/tools/pix.charge/execute", "pgb-token-a",
			`{"intent_ref":"`+ref+`","fields":`+bbFields(`"180,00"`, "529.982.247-25")+`}`)
	}
	first := post("inv-pgb-1")
	if first.status != http.StatusOK || first.out.Status != "completed" || first.out.Replayed {
		t.Fatalf("the first execution through PgBouncer: HTTP %d %s\n%s", first.status, first.body, side.Stderr.String())
	}
	// Callers at once: more sessions than one, each set up by its first
	// statement.
	replies := fanOut(40, func(int) answer { return post("inv-pgb-1") })
	for i, r := range replies {
		if r.status != http.StatusOK || r.out.Status != "completed" || !r.out.Replayed || r.out.IdempotencyKey != first.out.IdempotencyKey {
			t.Fatalf("redelivery %d through PgBouncer: HTTP %d %s", i, r.status, r.body)
		}
	}

	// Straight to PostgreSQL: the rows are in serve's schema, and the PSP
	// charged once.
	pool, err := dbpool.Open(context.Background(), dbURL, sideSchema, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	a, err := executor.Get(context.Background(), pool, "tenant-a", first.out.IdempotencyKey)
	if err != nil || a.Status != executor.RowCompleted || a.Attempt != 1 {
		t.Fatalf("the action in %s: %+v, %v; want completed at the first attempt", sideSchema, a, err)
	}
	if r := callHTTP(t, client, http.MethodGet, psp.URL+"/v1/pix/charges", pspToken, ""); r.status != http.StatusOK || strings.Count(string(r.body), first.out.IdempotencyKey) != 1 {
		t.Fatalf("PSP charges: HTTP %d %s; want one under %s", r.status, r.body, first.out.IdempotencyKey)
	}
	if code := side.Stop(t); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, tail(side.Stderr.String()))
	}
}
