package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkpointState is what the server says of its checkpoints: how many
// have begun, and how much WAL and time are left before the next one
// begins on its own.
//
// Why the scale pair needs it: the first change to an index page after a
// checkpoint logs the whole page, and the ledger's key indexes take
// random keys, so after a checkpoint nearly every first execution on 1M
// rows logs one or two whole pages until most of those indexes' pages
// have been logged once (0.48 to 0.57 full-page images per execution in
// the first 10 s after the preload's checkpoint, 0.01 to 0.03 in the next,
// 2026-12-06), while the empty side's small indexes are logged whole in a
// moment. On the shared server (max_wal_size 1GB) the warm-up writes
// about as much WAL as a checkpoint is triggered by, so the next
// checkpoint began at the start of the rounds or inside them in two runs
// of three on a host with fast commits (0.66 and 0.67 full-page images
// per execution on the 1M side in the rounds, 0.03 and 0.04 on the empty
// side; the ratio 0.83 and 0.84, and 0.95 in the run whose checkpoint
// came during the warm-up). Where the rounds fell was chance; now they
// begin after a checkpoint's burst, which is reported apart
// (roomForRounds, checkpointRoom).
type checkpointState struct {
	Begun int64 // checkpoints begun since the statistics' reset: timed and requested
	// WALLeft is the WAL the server can still write before it requests a
	// checkpoint (max_wal_size / (1 + checkpoint_completion_target), less
	// a segment, from the last checkpoint's redo point); TimeLeft the time
	// before checkpoint_timeout begins one.
	WALLeft  float64
	TimeLeft time.Duration
}

// checkpointStateSQL reads checkpointState's fields, begun standing for
// the count of checkpoints begun: pg_stat_bgwriter's on PostgreSQL 15 and
// 16, pg_stat_checkpointer's from 17 on. pg_control_checkpoint and
// CHECKPOINT need a superuser or pg_checkpoint, as the preload's settle
// does already.
func checkpointStateSQL(serverVersionNum int) string {
	begun := `SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter`
	if serverVersionNum >= 170000 {
		begun = `SELECT num_timed + num_requested FROM pg_stat_checkpointer`
	}
	return `SELECT (` + begun + `),
	(SELECT setting::float8 * 1024 * 1024 FROM pg_settings WHERE name = 'max_wal_size')
		/ (1 + current_setting('checkpoint_completion_target')::float8)
		- (SELECT setting::float8 FROM pg_settings WHERE name = 'wal_segment_size')
		- pg_wal_lsn_diff(pg_current_wal_insert_lsn(), c.redo_lsn),
	(SELECT setting::float8 FROM pg_settings WHERE name = 'checkpoint_timeout')
		- extract(epoch FROM now() - c.checkpoint_time)
FROM pg_control_checkpoint() c`
}

func (s *server) checkpointState(ctx context.Context) (checkpointState, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return checkpointState{}, err
	}
	defer c.Close(ctx)
	return readCheckpointState(ctx, c)
}

// readCheckpointState is checkpointState on a connection already open.
func readCheckpointState(ctx context.Context, c *pgx.Conn) (checkpointState, error) {
	var num int
	if err := c.QueryRow(ctx, `SELECT current_setting('server_version_num')::int`).Scan(&num); err != nil {
		return checkpointState{}, err
	}
	var st checkpointState
	var secs float64
	if err := c.QueryRow(ctx, checkpointStateSQL(num)).Scan(&st.Begun, &st.WALLeft, &secs); err != nil {
		return checkpointState{}, fmt.Errorf("checkpoint state: %w", err)
	}
	st.TimeLeft = time.Duration(secs * float64(time.Second))
	return st, nil
}

func (s *server) checkpoint(ctx context.Context) error {
	c, err := s.admin(ctx)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, `CHECKPOINT`)
	return err
}

// checkpointerQuietSQL says whether the checkpointer is idle or napping
// between the writes of a spread checkpoint, the two places it reports
// its statistics from (and whether this role may see its wait event at
// all: without pg_read_all_stats every wait event reads NULL).
//
// Why it matters: the checkpointer counts a checkpoint as it begins but
// reports the count only when it first naps or when the checkpoint ends,
// and a checkpoint behind schedule (the case after a burst of whole
// pages) writes without napping. On the forty-first host (2026-12-07) one
// began in the fifth of six rounds (22:11:52 in the server's log; 0.80
// and 2.22 full-page images per execution on the preloaded side in the
// last two rounds, 0.41 on the empty one) and ended 7.8 s later, after
// the count was read: the report said none had begun.
const checkpointerQuietSQL = `SELECT NOT pg_has_role('pg_read_all_stats', 'USAGE')
	OR coalesce(bool_and(wait_event IN ('CheckpointerMain', 'CheckpointWriteDelay')), true)
FROM pg_stat_activity WHERE backend_type = 'checkpointer'`

