package cli

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/webhook"
)

// purgeVars is all purge reads of the environment: a database and a schema.
// No HMAC key or tool settings: purging calls no provider.
func purgeVars(t *testing.T, schema string) map[string]string {
	return map[string]string{"DATABASE_URL": pgtest.URL(t), "RETRYSAFE_SCHEMA": schema}
}

func runPurgeCmd(ctx context.Context, vars map[string]string, args ...string) (code int, stdout, stderr string) {
	e, out, errb := testEnv(strings.NewReader(""), vars)
	code = Run(ctx, e, append([]string{"purge"}, args...))
	return code, out.String(), errb.String()
}

// seedAction inserts an intent and its action directly, aged: the action
// was created (and, when settled, finished) age ago.
func seedAction(t *testing.T, pool *pgxpool.Pool, tenant, ref, status string, age time.Duration) {
	t.Helper()
	if err := executortest.SeedAged(context.Background(), pool, executortest.Aged{Tenant: tenant, Ref: ref, Action: "pix.charge",
		Key: "k-" + ref, Status: status, Age: age}); err != nil {
		t.Fatal(err)
	}
}

// refs lists the intent_refs left in the ledger's table ("actions" or
// "intents") of the tests' tenants, sorted.
func refs(t *testing.T, pool *pgxpool.Pool, table string) string {
	t.Helper()
	ctx := context.Background()
	var out []string
	switch table {
	case "actions":
		as, err := executortest.Actions(ctx, pool, executortest.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range as {
			out = append(out, a.Ref)
		}
	case "intents":
		for _, tenant := range []string{"tenant-a", "tenant-b"} {
			is, err := executortest.Intents(ctx, pool, tenant, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range is {
				out = append(out, in.Ref)
			}
		}
	default:
		t.Fatalf("refs of %s", table)
	}
	slices.Sort(out)
	return strings.Join(out, ",")
}

var purgeLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ purge: actions (\d+), intents (\d+) \(\d+ batch(es)?\), webhook log (\d+), webhook effects (\d+), [0-9.]+(ms|s|µs)\n$`)

// purge deletes settled actions past the retention and their intents, and
// nothing else: not a recent settled action, not a started one, not one in
// review, not their intents.
func TestPurgeActions(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	const day = 24 * time.Hour
	// Three real charges through the executor, then aged past the retention.
	var oldKeys []string
	for _, ref := range []string{"inv-old-1", "inv-old-2", "inv-old-3"} {
		o := f.charge("tenant-a", ref)
		if o.Status != executor.StatusCompleted {
			t.Fatalf("%s: %+v", ref, o)
		}
		oldKeys = append(oldKeys, o.Key)
	}
	if err := executortest.Backdate(context.Background(), f.pool, 8*day); err != nil {
		t.Fatal(err)
	}
	if o := f.charge("tenant-a", "inv-recent"); o.Status != executor.StatusCompleted {
		t.Fatalf("%+v", o)
	}
	seedAction(t, f.pool, "tenant-b", "old-failed", "failed", 9*day)
	seedAction(t, f.pool, "tenant-b", "recent-failed", "failed", time.Hour)
	seedAction(t, f.pool, "tenant-b", "two-days", "completed", 2*day)
	seedAction(t, f.pool, "tenant-b", "old-started", "started", 9*day)
	seedAction(t, f.pool, "tenant-b", "old-review", "review", 9*day)

	vars := purgeVars(t, f.schema)
	code, out, errb := runPurgeCmd(context.Background(), vars, "--log-level", "warn")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	m := purgeLine.FindStringSubmatch(out)
	if m == nil || m[1] != "4" || m[2] != "4" || m[4] != "0" || m[5] != "0" {
		t.Fatalf("purge printed %q, want actions 4, intents 4, webhook 0 and 0", out)
	}
	const kept = "inv-recent,old-review,old-started,recent-failed,two-days"
	if got := refs(t, f.pool, "actions"); got != kept {
		t.Errorf("actions left: %s, want %s", got, kept)
	}
	if got := refs(t, f.pool, "intents"); got != kept {
		t.Errorf("intents left: %s, want %s", got, kept)
	}
	// Gone from the operator's view too.
	if code, _, errb := f.run("inspect", "--tenant", "tenant-a", "--key", oldKeys[0]); code != 1 || !strings.Contains(errb, "no such intent") {
		t.Errorf("inspect purged key: exit %d %s", code, errb)
	}

	// A second pass finds nothing.
	if code, out, _ = runPurgeCmd(context.Background(), vars); code != 0 || !strings.Contains(out, "purge: actions 0, intents 0") {
		t.Fatalf("second pass: exit %d %q", code, out)
	}
	// A shorter (still legal) retention reaches the two-day-old action;
	// started and review rows stay whatever their age.
	if code, out, _ = runPurgeCmd(context.Background(), vars, "--retention", "24h", "--batch", "1"); code != 0 || !strings.Contains(out, "purge: actions 1, intents 1") {
		t.Fatalf("--retention 24h: exit %d %q", code, out)
	}
	const keptShort = "inv-recent,old-review,old-started,recent-failed"
	if got := refs(t, f.pool, "actions"); got != keptShort {
		t.Errorf("after --retention 24h, actions left: %s, want %s", got, keptShort)
	}
	if got := refs(t, f.pool, "intents"); got != keptShort {
		t.Errorf("after --retention 24h, intents left: %s, want %s", got, keptShort)
	}
}

// Bad settings are refused before anything is deleted: exit 2 and a message.
func TestPurgeRefusesBadFlags(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t, nil)
	seedAction(t, pool, "tenant-a", "old", "completed", 30*24*time.Hour)
	vars := purgeVars(t, schema)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--retention", "1h"}, "shorter than the minimum 24h"},
		{[]string{"--retention", "0"}, "shorter than the minimum 24h"},
		{[]string{"--retention", "-168h"}, "shorter than the minimum"},
		{[]string{"--webhook-log-retention", "-1h"}, "--webhook-log-retention must be positive"},
		{[]string{"--webhook-effect-retention", "0s"}, "--webhook-effect-retention must be positive"},
		{[]string{"--batch", "0"}, "--batch must be at least 1"},
		{[]string{"--batch", "-5"}, "--batch must be at least 1"},
		{[]string{"--pause", "-1s"}, "--pause must not be negative"},
		{[]string{"--loop", "--every", "0s"}, "--every must be positive"},
		{[]string{"--every", "5m"}, "--every goes with --loop"},
		{[]string{"now"}, "unexpected argument"},
		{[]string{"--retention", "a week"}, "invalid value"},
	} {
		code, out, errb := runPurgeCmd(context.Background(), vars, tc.args...)
		if code != 2 || !strings.Contains(errb, tc.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errb, tc.want)
		}
	}
	if got := refs(t, pool, "actions"); got != "old" {
		t.Fatalf("actions left after refused runs: %q", got)
	}
	if got := refs(t, pool, "intents"); got != "old" {
		t.Fatalf("intents left after refused runs: %q", got)
	}

	// No database configured: a clear error (a missing setting: exit 2),
	// not a throwaway cluster.
	code, _, errb := runPurgeCmd(context.Background(), map[string]string{"RETRYSAFE_SCHEMA": schema})
	if code != ExitUsage || !strings.Contains(errb, "purge needs a database: set DATABASE_URL or --database-url") {
		t.Fatalf("no database: exit %d %q", code, errb)
	}
}

func TestPurgeHelp(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"purge", "--help"}, {"help", "purge"}} {
		e, out, errb := testEnv(strings.NewReader(""), nil)
		if code := Run(context.Background(), e, args); code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errb)
		}
		for _, want := range []string{"Usage: retrysafe purge", "at least 24h", "--retention", "--webhook-effect-retention",
			"started actions", "actions in review", "redelivery horizon", "no longer deduplicates", "--loop", "--every"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: help lacks %q:\n%s", args, want, out)
			}
		}
	}
	e, out, _ := testEnv(strings.NewReader(""), nil)
	Run(context.Background(), e, []string{"help"})
	if !strings.Contains(out.String(), "purge ") {
		t.Errorf("command list lacks purge:\n%s", out)
	}
}

// seedEffect inserts a webhook effect decided age ago, with a notification
// in notify ("" for none owed).
func seedEffect(t *testing.T, pool *pgxpool.Pool, n int, notify string, age time.Duration) string {
	t.Helper()
	key := fmt.Sprintf("%064x", n)
	ctx := context.Background()
	at := time.Now().Add(-age)
	if err := webhook.RecordEffect(ctx, pool, webhook.PlantedEffect{Tenant: "tenant-a", EffectKey: key, Provider: "sandbox", Transition: "paid",
		OrderRef: fmt.Sprintf("order-%d", n), PaymentRef: fmt.Sprintf("pay-%d", n), EventID: fmt.Sprintf("evt-%d", n),
		EventType: "charge.paid", EventAt: at, Outcome: "applied", CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if notify == "" {
		return key
	}
	var code string
	if notify == "failed" || notify == "review" {
		code = "provider_rejected"
	}
	if err := webhook.RecordNotification(ctx, pool, webhook.PlantedNotification{Tenant: "tenant-a", EffectKey: key,
		OrderRef: fmt.Sprintf("order-%d", n), Action: "whatsapp.send_template", IntentRef: key + ":notify", IdemKey: "nk-" + key,
		Status: notify, ErrorCode: code, At: at}); err != nil {
		t.Fatal(err)
	}
	return key
}

func seedLog(t *testing.T, pool *pgxpool.Pool, eventID string, age time.Duration) {
	t.Helper()
	if err := webhook.RecordDelivery(context.Background(), pool, webhook.Delivery{Tenant: "tenant-a", Provider: "sandbox", EventID: eventID,
		EventType: "charge.paid", Verdict: webhook.VerdictProcessed, HTTPStatus: 200, ReceivedAt: time.Now().Add(-age)}); err != nil {
		t.Fatal(err)
	}
}

func effectsLeft(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	es, err := webhook.ListEffectNotifications(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	parts := make([]string, len(es))
	for i, e := range es {
		status := e.Status
		if status == "" {
			status = "none"
		}
		parts[i] = e.OrderRef + ":" + status
	}
	return strings.Join(parts, ",")
}

func logLeft(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	ds, err := webhook.ListDeliveries(context.Background(), pool, webhook.ListParams{Tenant: "tenant-a"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range ds {
		ids = append(ids, d.EventID)
	}
	slices.Sort(ids)
	return strings.Join(ids, ",")
}

// Old delivery-log rows go; old effects go when their notification was sent
// (or none was owed); effects whose notification failed, waits in review or
// is pending stay, and so does everything recent.
func TestPurgeWebhooks(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t, nil)
	const day = 24 * time.Hour
	seedEffect(t, pool, 1, "sent", 31*day)
	seedEffect(t, pool, 2, "", 31*day)
	seedEffect(t, pool, 3, "failed", 31*day)
	seedEffect(t, pool, 4, "review", 31*day)
	seedEffect(t, pool, 5, "pending", 31*day)
	seedEffect(t, pool, 6, "sent", time.Hour)
	seedLog(t, pool, "evt-old", 31*day)
	seedLog(t, pool, "evt-3days", 3*day)
	seedLog(t, pool, "evt-recent", time.Hour)
	vars := purgeVars(t, schema)

	code, out, errb := runPurgeCmd(context.Background(), vars)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	m := purgeLine.FindStringSubmatch(out)
	if m == nil || m[1] != "0" || m[4] != "1" || m[5] != "2" {
		t.Fatalf("purge printed %q, want webhook log 1, webhook effects 2", out)
	}
	if got, want := effectsLeft(t, pool), "order-3:failed,order-4:review,order-5:pending,order-6:sent"; got != want {
		t.Errorf("effects left: %s, want %s", got, want)
	}
	if got, want := logLeft(t, pool), "evt-3days,evt-recent"; got != want {
		t.Errorf("log left: %s, want %s", got, want)
	}

	// The log retention is its own setting.
	code, out, _ = runPurgeCmd(context.Background(), vars, "--webhook-log-retention", "48h")
	if code != 0 || !strings.Contains(out, "webhook log 1, webhook effects 0") {
		t.Fatalf("--webhook-log-retention 48h: exit %d %q", code, out)
	}
	if got := logLeft(t, pool); got != "evt-recent" {
		t.Errorf("log left: %s", got)
	}
}

// --loop runs a pass every --every until its context ends (SIGTERM in
// main), printing each pass, then exits 0.
func TestPurgeLoop(t *testing.T) {
	t.Parallel()
	pool, schema := pgtest.Schema(t, nil)
	seedAction(t, pool, "tenant-a", "old", "completed", 10*24*time.Hour)
	// Stopped (as by SIGTERM) once three passes have printed, however
	// slow the machine; the minute is only a bound on a hang.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w := &passWriter{after: 3, stop: cancel}
	vars := purgeVars(t, schema)
	var errw lockedBuffer
	e := &Env{Stdin: strings.NewReader(""), Stdout: w, Stderr: &errw, Getenv: func(k string) string { return vars[k] }}
	code := Run(ctx, e, []string{"purge", "--loop", "--every", "100ms", "--log-level", "warn"})
	if ctx.Err() == context.DeadlineExceeded {
		t.Fatal("the loop did not print three passes within a minute")
	}
	out, errb := w.out.String(), errw.String()
	lines := strings.SplitAfter(out, "\n")
	if code != 0 || len(lines) < 3 || errb != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errb)
	}
	if !strings.Contains(lines[0], "purge: actions 1, intents 1") {
		t.Errorf("first pass: %q", lines[0])
	}
	for _, l := range lines[1 : len(lines)-1] {
		if !strings.Contains(l, "purge: actions 0, intents 0") {
			t.Errorf("later pass: %q", l)
		}
	}
	if got := refs(t, pool, "actions"); got != "" {
		t.Errorf("actions left: %q", got)
	}
}

// passWriter collects stdout and calls stop once after lines have been
// written.
type passWriter struct {
	mu    sync.Mutex
	out   bytes.Buffer
	after int
	stop  func()
}

func (w *passWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.out.Write(p)
	if w.stop != nil && bytes.Count(w.out.Bytes(), []byte("\n")) >= w.after {
		w.stop()
		w.stop = nil
	}
	return n, err
}
