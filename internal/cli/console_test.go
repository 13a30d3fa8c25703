package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/console"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// Settling from the console and with `retrysafe resolve` leaves the same
// rows: two actions in review settled as completed with one reference,
// one through each; two settled as failed with one reason, one through
// each. Only the time of the decision differs.
func TestConsoleSettleSameRowsAsResolve(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 1)
	// A 500 to every charge and no lookup by key while the executor tries:
	// nobody can tell, so each action ends in review.
	f.psp.SetFault(func(toolstest.Request) toolstest.Fault { return toolstest.FailBefore })
	f.psp.LookupDown.Store(true)
	keys := map[string]string{}
	for _, ref := range []string{"inv-console-ok", "inv-cli-ok", "inv-console-no", "inv-cli-no"} {
		o := f.charge("tenant-a", ref)
		if o.Status != executor.StatusReview {
			t.Fatalf("%s: %+v", ref, o)
		}
		keys[ref] = o.Key
	}

	// The console as serve mounts it, the operator named as the command's
	// --by defaults to ($USER).
	pix, err := tools.NewPixCharge(tools.HTTPConfig{BaseURL: f.psp.URL, Token: f.psp.Token})
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := tools.NewRegistry(pix)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := mountConsole(http.NotFoundHandler(), &consoleFlags{enabled: true, ttl: time.Hour}, &database{Pool: f.pool, Schema: f.schema}, reg, quiet)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	code, token, errb := f.run("operator", "add", "--name", "op-tester", "--tenants", "tenant-a")
	if code != 0 {
		t.Fatalf("operator add: %d %s", code, errb)
	}
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	post := func(path string, form url.Values) *http.Response {
		t.Helper()
		res, err := c.PostForm(srv.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	if res := post("/console/signin", url.Values{"token": {strings.TrimSpace(token)}}); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in: %d", res.StatusCode)
	}
	res, err := c.Get(srv.URL + "/console/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the queue page (%d)", res.StatusCode)
	}
	csrf := string(m[1])
	settle := func(ref, status, reference, reason string) {
		t.Helper()
		res := post("/console/settle", url.Values{"csrf": {csrf}, "tenant": {"tenant-a"}, "key": {keys[ref]},
			"status": {status}, "reference": {reference}, "reason": {reason}, "confirm": {"yes"}})
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("console settle %s: %d", ref, res.StatusCode)
		}
	}
	resolve := func(ref string, args ...string) {
		t.Helper()
		code, out, errb := f.run(append([]string{"resolve", "--tenant", "tenant-a", "--key", keys[ref]}, args...)...)
		if code != 0 {
			t.Fatalf("resolve %s: %d %s %s", ref, code, out, errb)
		}
	}
	settle("inv-console-ok", "completed", "ch_000777", "charge found in the PSP dashboard")
	resolve("inv-cli-ok", "--status", "completed", "--response", `{"id":"ch_000777"}`, "--reason", "charge found in the PSP dashboard")
	settle("inv-console-no", "failed", "", "the PSP has no charge under the key")
	resolve("inv-cli-no", "--status", "failed", "--reason", "the PSP has no charge under the key")

	// Everything of the row but its identity and the decision's time.
	row := func(ref string) string {
		t.Helper()
		a, err := executor.Get(context.Background(), f.pool, "tenant-a", keys[ref])
		if err != nil {
			t.Fatal(err)
		}
		// The failure without the resolution's time, which is checked
		// against finished_at instead.
		failure, resolvedAtFinish := "", false
		if a.Failure != nil {
			c := *a.Failure
			if c.Resolution != nil {
				r := *c.Resolution
				resolvedAtFinish = a.FinishedAt != nil && r.At.Equal(*a.FinishedAt)
				r.At = time.Time{}
				c.Resolution = &r
			}
			b, err := json.Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			failure = string(b)
		}
		return fmt.Sprintf("%s | %d | %s | %s | %s | %v | %v | %v | %v", a.Status, a.Attempt, a.Response, failure, a.LeaseOwner,
			a.LeaseUntil, a.FinishedAt != nil, a.FinishedAt != nil && a.FinishedAt.Equal(a.UpdatedAt), resolvedAtFinish)
	}
	for _, pair := range [][2]string{{"inv-console-ok", "inv-cli-ok"}, {"inv-console-no", "inv-cli-no"}} {
		a, b := row(pair[0]), row(pair[1])
		if a != b {
			t.Errorf("console and resolve rows differ:\nconsole: %s\nresolve: %s", a, b)
		}
		t.Logf("%s", a)
	}
	if got := row("inv-console-ok"); !strings.Contains(got, `completed | 1 | {"id": "ch_000777"}`) || !strings.Contains(got, `"by":"op-tester"`) {
		t.Errorf("completed row: %s", got)
	}
	// Callers get the settled outcome from either.
	for _, ref := range []string{"inv-console-ok", "inv-cli-ok"} {
		if o := f.charge("tenant-a", ref); o.Status != executor.StatusCompleted || !o.Replayed || !strings.Contains(string(o.Response), "ch_000777") {
			t.Errorf("%s after settling: %+v", ref, o)
		}
	}
	// The console also keeps its own record; resolve has none to keep.
	if n, err := console.CountAudit(context.Background(), f.pool, "settle", "op-tester"); err != nil || n != 2 {
		t.Fatalf("%d console settle records (%v), want 2", n, err)
	}
}

