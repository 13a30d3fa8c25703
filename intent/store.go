package intent

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/internal/ledger"
)

// The store's reads and writes, through the ledger (internal/ledger),
// which holds their SQL.

// fromRow is the ledger's row as an Intent: the two types have the same
// fields, so the conversion copies nothing.
func fromRow(r *ledger.Intent) *Intent { return (*Intent)(r) }

// row is x's intent as the ledger inserts it; nil when x has a field
// error (nothing of it can be frozen).
func (x *Extraction) row() *ledger.NewIntent {
	if x.Err != nil {
		return nil
	}
	r := x.Result
	return &ledger.NewIntent{
		ID:      ledger.ID{Tenant: x.Tenant, Ref: x.Ref, Action: x.Action},
		Version: r.Version, Payload: r.Payload, Key: r.Key, SourceRef: x.SourceRef,
	}
}

func (s *Store) outcome(x *Extraction, in *Intent, created bool) (*FreezeResult, error) {
	if in == nil {
		if x.Err != nil {
			return nil, x.Err
		}
		return nil, fmt.Errorf("%w (tenant %q, action %q)", ErrKeyInUse, x.Tenant, x.Action)
	}
	res := &FreezeResult{Intent: in, Created: created}
	if x.Err == nil {
		res.Ignored = x.Result.Ignored
	}
	if created {
		return res, nil
	}
	// Compare this extraction with the frozen payload under the version
	// it was frozen with, so that a newer default version does not report
	// every field as divergent.
	mine := x.Result
	if x.Err == nil && mine.Version != in.Version {
		r, err := s.derive(x.Tenant, x.Ref, x.Action, in.Version, x.Fields)
		if err != nil {
			mine = nil
			res.ExtractionErr = err
		} else {
			mine = r
		}
	} else if x.Err != nil {
		mine = nil
		res.ExtractionErr = x.Err
	}
	if mine != nil {
		res.Divergent = mine.Payload.Diff(in.Payload)
	} else {
		for _, fe := range derive.FieldErrorsOf(res.ExtractionErr) {
			res.Divergent = append(res.Divergent, fe.Field)
		}
	}
	if len(res.Divergent) > 0 || res.ExtractionErr != nil {
		// Names only: the values may be personal data.
		s.log.Info("intent: divergent extraction dropped",
			"tenant", x.Tenant, "action", x.Action, "divergent", strings.Join(res.Divergent, ","))
	}
	return res, nil
}

func (s *Store) freeze(ctx context.Context, db DBTX, p FreezeParams) (*FreezeResult, error) {
	x, err := s.extract(p)
	if err != nil {
		return nil, err
	}
	b := &pgx.Batch{}
	ledger.QueueDurable(b)
	f := ledger.QueueFreeze(b, ledger.ID{Tenant: x.Tenant, Ref: x.Ref, Action: x.Action}, x.row())
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("intent: freeze: %w", err)
	}
	return s.outcome(x, fromRow(f.Intent), f.Inserted)
}

func get(ctx context.Context, db DBTX, tenant, ref, action string) (*Intent, error) {
	if err := checkIDs(tenant, ref, action); err != nil {
		return nil, err
	}
	in, err := ledger.IntentGet(ctx, db, ledger.ID{Tenant: tenant, Ref: ref, Action: action})
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("intent: get: %w", err)
	}
	return fromRow(in), nil
}

func getByKey(ctx context.Context, db DBTX, tenant, key string) (*Intent, error) {
	if tenant == "" || key == "" {
		return nil, fmt.Errorf("%w: empty tenant or key", ErrInvalid)
	}
	in, err := ledger.IntentGetByKey(ctx, db, tenant, key)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("intent: get by key: %w", err)
	}
	return fromRow(in), nil
}

func refsByKeyPrefix(ctx context.Context, db DBTX, tenant, action, prefix string) ([]string, error) {
	if tenant == "" || action == "" || prefix == "" {
		return nil, fmt.Errorf("%w: empty tenant, action or prefix", ErrInvalid)
	}
	refs, err := ledger.IntentRefsByKeyPrefix(ctx, db, tenant, action, prefix)
	if err != nil {
		return nil, fmt.Errorf("intent: refs by key prefix: %w", err)
	}
	return refs, nil
}

func revisions(ctx context.Context, db DBTX, tenant, ref, action string) ([]Revision, error) {
	if err := checkIDs(tenant, ref, action); err != nil {
		return nil, err
	}
	rs, err := ledger.RevisionList(ctx, db, ledger.ID{Tenant: tenant, Ref: ref, Action: action})
	if err != nil {
		return nil, fmt.Errorf("intent: revisions: %w", err)
	}
	var out []Revision
	for _, r := range rs {
		out = append(out, Revision(r))
	}
	return out, nil
}

