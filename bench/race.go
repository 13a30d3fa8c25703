package main

import (
	"context"
	"fmt"
	"sync"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/executor/executortest"
)

// raceResult counts what happened when callers raced on one key.
type raceResult struct {
	System  string `json:"system"`
	Callers int    `json:"callers"`
	Rounds  int    `json:"rounds"` // keys, each raced by Callers callers at once
	// ExtraCalls is how many tool calls went beyond one per key: each would
	// be a second charge at a provider that does not deduplicate by key.
	ExtraCalls int `json:"extra_tool_calls"`
	// KeysHit is how many keys got more than one tool call.
	KeysHit int `json:"keys_with_duplicates"`
	// ExtraRows is how many stored rows went beyond one per key.
	ExtraRows int    `json:"extra_rows"`
	Err       string `json:"error,omitempty"`
}

// race releases callers at once on each of rounds new keys.
func race(ctx context.Context, callers, rounds int, call func(ctx context.Context, round int) error) error {
	for r := range rounds {
		var (
			wg    sync.WaitGroup
			start = make(chan struct{})
			mu    sync.Mutex
			first error
		)
		for range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				if err := call(ctx, r); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		if first != nil {
			return first
		}
	}
	return nil
}

func (b *bench) raceRounds() int {
	if b.cfg.quick {
		return 5
	}
	return 25
}

// runRace measures duplicates of the naive handler and of retrysafe when
// callers race on one key, each on its own database.
func (b *bench) runRace(ctx context.Context, system string, callers int) *raceResult {
	rr := &raceResult{System: system, Callers: callers, Rounds: b.raceRounds()}
	fail := func(err error) *raceResult {
		rr.Err = err.Error()
		b.logf("  %-10s race on one key   callers=%-4d ERROR %v", system, callers, err)
		return rr
	}
	db, err := b.srv.create(ctx, "race")
	if err != nil {
		return fail(err)
	}
	defer func() { _ = db.drop() }()
	run := randHex(4)
	conns := min(callers, b.cfg.maxConns)
	var prov *provider
	switch system {
	case "naive":
		if err := naivePrep(ctx, db); err != nil {
			return fail(err)
		}
		n, err := newNaive(ctx, db, conns)
		if err != nil {
			return fail(err)
		}
		defer n.close()
		prov = n.prov
		err = race(ctx, callers, rr.Rounds, func(ctx context.Context, r int) error {
			_, _, err := n.handle(ctx, benchCall(run, int64(r)))
			return err
		})
		if err != nil {
			return fail(err)
		}
		if err := n.pool.QueryRow(ctx, `SELECT count(*) - count(DISTINCT (tenant_id, idem_key)) FROM public.naive_actions`).Scan(&rr.ExtraRows); err != nil {
			return fail(err)
		}
	case "retrysafe":
		if err := migrated(ctx, db); err != nil {
			return fail(err)
		}
		e, err := newRS(ctx, db, conns)
		if err != nil {
			return fail(err)
		}
		defer e.close()
		prov = e.prov
		err = race(ctx, callers, rr.Rounds, func(ctx context.Context, r int) error {
			out, err := e.ex.Execute(ctx, benchCall(run, int64(r)), nil)
			if err != nil {
				return err
			}
			switch out.Status {
			case executor.StatusCompleted, executor.StatusInFlight:
				return nil
			}
			return fmt.Errorf("status %s", out.Status)
		})
		if err != nil {
			return fail(err)
		}
		// The executor's rows through its test API: rows beyond one per
		// (tenant, key).
		rows, err := executortest.Actions(ctx, e.pool, executortest.Filter{})
		if err != nil {
			return fail(err)
		}
		keys := map[[2]string]bool{}
		for _, a := range rows {
			keys[[2]string{a.Tenant, a.Key}] = true
		}
		rr.ExtraRows = len(rows) - len(keys)
	default:
		return fail(fmt.Errorf("unknown system %q", system))
	}
	rr.ExtraCalls, rr.KeysHit = prov.duplicates()
	b.logf("  %-10s race on one key   callers=%-4d %d rounds: %d extra tool calls on %d keys, %d extra rows",
		system, callers, rr.Rounds, rr.ExtraCalls, rr.KeysHit, rr.ExtraRows)
	return rr
}