func TestOperatorCommand(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	code, out, errb := f.run("operator", "add", "--name", "maria.silva", "--tenants", "acme, beta,acme")
	token := strings.TrimSpace(out)
	if code != 0 || !strings.HasPrefix(token, console.TokenPrefix) || len(token) < 40 {
		t.Fatalf("add: %d %q %s", code, out, errb)
	}
	if code, _, errb := f.run("operator", "add", "--name", "maria.silva", "--tenants", "acme"); code != 1 || !strings.Contains(errb, "already exists") {
		t.Fatalf("second add: %d %s", code, errb)
	}
	code, out, _ = f.run("operator", "list")
	if code != 0 || !strings.Contains(out, "maria.silva") || !strings.Contains(out, "acme,beta") || strings.Contains(out, token) {
		t.Fatalf("list: %d %s", code, out)
	}
	if o, err := console.OperatorOfToken(context.Background(), f.pool, token); err != nil || o.Name != "maria.silva" {
		t.Fatalf("the stored hash is not the token's: %+v %v", o, err)
	}
	code, out, _ = f.run("operator", "add", "--name", "maria.silva", "--tenants", "acme", "--rotate")
	if rotated := strings.TrimSpace(out); code != 0 || rotated == token || !strings.HasPrefix(rotated, console.TokenPrefix) {
		t.Fatalf("rotate: %d %q", code, out)
	}
	if code, out, _ := f.run("operator", "disable", "--name", "maria.silva"); code != 0 || !strings.Contains(out, "disabled") {
		t.Fatalf("disable: %d %s", code, out)
	}
	if code, _, errb := f.run("operator", "disable", "--name", "nobody"); code != 1 || !strings.Contains(errb, "no operator") {
		t.Fatalf("disable nobody: %d %s", code, errb)
	}
	for _, args := range [][]string{
		{"operator", "add", "--tenants", "acme"},
		{"operator", "add", "--name", "x"},
		{"operator", "add", "--name", "bad name", "--tenants", "acme"},
		{"operator", "add", "--name", "x", "--tenants", " , "},
		{"operator"},
		{"operator", "bogus"},
	} {
		if code, _, errb := f.run(args...); code != 2 || errb == "" {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errb)
		}
	}
	if code, out, _ := f.run("operator", "add", "--help"); code != 0 || !strings.Contains(out, "--tenants") {
		t.Errorf("add --help: %d %s", code, out)
	}
}

func TestMountConsoleFlags(t *testing.T) {
	t.Parallel()
	f := newOpsFixture(t, 5)
	reg, _ := tools.NewRegistry()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	d := &database{Pool: f.pool, Schema: f.schema}
	dir := t.TempDir()
	write := func(name, body string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		flags consoleFlags
		want  string
	}{
		{consoleFlags{enabled: true, ttl: time.Hour, requestLog: "not a url"}, "--console-request-log"},
		{consoleFlags{enabled: true, ttl: time.Hour, requestLog: "ftp://x/y"}, "--console-request-log"},
		{consoleFlags{enabled: true, ttl: time.Second}, "SessionTTL"},
		{consoleFlags{enabled: true, ttl: time.Hour, prices: dir + "/missing.json"}, "--console-prices"},
		{consoleFlags{enabled: true, ttl: time.Hour, prices: write("bad.json", `{"m":`)}, "--console-prices"},
		{consoleFlags{enabled: true, ttl: time.Hour, prices: write("neg.json", `{"m":{"input_per_1k":"-1","output_per_1k":"0"}}`)}, "negative"},
	} {
		if _, err := mountConsole(http.NotFoundHandler(), &c.flags, d, reg, quiet); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %s", c.flags, err, c.want)
		}
	}
	ok := consoleFlags{enabled: true, ttl: time.Hour, currency: "USD", requestLog: "http://127.0.0.1:1/_sandbox/requests",
		prices: write("ok.json", `{"gpt-4o-mini":{"input_per_1k":"0.00015","output_per_1k":"0.0006"}}`)}
	if _, err := mountConsole(http.NotFoundHandler(), &ok, d, reg, quiet); err != nil {
		t.Fatal(err)
	}
	api := http.NotFoundHandler()
	if h, err := mountConsole(api, &consoleFlags{}, d, reg, quiet); err != nil || h == nil {
		t.Fatalf("--console=false: %v", err)
	}
}
