package restarttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/webhook"
)

// RefundPoints are the crash points a refund meets. A refund is asked for
// through serve's sidecar, not in a conversation, so the turn's points
// (model answer, frozen intent, turn, inbox and reply jobs) do not exist
// for it; the executor's do, in whichever worker's reconciler takes the
// refund over: the claim committed, inside the PSP call, the answer in
// hand, and a random moment.
var RefundPoints = []string{"action-claimed", "provider-call", "provider-answered", "random"}

// refundRef is the refund intent's intent_ref.
func refundRef(invoice string) string { return invoice + ":refund:1" }

// RefundCheck is the refund part of the verdict.
type RefundCheck struct {
	// Planned: runs drawn to refund (--refund-rate); Requested: those
	// whose charge was paid, so that the refund was asked for.
	Planned   int `json:"planned"`
	Requested int `json:"requested"`
	// SidecarFirst counts the sidecar's first answers by status (the
	// first PUT is failed on purpose: in_flight); SidecarReplay the
	// answers to the same call once settled (completed, replayed).
	SidecarFirst  map[string]int `json:"sidecar_first"`
	SidecarReplay map[string]int `json:"sidecar_replay"`
	// From the PSP: refund PUTs and refunds created (sandbox counters).
	PSPPuts    int `json:"refund_puts"`
	PSPCreated int `json:"refunds_created"`
	// Notices: partial-refund notices the customers got (template
	// reembolso_parcial).
	Notices int `json:"notices"`
	// Moved: refunds moved from a later point to one whose chunks all
	// ended without reaching it (serve's reconciler took them first).
	Moved   int            `json:"moved"`
	Rows    []Row          `json:"rows"`
	Total   Row            `json:"total"`
	Kills   []Kill         `json:"kills"`
	Results []RefundResult `json:"results"`
}

// RefundResult is what became of one run's refund.
type RefundResult struct {
	Index       int    `json:"index"`
	Scenario    string `json:"scenario"`
	IntentRef   string `json:"intent_ref"`
	E2EID       string `json:"e2eid"`
	AmountCents int64  `json:"amount_cents"`
	FrozenKey   string `json:"frozen_key"`
	// IDs: every devolução id seen for the refund: the frozen key's, and
	// each request the PSP got for the Pix.
	IDs          []string `json:"ids"`
	IDsEqual     bool     `json:"ids_equal"`
	PSPRequests  int      `json:"psp_requests"`
	Refunds      int      `json:"refunds"` // at the PSP, on the Pix
	ActionStatus string   `json:"action_status"`
	Hits         int      `json:"hits"`
	Lost         bool     `json:"lost"`
	LostWhy      string   `json:"lost_why,omitempty"`
}

// planRefunds draws which runs refund, how much and at which point, from
// a generator of its own (the rest of the plan does not move with the
// rate).
func (t *tester) planRefunds() {
	if !t.apipix() || t.cfg.RefundRate <= 0 {
		return
	}
	rng := rand.New(rand.NewPCG(uint64(t.cfg.Seed), 0x726566756e64))
	n := 0
	for _, r := range t.runs {
		if rng.Float64() >= t.cfg.RefundRate {
			continue
		}
		r.RefundScenario = RefundPoints[n%len(RefundPoints)]
		// A partial refund: 1 centavo up to half the charge.
		r.RefundCents = 1 + rng.Int64N(max(1, r.AmountCents/2))
		n++
	}
}

// refundCrashPoint is the crash point of name, with the failpoint of
// pix.refund.
func refundCrashPoint(name string) CrashPoint {
	for _, p := range CrashPoints {
		if p.Name == name {
			p.Failpoint = strings.Replace(p.Failpoint, "."+tools.PixChargeName, "."+apipix.RefundName, 1)
			return p
		}
	}
	return CrashPoint{Name: name}
}

// serveProxyURL is the stack's hook: serve reaches the PSP through a
// proxy that fails each refund's first PUT, so that every refund is
// settled by a worker's reconciler, where the test kills it.
func (t *tester) serveProxyURL(ready string) string {
	p, err := newPSPProxy(ready, uint64(t.cfg.Seed))
	if err != nil {
		t.problem("serve's PSP proxy: %v", err)
		return ready + "/api"
	}
	p.failFirstRefund, p.refundsSeen = true, map[string]bool{}
	t.serveProxy = p
	return p.URL() + "/api"
}

