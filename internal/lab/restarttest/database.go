package restarttest

import (
	"context"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

// databaseFault does a pg-* fault to the test's own cluster and counts it.
func (t *tester) databaseFault(ctx context.Context, name string, st *scenarioStats) {
	var down time.Duration
	switch name {
	case "pg-restart":
		if err := t.stack.Cluster.Restart(ctx); err != nil {
			t.problem("pg_ctl restart: %v", err)
			return
		}
	case "pg-crash":
		d, err := t.stack.CrashDatabase(ctx)
		if err != nil {
			t.problem("crash PostgreSQL: %v", err)
			return
		}
		down = d
	case "pg-failover":
		ft, err := t.stack.Failover(ctx)
		if err != nil {
			t.problem("failover: %v", err)
			return
		}
		down = ft.Down
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch name {
	case "pg-restart":
		st.pgRestarts++
	case "pg-crash":
		st.pgCrashes++
	case "pg-failover":
		st.failovers++
	}
	st.dbDown = max(st.dbDown, down)
	t.lastDB = time.Now()
}

// riverLeader says which River client leads once the redelivery is done,
// and whether it was elected after the last database fault: River's
// leader table is UNLOGGED, so crash recovery empties it and a standby
// never has its rows; the queue's maintenance (the rescuer the redelivery
// depends on) needs a new election after every crash or failover.
func (t *tester) riverLeader(ctx context.Context) string {
	t.mu.Lock()
	last := t.lastDB
	t.mu.Unlock()
	if last.IsZero() {
		return ""
	}
	var id string
	var elected time.Time
	err := retryQuery(ctx, func() error {
		return t.stack.Pool.QueryRow(ctx, `SELECT leader_id, elected_at FROM river_leader ORDER BY elected_at DESC LIMIT 1`).Scan(&id, &elected)
	})
	if err != nil {
		t.problem("River has no leader after the redelivery: %v", err)
		return ""
	}
	if !elected.After(last) {
		t.problem("River's leader %s was elected at %s, before the last database fault ended (%s)", id, elected.Format(time.RFC3339Nano), last.Format(time.RFC3339Nano))
	}
	return fmt.Sprintf("%s, elected %s after the last database fault ended", id, elected.Sub(last).Round(100*time.Millisecond))
}

// describeDatabase says which database the test ran on and with which
// settings, as the server reports them to a new session (the database's
// own default included).
func describeDatabase(ctx context.Context, stack *harness.Stack) string {
	var fsync, syncCommit, fpw, standbys string
	err := stack.Pool.QueryRow(ctx, `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
		current_setting('full_page_writes'), current_setting('synchronous_standby_names')`).Scan(&fsync, &syncCommit, &fpw, &standbys)
	settings := fmt.Sprintf("fsync=%s synchronous_commit=%s full_page_writes=%s", fsync, syncCommit, fpw)
	if err != nil {
		settings = "settings unreadable: " + err.Error()
	}
	if stack.Cluster == nil {
		return "given by --database-url / DATABASE_URL (" + settings + ")"
	}
	d := fmt.Sprintf("private cluster on 127.0.0.1:%d (started by the test; %s)", stack.Cluster.Port, settings)
	if stack.Standby != nil {
		mode := "asynchronous"
		if standbys != "" {
			mode = "synchronous, synchronous_standby_names=" + standbys
		}
		d += fmt.Sprintf(", streaming standby on 127.0.0.1:%d (%s), processes given both hosts with target_session_attrs=read-write", stack.Standby.Port, mode)
	}
	if stack.PSPCluster != nil {
		d += fmt.Sprintf("; the PSP's tables on a cluster of their own (127.0.0.1:%d), which no fault touches", stack.PSPCluster.Port)
	}
	return d
}
