package restarttest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/agent"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

// failpointsEnv arms a worker: the crash point (if any) and, in naive
// mode, the broken control.
func (t *tester) failpointsEnv(point string) []string {
	var fps []string
	if t.cfg.Naive {
		fps = append(fps, agent.FailNaiveRandomKey)
	}
	if point != "" {
		fps = append(fps, point)
	}
	if len(fps) == 0 {
		return nil
	}
	return []string{"RETRYSAFE_FAILPOINTS=" + strings.Join(fps, ",")}
}

// worker is a worker process of the kill phase and what it was armed with.
type worker struct {
	proc   *harness.Proc
	name   string
	armed  string // failpoint name with its count, or ""
	point  string // failpoint name
	proxy  *pspProxy
	start  time.Time
	killed string // how the test ended it, when it did
}

// startWorker starts a worker; with a proxy, the worker reaches the PSP
// through it.
func (t *tester) startWorker(ctx context.Context, role, failpoint string, k int, proxy *pspProxy, args ...string) (*worker, error) {
	t.mu.Lock()
	t.workerSeq++
	name := fmt.Sprintf("%s-%d", role, t.workerSeq)
	t.mu.Unlock()
	failpoint = t.failpointFor(failpoint)
	w := &worker{name: name, point: failpoint, proxy: proxy}
	armed := ""
	if failpoint != "" {
		armed = fmt.Sprintf("%s@%d", failpoint, k)
		w.armed = armed
	}
	env := t.failpointsEnv(armed)
	if proxy != nil {
		env = append(env, t.pspURLEnv(proxy.URL()))
	}
	w.start = time.Now()
	p, err := t.stack.StartWorkerWith(ctx, name, append([]string{"--owner", name}, args...), env...)
	w.proc = p // with ErrExited, the ended process
	if err != nil {
		// A worker takes jobs left from earlier batches as soon as it
		// starts, so its failpoint can fire before it says it is
		// ready: that is the kill it was armed for, not a failed start.
		if errors.Is(err, harness.ErrExited) && p != nil && w.diedAtFailpoint() {
			return w, nil
		}
		return nil, fmt.Errorf("start worker %s: %w", name, err)
	}
	return w, nil
}

// diedAtFailpoint reports whether w's process ended at the failpoint it was
// armed with.
func (w *worker) diedAtFailpoint() bool {
	return w.point != "" && strings.Contains(w.proc.Tail(), "failpoint "+w.point+" hit")
}

// working reports whether a worker started at since has a job of scope
// running.
func (t *tester) working(ctx context.Context, scope []*RunPlan, since time.Time) bool {
	var n int
	err := t.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = ANY($1) AND args->>'message_id' = ANY($2)
		AND state = 'running' AND attempted_at >= $3`, jobKinds, messageIDs(scope), since).Scan(&n)
	return err == nil && n > 0
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// idle reports whether no job of scope is waiting to be fetched now or
// running in a worker started at or after since.
func (t *tester) idle(ctx context.Context, scope []*RunPlan, since time.Time) bool {
	var n int
	err := t.stack.Pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE kind = ANY($1) AND args->>'message_id' = ANY($2)
		AND ((state = 'available' AND scheduled_at <= now()) OR (state = 'running' AND attempted_at >= $3))`,
		jobKinds, messageIDs(scope), since).Scan(&n)
	return err == nil && n == 0
}

// killWorker SIGKILLs w (once) and notes how.
func (t *tester) killWorker(w *worker, how string) {
	t.mu.Lock()
	if w.killed == "" && !w.proc.Exited() {
		w.killed = how
	}
	t.mu.Unlock()
	w.proc.Kill()
}

// recordKills notes the dead workers of a batch: how each died and which
// runs they hosted.
func (t *tester) recordKills(ctx context.Context, scen string, workers []*worker) {
	ks := make([]Kill, len(workers))
	for i, w := range workers {
		ks[i] = t.killOf(scen, w)
	}
	// Jobs these processes fetched and never finished stay 'running': they
	// are the runs the kills hit. No other worker has run since the first
	// of them started.
	var ids []string
	err := retryQuery(ctx, func() error {
		rows, err := t.stack.Pool.Query(ctx, `SELECT DISTINCT args->>'message_id' FROM river_job
			WHERE kind = ANY($1) AND state = 'running' AND attempted_at >= $2`, jobKinds, workers[0].start)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	if err != nil {
		t.problem("list the jobs %s left: %v", workers[0].name, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	hit := map[int]bool{}
	for _, id := range ids {
		if r := t.byMsg[id]; r != nil && !hit[r.Index] {
			hit[r.Index] = true
			t.hits[r.Index]++
		}
	}
	ks[0].RunsHit = len(hit)
	t.kills = append(t.kills, ks...)
	t.progress.Kills = len(t.kills)
	t.lastKill = time.Now()
}

// killOf waits for w to be dead and says how it died.
func (t *tester) killOf(scen string, w *worker) Kill {
	<-w.proc.Done()
	t.mu.Lock()
	how := w.killed // written by killWorker, maybe on the proxy's goroutine
	t.mu.Unlock()
	k := Kill{Scenario: scen, Worker: w.name, How: how}
	if w.diedAtFailpoint() {
		k.How, k.Point = "failpoint", w.armed
	}
	if k.How == "" {
		k.How = "exited"
		t.problem("worker %s exited on its own: %s", w.name, lastLine(w.proc.Tail()))
	}
	return k
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}