// refundPhase asks for the planned refunds once the charges are paid: a
// refund scenario's runs go, Config.Batch at a time, to a worker armed
// for it; the sidecar's first attempt fails before the PSP acts (serve's
// proxy), the action is left started, and the armed worker's reconciler
// takes it over and dies at the point. Then a plain worker settles what
// is left, the sidecar is asked again (the replay), and the PSP settles
// and notifies the refunds.
func (t *tester) refundPhase(ctx context.Context) error {
	if !t.apipix() || t.cfg.RefundRate <= 0 {
		return nil
	}
	t.setPhase("refunds", "")
	rc := &RefundCheck{SidecarFirst: map[string]int{}, SidecarReplay: map[string]int{}}
	t.refunds = rc
	byPoint, err := t.refundsByPoint(ctx, rc)
	if err != nil {
		return err
	}
	for i, name := range RefundPoints {
		t.setPhase("refunds", name)
		pending := byPoint[name]
		reached := false
		for len(pending) > 0 {
			n := min(t.cfg.Batch, len(pending))
			ok, err := t.refundBatch(ctx, refundCrashPoint(name), pending[:n])
			if err != nil {
				return err
			}
			reached = reached || ok
			pending = pending[n:]
		}
		// Serve's reconciler can take a whole chunk over before the armed
		// worker does (a pass of its own landing in the worker's 20 ms
		// between passes, about one chunk in fifty): when every chunk of
		// the point went so, one refund at a time moves here from a later
		// point that keeps at least one, so that the point is still met.
		// A CI run failed so twice ("refund at action-claimed not
		// covered"), each time on a point of a single chunk.
		for tries := 0; !reached && len(byPoint[name]) > 0 && tries < 3; tries++ {
			r := moveRefund(byPoint, name, RefundPoints[i+1:])
			if r == nil {
				break
			}
			rc.Moved++
			ok, err := t.refundBatch(ctx, refundCrashPoint(name), []*RunPlan{r})
			if err != nil {
				return err
			}
			reached = ok
		}
	}
	// What the kills left: a plain worker's reconciler takes it over once
	// the dead worker's lease runs out.
	t.setPhase("refunds", "settle")
	w, err := t.startWorker(ctx, "refunds", "", 0, nil)
	if err != nil {
		return err
	}
	defer w.proc.Stop(5 * time.Second)
	if err := harness.WaitFor(ctx, t.cfg.SettleTimeout, func() (bool, error) {
		started, err := executortest.Count(ctx, t.stack.Pool, executortest.Filter{Tenant: t.stack.Cfg.Tenant, Action: apipix.RefundName, Status: "started"})
		return started == 0, err
	}); err != nil {
		t.problem("refunds not settled within %s: %v", t.cfg.SettleTimeout, err)
	}
	// The caller's retry: the same call gets the settled outcome.
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, runs := range byPoint {
		for _, r := range runs {
			wg.Go(func() {
				st, err := t.requestRefund(ctx, r)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.problem("sidecar replay of %s: %v", refundRef(r.Invoice), err)
					st = "error"
				}
				rc.SidecarReplay[st]++
			})
		}
	}
	wg.Wait()
	if t.cfg.Naive {
		// The control's refunds carry ids of no intent: their callbacks
		// apply nothing, and there is no notice to wait for.
		return nil
	}
	// The PSP settles the refunds (DEVOLVIDO) and notifies them; each is
	// a partial refund whose notice a worker sends.
	return harness.WaitFor(ctx, 90*time.Second, func() (bool, error) {
		c, err := webhook.CountEffects(ctx, t.stack.Pool, t.stack.Cfg.Tenant, webhook.OrderPartiallyRefunded, webhook.OrderRefunded)
		return c.Effects >= rc.Requested && c.Pending == 0, err
	})
}

// refundsByPoint deals the paid runs planned to refund to their refund
// scenarios, each run given its paid Pix (the first paid cob's of its
// invoice).
func (t *tester) refundsByPoint(ctx context.Context, rc *RefundCheck) (map[string][]*RunPlan, error) {
	cobs, err := t.stack.Cobs(ctx)
	if err != nil {
		return nil, err
	}
	e2e, paid := map[string]string{}, map[string]int64{}
	for _, c := range cobs {
		if len(c.Pix) > 0 && e2e[c.SolicitacaoPagador] == "" {
			e2e[c.SolicitacaoPagador] = c.Pix[0].EndToEndID
			paid[c.SolicitacaoPagador] = pixCents(c.Pix[0].Valor)
		}
	}
	byPoint := map[string][]*RunPlan{}
	for _, r := range t.runs {
		if r.RefundScenario == "" {
			continue
		}
		rc.Planned++
		if r.E2EID = e2e[r.Invoice]; r.E2EID == "" {
			continue // never charged or never paid: counted as a failure of the charge
		}
		r.RefundCents = refundWithinPaid(r.RefundCents, paid[r.Invoice])
		rc.Requested++
		byPoint[r.RefundScenario] = append(byPoint[r.RefundScenario], r)
	}
	return byPoint, nil
}