// checkpointSettle bounds the wait for the checkpointer to report a
// checkpoint under way, and checkpointPoll is how often it asks.
const (
	checkpointSettle = 60 * time.Second
	checkpointPoll   = 100 * time.Millisecond
)

// settledCheckpointState is checkpointState read once the checkpointer
// has reported every checkpoint begun (checkpointerQuietSQL), waiting at
// most checkpointSettle; it returns how long it waited.
func (s *server) settledCheckpointState(ctx context.Context) (checkpointState, time.Duration, error) {
	c, err := s.admin(ctx)
	if err != nil {
		return checkpointState{}, 0, err
	}
	defer c.Close(ctx)
	waited, err := waitUntil(ctx, checkpointSettle, checkpointPoll, func(ctx context.Context) (bool, error) {
		var quiet bool
		err := c.QueryRow(ctx, checkpointerQuietSQL).Scan(&quiet)
		return quiet, err
	})
	if err != nil {
		return checkpointState{}, waited, fmt.Errorf("waiting for the checkpointer: %w", err)
	}
	st, err := readCheckpointState(ctx, c)
	return st, waited, err
}

// waitUntil asks quiet every poll until it says true or within has passed
// (not an error: the caller reads what there is), and returns how long
// it waited.
func waitUntil(ctx context.Context, within, poll time.Duration, quiet func(context.Context) (bool, error)) (time.Duration, error) {
	began := time.Now()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		ok, err := quiet(ctx)
		if err != nil || ok || time.Since(began) >= within {
			return time.Since(began), err
		}
		select {
		case <-ctx.Done():
			return time.Since(began), ctx.Err()
		case <-t.C:
		}
	}
}

// roomFor reports whether st leaves room for work that writes wal bytes
// over d without a checkpoint beginning, with half as much again to spare.
func (st checkpointState) roomFor(wal float64, d time.Duration) bool {
	return st.WALLeft > 1.5*wal && st.TimeLeft > d+d/2
}

// checkpointRoom is what the scale pair did about the server's next
// checkpoint before its rounds.
type checkpointRoom struct {
	// Need is the WAL the rounds were expected to write (the warm-up's
	// last rate and WAL per operation over the rounds' length); WALLeft
	// and TimeLeft what the server had left after the warm-up.
	NeedWAL     float64 `json:"need_wal_bytes"`
	NeedSeconds float64 `json:"need_seconds"`
	WALLeft     float64 `json:"wal_left_bytes"`
	TimeLeft    float64 `json:"time_left_seconds"`
	// Forced says a CHECKPOINT was run because that was not enough; After
	// is the preloaded side's first executions after it, until they logged
	// few whole pages again (the checkpoint's cost, unmeasured by the
	// rounds).
	Forced bool       `json:"forced"`
	After  []warmStep `json:"after,omitempty"`
	// AfterWALLeft is the WAL the server had left before its next
	// checkpoint once those first executions ended: the pages they logged
	// whole came out of it.
	AfterWALLeft float64 `json:"after_wal_left_bytes,omitempty"`
	// InRounds counts the checkpoints that began during the rounds all
	// the same; SettledAfter is how long after the rounds the count was
	// read, waiting for the checkpointer to report one still under way
	// (settledCheckpointState).
	InRounds     int64   `json:"checkpoints_in_rounds"`
	SettledAfter float64 `json:"settled_after_seconds,omitempty"`
}

// afterCheckpointChunk is how long each logged part of the first
// executions after a forced checkpoint runs, and afterCheckpointFPI the
// full-page images per execution under which they stop.
const (
	afterCheckpointChunk = 2 * time.Second
	afterCheckpointFPI   = 0.05
)

// text is the room's line in the report: before, then what the rounds
// met.
func (r *checkpointRoom) text() string {
	s := r.before()
	if r.InRounds > 0 {
		s += fmt.Sprintf("; %d checkpoint(s) began during the rounds all the same", r.InRounds)
		if r.SettledAfter >= 1 {
			s += fmt.Sprintf(" (counted %.0f s after them, once the checkpointer reported it)", r.SettledAfter)
		}
	} else {
		s += "; none began during the rounds"
	}
	return s
}

// before is what was known and done before the rounds, the line the log
// gives then.
func (r *checkpointRoom) before() string {
	s := fmt.Sprintf("the rounds needed about %.0f MB of WAL and %.0f s; the server had %.0f MB and %.0f s left before its next checkpoint",
		r.NeedWAL/1e6, r.NeedSeconds, max(r.WALLeft, 0)/1e6, max(r.TimeLeft, 0))
	if r.Forced {
		s += "; so a CHECKPOINT ran before them, and first executions on the preloaded tables went on until they logged few whole pages again: " + warmText(r.After)
		s += fmt.Sprintf("; which left %.0f MB", max(r.AfterWALLeft, 0)/1e6)
	} else {
		s += ": no checkpoint forced"
	}
	return s
}
