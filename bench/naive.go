package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
)

// naive is the check-then-act handler that retrysafe exists to replace: it
// looks for a stored answer under the key, and when there is none calls the
// tool and stores the answer. Nothing in its logic guards the key (no unique
// constraint, no claim before the call), so callers that race on one key
// all find nothing and all call the tool.
type naive struct {
	pool  *pgxpool.Pool
	prov  *provider
	store *intent.Store // used only to normalize and key, as retrysafe does
}

const naiveSchema = `CREATE TABLE public.naive_actions (
	tenant_id  text NOT NULL,
	idem_key   text NOT NULL,
	response   jsonb,
	created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX naive_actions_key_idx ON public.naive_actions (tenant_id, idem_key)`

func newNaive(ctx context.Context, db *database, conns int) (*naive, error) {
	p, err := db.pool(ctx, conns)
	if err != nil {
		return nil, err
	}
	prov := newProvider()
	rs, err := wireRS(p, prov) // for the store: same extraction and key
	if err != nil {
		prov.Close()
		p.Close()
		return nil, err
	}
	return &naive{pool: p, prov: prov, store: rs.store}, nil
}

func (n *naive) close() {
	n.prov.Close()
	n.pool.Close()
}

// handle is the naive handler for one call.
func (n *naive) handle(ctx context.Context, call executor.Call) (json.RawMessage, toolSpan, error) {
	x, err := n.store.Extract(intent.FreezeParams{Tenant: call.Tenant, Ref: call.Ref, Action: call.Action, Fields: call.Fields})
	if err != nil {
		return nil, toolSpan{}, err
	}
	if x.Err != nil {
		return nil, toolSpan{}, x.Err
	}
	key := x.Result.Key
	var stored []byte
	err = n.pool.QueryRow(ctx, `SELECT response FROM public.naive_actions WHERE tenant_id = $1 AND idem_key = $2 LIMIT 1`,
		call.Tenant, key).Scan(&stored)
	if err == nil {
		return stored, toolSpan{}, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, toolSpan{}, err
	}
	body, _ := x.Result.Payload.MarshalJSON()
	t0 := time.Now()
	resp, err := n.prov.charge(ctx, key, body)
	tool := span(t0)
	if err != nil {
		return nil, tool, err
	}
	_, err = n.pool.Exec(ctx, `INSERT INTO public.naive_actions (tenant_id, idem_key, response) VALUES ($1, $2, $3)`,
		call.Tenant, key, string(resp))
	return resp, tool, err
}

func naivePrep(ctx context.Context, db *database) error {
	p, err := db.pool(ctx, 1)
	if err != nil {
		return err
	}
	defer p.Close()
	_, err = p.Exec(ctx, naiveSchema)
	return err
}

// naiveWorkload: first executions through the naive handler.
func (b *bench) naiveWorkload() workload {
	run := randHex(4)
	var n *naive
	return workload{
		system: "naive", name: "first execution", prep: naivePrep,
		start: func(ctx context.Context, db *database, conns int) (opFunc, func(), error) {
			var err error
			if n, err = newNaive(ctx, db, conns); err != nil {
				return nil, nil, err
			}
			op := func(ctx context.Context, _ int, i int64) (toolSpan, error) {
				_, tool, err := n.handle(ctx, benchCall(run, i))
				return tool, err
			}
			return op, n.close, nil
		},
	}
}