// refundWithinPaid is a planned refund kept within half of what was paid
// (0: unknown, planned as is). A charge frozen at a misread amount
// (--wrong-amount-rate: a tenth of it, say) was paid less than the plan's,
// and a refund planned against the right amount could exceed it: the PSP
// rightly refuses that (refund_exceeds_paid, before any PUT), and the run
// read as a lost refund (seen once in 300 runs, seed 696896854).
func refundWithinPaid(planned, paid int64) int64 {
	if paid > 0 && planned > max(1, paid/2) {
		return max(1, paid/2)
	}
	return planned
}

// moveRefund moves one refund to the point to from the one of later that
// has the most left (the last of them on a tie), if that keeps at least
// one there; nil when none can spare one.
func moveRefund(byPoint map[string][]*RunPlan, to string, later []string) *RunPlan {
	from := ""
	for _, p := range later {
		if len(byPoint[p]) >= 2 && len(byPoint[p]) >= len(byPoint[from]) {
			from = p
		}
	}
	if from == "" {
		return nil
	}
	rs := byPoint[from]
	r := rs[len(rs)-1]
	byPoint[from] = rs[:len(rs)-1]
	r.RefundScenario = to
	byPoint[to] = append(byPoint[to], r)
	return r
}

// pixCents is an API Pix valor ("180.00": digits, a point, two digits)
// in centavos; 0 when it is not one.
func pixCents(v string) int64 {
	whole, frac, ok := strings.Cut(v, ".")
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if !ok || len(frac) != 2 || err != nil {
		return 0
	}
	return n
}

// refundBatch asks for chunk's refunds with a worker armed at p running,
// and kills it there; reached says whether it died at the point.
func (t *tester) refundBatch(ctx context.Context, p CrashPoint, chunk []*RunPlan) (reached bool, err error) {
	// The worker dies at its k-th hit, k at most half the chunk (rounded
	// up): serve's reconciler may still take over a refund before the
	// armed worker does (below), and the point goes uncovered only when it
	// took more than the chunk less k: now more than half of it, where
	// before (k up to three) two refunds of a chunk of four could do it.
	k := 1 + t.rng.IntN(min(3, (len(chunk)+1)/2))
	proxySeed := t.rng.Uint64()
	// The sidecar's attempt leaves the lease cut to a backoff of about a
	// second: a random moment in the 1.2 s after its answers spans the
	// takeover.
	randomKill := time.Duration(t.rng.IntN(1200)) * time.Millisecond
	proxy, err := newPSPProxy(t.stack.PSP.Ready, proxySeed)
	if err != nil {
		return false, err
	}
	defer proxy.Close()
	var hosted atomic.Pointer[worker]
	killAt := 0
	if p.Name == "provider-call" {
		killAt = k
	}
	proxy.configure("", 0, killAt, func() {
		if w := hosted.Load(); w != nil {
			t.killWorker(w, "proxy")
		}
	})
	// Its reconciler looks fifty times as often as serve's, so that it,
	// not serve, takes over the refunds once the sidecar's attempt failed:
	// each refund serve takes is one the armed worker cannot meet its
	// point with, and when serve took enough of a chunk that the worker
	// never reached its k-th hit, the point went uncovered (a CI run on
	// 2026-12-02 failed so, "refund at action-claimed not covered", at ten
	// times as often; serve's chance per refund is about the ratio of the
	// two intervals).
	w, err := t.startWorker(ctx, "refund-"+p.Name, p.Failpoint, k, proxy,
		"--reconcile-interval", min(20*time.Millisecond, t.cfg.Timings.ReconcileInterval/50).String())
	if err != nil {
		return false, err
	}
	hosted.Store(w)

	answered := t.askRefunds(ctx, chunk)
	refs := make([]string, len(chunk))
	for i, r := range chunk {
		refs[i] = refundRef(r.Invoice)
	}
	if err := t.watchRefundWorker(ctx, p, w, refs, answered, randomKill); err != nil {
		return false, err
	}
	<-answered
	return t.recordRefundKill(ctx, p, w, chunk, refs).atPoint(), nil
}

// askRefunds asks the sidecar for chunk's refunds at once; the channel is
// closed once every one is answered.
func (t *tester) askRefunds(ctx context.Context, chunk []*RunPlan) chan struct{} {
	answered := make(chan struct{})
	go func() {
		defer close(answered)
		var wg sync.WaitGroup
		for _, r := range chunk {
			wg.Go(func() {
				st, err := t.requestRefund(ctx, r)
				t.mu.Lock()
				defer t.mu.Unlock()
				if err != nil {
					t.problems = append(t.problems, fmt.Sprintf("sidecar refund %s: %v", refundRef(r.Invoice), err))
					st = "error"
				}
				t.refunds.SidecarFirst[st]++
			})
		}
		wg.Wait()
	}()
	return answered
}