func checkAmend(p AmendParams) error {
	if err := checkIDs(p.Tenant, p.Ref, p.Action); err != nil {
		return err
	}
	if strings.TrimSpace(p.Reason) == "" {
		return fmt.Errorf("%w: an amendment needs a reason", ErrInvalid)
	}
	if p.OverrideCompleted && strings.TrimSpace(p.By) == "" {
		return fmt.Errorf("%w: an override needs who (By)", ErrInvalid)
	}
	if !Storable(p.Reason) || !Storable(p.By) {
		return fmt.Errorf("%w: reason or by %s", ErrInvalid, unstorable)
	}
	return nil
}

func (s *Store) amend(ctx context.Context, db Beginner, p AmendParams) (*AmendResult, error) {
	if err := checkAmend(p); err != nil {
		return nil, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("intent: amend: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if err := ledger.Durable(ctx, tx); err != nil {
		return nil, fmt.Errorf("intent: amend: %w", err)
	}
	id := ledger.ID{Tenant: p.Tenant, Ref: p.Ref, Action: p.Action}
	old, err := ledger.IntentLock(ctx, tx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("intent: amend: lock: %w", err)
	}
	version := p.Version
	if version == 0 {
		version = old.Version
	}
	r, err := s.derive(p.Tenant, p.Ref, p.Action, version, p.Fields)
	if err != nil {
		return nil, err
	}
	if err := unstorableField(r.Payload); err != nil {
		return nil, err
	}
	if r.Key == old.Key {
		return nil, ErrNoChange
	}
	overrode, err := s.supersede(ctx, tx, p, old)
	if err != nil {
		return nil, err
	}
	in, err := amendRow(ctx, tx, id, r, old, p, overrode)
	if err != nil {
		return nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, fmt.Errorf("intent: amend: commit: %w", err)
	}
	changed := r.Payload.Diff(old.Payload)
	sort.Strings(changed)
	if overrode != "" {
		s.log.Warn("intent: amended past a completed money action by operator override",
			"tenant", p.Tenant, "action", p.Action, "revision", in.Revision, "by", p.By)
	} else {
		s.log.Info("intent: amended", "tenant", p.Tenant, "action", p.Action, "revision", in.Revision)
	}
	return &AmendResult{Intent: in, OldKey: old.Key, Changed: changed, Revision: old.Revision}, nil
}

// supersede writes the tombstone under old's key and refuses the
// amendment when the action there is started or in review, or completed
// for a tool that moves money (unless overridden, which it returns:
// "completed").
func (s *Store) supersede(ctx context.Context, tx pgx.Tx, p AmendParams, old *ledger.Intent) (overrode string, err error) {
	status, err := ledger.ActionSupersede(ctx, tx, ledger.ID{Tenant: p.Tenant, Ref: p.Ref, Action: p.Action}, old.Key, old.Revision)
	if err != nil {
		return "", fmt.Errorf("intent: amend: %w", err)
	}
	if status == "started" || status == "review" {
		return "", fmt.Errorf("%w (status %s)", ErrActionActive, status)
	}
	if status != "completed" {
		return "", nil
	}
	money, err := s.movesMoney(p.Action, old.Version)
	if err != nil {
		return "", err
	}
	if money && !p.OverrideCompleted {
		return "", &CompletedError{Tenant: p.Tenant, Ref: p.Ref, Action: p.Action, Key: old.Key}
	}
	if money {
		return status, nil
	}
	return "", nil
}

// amendRow lifts a tombstone under the new key, writes the new payload and
// key, and records the revision.
func amendRow(ctx context.Context, tx pgx.Tx, id ledger.ID, r *derive.Result, old *ledger.Intent, p AmendParams, overrode string) (*Intent, error) {
	if err := ledger.ActionUnsupersede(ctx, tx, id.Tenant, r.Key); err != nil {
		return nil, fmt.Errorf("intent: amend: lift tombstone: %w", err)
	}
	in, err := ledger.IntentAmend(ctx, tx, &ledger.NewIntent{ID: id, Version: r.Version, Payload: r.Payload, Key: r.Key})
	if err != nil {
		if ledger.IsUniqueViolation(err) {
			return nil, ErrKeyInUse
		}
		return nil, fmt.Errorf("intent: amend: update: %w", err)
	}
	if err := ledger.RevisionInsert(ctx, tx, old, r.Key, p.Reason, p.By, overrode); err != nil {
		return nil, fmt.Errorf("intent: amend: revision: %w", err)
	}
	return fromRow(in), nil
}
