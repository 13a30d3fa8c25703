package intent_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/pgtest"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// offPool is a pool whose sessions have synchronous_commit off, as ALTER
// DATABASE/ROLE ... SET would give them. Its batches and the transactions
// its Begin hands out read, just before they commit, the setting in force.
type offPool struct {
	*pgxpool.Pool
	atCommit []string
}

type probeTx struct {
	pgx.Tx
	p *offPool
}

func (p *offPool) Begin(ctx context.Context) (pgx.Tx, error) {
	tx, err := p.Pool.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return &probeTx{Tx: tx, p: p}, nil
}

// SendBatch appends to the batch a read of the setting in force at its
// end, in the batch's implicit transaction.
func (p *offPool) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	b.Queue(`SELECT current_setting('synchronous_commit')`).QueryRow(func(row pgx.Row) error {
		var s string
		err := row.Scan(&s)
		p.atCommit = append(p.atCommit, s)
		return err
	})
	return p.Pool.SendBatch(ctx, b)
}

func (t *probeTx) Commit(ctx context.Context) error {
	var s string
	if err := t.Tx.QueryRow(ctx, `SELECT current_setting('synchronous_commit')`).Scan(&s); err != nil {
		return err
	}
	t.p.atCommit = append(t.p.atCommit, s)
	return t.Tx.Commit(ctx)
}

// Freeze and Amend commit synchronously on a session whose
// synchronous_commit is off, and leave the session's setting alone.
func TestWritesCommitSynchronously(t *testing.T) {
	t.Parallel()
	pool, _ := pgtest.Schema(t, nil)
	cfg := pool.Config()
	cfg.MaxConns = 1 // one session: what it keeps is what the next call sees
	// The session setting turned off after dbpool's start of the session
	// turned it on: the store must protect its writes on any pool a user
	// gives it.
	pgtest.SynchronousCommitOff(cfg)
	off, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(off.Close)
	s := newStore(t)
	ctx := context.Background()
	p := &offPool{Pool: off}

	freeze(t, s, p, "t1", "inv-s", equivalent(1, testutil.CPF(92)))
	if _, err := s.Amend(ctx, p, intent.AmendParams{Tenant: "t1", Ref: "inv-s", Action: action,
		Fields: equivalent(1, testutil.CPF(93)), Reason: "another CPF"}); err != nil {
		t.Fatal(err)
	}
	if len(p.atCommit) != 2 || p.atCommit[0] != "on" || p.atCommit[1] != "on" {
		t.Fatalf("freeze and amend committed with synchronous_commit %q", p.atCommit)
	}
	var sess string
	if err := off.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&sess); err != nil || sess != "off" {
		t.Fatalf("session setting %q after the writes (%v), want off", sess, err)
	}
}