// watchRefundWorker waits until w, armed at p, is dead, killing it when
// the point will not come or at random.
func (t *tester) watchRefundWorker(ctx context.Context, p CrashPoint, w *worker, refs []string, answered chan struct{}, randomKill time.Duration) error {
	var timer <-chan time.Time
	kw := newKillWatch()
	defer kw.stop()
	for !w.proc.Exited() {
		select {
		case <-ctx.Done():
			w.proc.Kill()
			return ctx.Err()
		case <-w.proc.Done():
		case <-timer:
			t.killWorker(w, "timer")
		case <-kw.timer.C:
			t.killWorker(w, "forced")
		case <-kw.tick.C:
			if p.Name == "random" && timer == nil && isClosed(answered) {
				timer = time.After(randomKill)
			}
			// Nothing of the chunk left to settle: the point will not come
			// (the random kill waits for its timer, as the random scenario
			// does, whatever it finds).
			if p.Name != "random" && isClosed(answered) && t.refundsStarted(ctx, refs) == 0 {
				t.killWorker(w, "forced")
			}
		}
	}
	return nil
}

// recordRefundKill notes how the refund worker w died and which of
// chunk's refunds it held.
func (t *tester) recordRefundKill(ctx context.Context, p CrashPoint, w *worker, chunk []*RunPlan, refs []string) Kill {
	kill := t.killOf("refund:"+p.Name, w)
	// The refunds the dead worker held: started, their lease its own.
	hit := t.refundsHeldBy(ctx, refs, w.name)
	kill.RunsHit = len(hit)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range chunk {
		if slices.Contains(hit, refundRef(r.Invoice)) {
			t.refundHits[r.Index]++
		}
	}
	t.refunds.Kills = append(t.refunds.Kills, kill)
	t.lastKill = time.Now()
	return kill
}

// refundsStarted counts the refunds of refs left started.
func (t *tester) refundsStarted(ctx context.Context, refs []string) int {
	n, err := executortest.Count(ctx, t.stack.Pool, executortest.Filter{Tenant: t.stack.Cfg.Tenant, Action: apipix.RefundName, Refs: refs, Status: "started"})
	if err != nil {
		return -1
	}
	return int(n)
}

// refundsHeldBy lists the refunds of refs left started under owner.
func (t *tester) refundsHeldBy(ctx context.Context, refs []string, owner string) []string {
	var out []string
	err := retryQuery(ctx, func() error {
		out = out[:0]
		as, err := executortest.Actions(ctx, t.stack.Pool, executortest.Filter{
			Tenant: t.stack.Cfg.Tenant, Action: apipix.RefundName, Refs: refs, Status: "started", Owner: owner})
		for _, a := range as {
			out = append(out, a.Ref)
		}
		return err
	})
	if err != nil {
		t.problem("list the refunds %s held: %v", owner, err)
	}
	return out
}

// requestRefund asks serve's sidecar for r's refund and returns the
// outcome's status ("in_flight" for a 409).
func (t *tester) requestRefund(ctx context.Context, r *RunPlan) (string, error) {
	fields := map[string]string{
		"e2eid":       r.E2EID,
		"amount":      fmt.Sprintf("%d,%02d", r.RefundCents/100, r.RefundCents%100),
		"description": "restart-test partial refund",
	}
	body, err := json.Marshal(map[string]any{"intent_ref": refundRef(r.Invoice), "fields": fields, "source_ref": "restart-test"})
	if err != nil {
		return "", err
	}
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.stack.Server.Ready+"/v1/tools/"+apipix.RefundName+"/execute", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.Header.Set("Authorization", "Bearer "+t.stack.APIToken)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			var out struct {
				Status   string `json:"status"`
				Replayed bool   `json:"replayed"`
			}
			switch {
			case resp.StatusCode == http.StatusConflict:
				return "in_flight", nil
			case resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusAccepted:
				if json.Unmarshal(raw, &out) != nil || out.Status == "" {
					return "", fmt.Errorf("%s: %s", resp.Status, raw)
				}
				if out.Replayed {
					return out.Status + " (replayed)", nil
				}
				return out.Status, nil
			case resp.StatusCode != http.StatusServiceUnavailable:
				return "", fmt.Errorf("%s: %s", resp.Status, raw)
			}
		}
		if attempt == 20 || ctx.Err() != nil {
			return "", fmt.Errorf("no answer after %d tries: %v", attempt, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
