package console_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// TestBrowser drives the console in headless Chromium under playwright-core
// (testdata/browser/console.mjs), against an action the sandbox PSP's fault
// injector put in review (every charge answered 500 without acting). It fails, never skips, when node, chromium or
// playwright-core is missing: ./scripts/console-browser.sh installs them
// (./scripts/test runs it).
//
// CONSOLE_SCREENSHOT=path keeps the screenshot of the review queue (the
// README's is docs/console-review-queue.png, taken so).
func TestBrowser(t *testing.T) {
	t.Parallel()
	const install = "run ./scripts/console-browser.sh (./scripts/test does)"
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed: %s", install)
	}
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("chromium is not installed at %s: %s", chromium, install)
	}
	dir, _ := filepath.Abs(filepath.Join("testdata", "browser"))
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		t.Fatalf("playwright-core is not installed in %s: %s", dir, install)
	}

	e := newEnvWith(t, true)
	cpf := testutil.CPF(11)
	key := e.inReview("tenant-a", "NF-2026-000123", cpf)
	// Two more, so that the queue reads as a queue.
	e.inReview("tenant-a", "NF-2026-000124", testutil.CPF(12))
	e.inReview("tenant-a", "NF-2026-000125", testutil.CPF(13))

	shot := os.Getenv("CONSOLE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "review-queue.png")
	} else if shot, err = filepath.Abs(shot); err != nil {
		t.Fatal(err)
	}
	phone := filepath.Join(t.TempDir(), "review-queue-phone.png")
	if p := os.Getenv("CONSOLE_PHONE_SCREENSHOT"); p != "" {
		phone, _ = filepath.Abs(p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "console.mjs")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"CONSOLE_URL="+e.srv.URL, "CONSOLE_TOKEN="+e.tokenA, "CONSOLE_CPF="+cpf, "CONSOLE_KEY="+key, "CONSOLE_REF=NF-2026-000123",
		"CONSOLE_SCREENSHOT="+shot, "CONSOLE_PHONE_SCREENSHOT="+phone,
		"CONSOLE_PROFILE="+t.TempDir(), "CHROMIUM="+chromium)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("console.mjs:\n%s", out.String())
	if err != nil {
		t.Fatalf("the browser test failed: %v", err)
	}

	// What the browser did is in the database.
	a := actionRow(t, e.pool, "tenant-a", key)
	if a.Status != executor.RowFailed || a.Failure == nil || a.Failure.Resolution == nil {
		t.Fatalf("after the browser settled it: %+v", a)
	}
	if r := a.Failure.Resolution; r.By != "alice" || r.Reason != "PSP dashboard: no charge under this key" || r.Status != executor.RowFailed {
		t.Fatalf("resolution %+v", r)
	}
	var kinds string
	if err := e.pool.QueryRow(context.Background(),
		`SELECT string_agg(kind || ':' || operator || ':' || coalesce(detail->>'outcome', detail->>'status', ''), ',' ORDER BY id) FROM console_audit WHERE tenant_id = 'tenant-a' AND idem_key = $1`,
		key).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if kinds != "lookup:alice:not_found,lookup:alice:not_found,settle:alice:failed,reveal:alice:" {
		t.Fatalf("audit %q", kinds)
	}
	// And in the intent's history, as the next operator reads it.
	b := e.browser()
	b.signIn(e.tokenA)
	_, story := b.get("/console/intent?tenant=tenant-a&key=" + key)
	if !strings.Contains(story, "settled by an operator as failed: PSP dashboard: no charge under this key") || strings.Contains(story, cpf) {
		t.Fatal("the intent's history lacks the settlement, or shows the CPF unmasked")
	}
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, %v", shot, len(png), err)
	}
	t.Logf("screenshot of the review queue: %s (%d bytes)", shot, len(png))
}
