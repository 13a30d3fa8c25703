package main

import (
	"context"
	"fmt"
	"time"
)

const (
	floorName     = "single-row commit"
	floorToolName = "commit + tool + commit"
	floorTwoName  = "two single-row commits"
)

func floorPrep(ctx context.Context, db *database) error {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Exec(ctx, `CREATE TABLE floor (k text PRIMARY KEY)`)
	return err
}

// floorWorkload is the database's floor: one minimal INSERT ... ON CONFLICT
// DO NOTHING of a new key per transaction (autocommit), through pgx, from
// the same number of callers on the same pool size. An execution that needs
// two commits can reach at most half of it.
func (b *bench) floorWorkload() workload {
	run := newRun()
	return workload{
		system: "floor", name: floorName,
		prep: floorPrep,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			p, err := db.pool(ctx, conns)
			if err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				_, err := p.Exec(ctx, `INSERT INTO public.floor (k) VALUES ($1) ON CONFLICT DO NOTHING`, fmt.Sprintf("%s-%d", run, i))
				return toolSpan{}, err
			}
			return op, p.Close, nil
		},
	}
}

// floorToolWorkload is the least any claim-call-complete design can do: a
// minimal commit, the same tool call, a second minimal commit.
func (b *bench) floorToolWorkload() workload { return b.twoCommits(floorToolName, true) }

// floorTwoWorkload is floorToolWorkload without its tool: what a claim and
// its outcome cost at the least without the call between them.
func (b *bench) floorTwoWorkload() workload { return b.twoCommits(floorTwoName, false) }

// twoCommits is two minimal commits of a new key per operation, with the
// benchmark's tool called between them when withTool.
func (b *bench) twoCommits(name string, withTool bool) workload {
	run := newRun()
	return workload{
		system: "floor", name: name, prep: floorPrep,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			p, err := db.pool(ctx, conns)
			if err != nil {
				return nil, nil, err
			}
			var prov *provider
			stop := p.Close
			if withTool {
				prov = newProvider()
				stop = func() { prov.Close(); p.Close() }
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				k := fmt.Sprintf("%s-%d", run, i)
				if _, err := p.Exec(ctx, `INSERT INTO public.floor (k) VALUES ($1) ON CONFLICT DO NOTHING`, k); err != nil {
					return toolSpan{}, err
				}
				var tool toolSpan
				if prov != nil {
					t0 := time.Now()
					if _, err := prov.charge(ctx, k, []byte(`{}`)); err != nil {
						return toolSpan{}, err
					}
					tool = span(t0)
				}
				_, err := p.Exec(ctx, `INSERT INTO public.floor (k) VALUES ($1) ON CONFLICT DO NOTHING`, k+"-done")
				return tool, err
			}
			return op, stop, nil
		},
	}
}
