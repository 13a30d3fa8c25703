package intent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/derive"
)

// scanIntent scans an intent row; lead are destinations for columns the
// query puts before intentColumns (IntentGetMany's position).
func scanIntent(row pgx.Row, lead ...any) (*Intent, error) {
	var (
		in  Intent
		raw []byte
	)
	if err := row.Scan(append(lead, &in.Tenant, &in.Ref, &in.Action, &in.Version, &raw, &in.Key,
		&in.SourceRef, &in.Revision, &in.CreatedAt, &in.UpdatedAt)...); err != nil {
		return nil, err
	}
	p, err := decodePayload(raw)
	if err != nil {
		return nil, err
	}
	in.Payload = p
	return &in, nil
}

func decodePayload(raw []byte) (derive.Payload, error) {
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("intent: stored payload: %w", err)
	}
	return derive.PayloadFromMap(m), nil
}

func encodePayload(p derive.Payload) string {
	b, _ := p.MarshalJSON() // strings only: cannot fail
	return string(b)
}

// isFieldError tells a bad extraction (kept, so a frozen intent can still
// be found) from a bad call (returned).
func isFieldError(err error) bool {
	return errors.Is(err, derive.ErrMissingField) || errors.Is(err, derive.ErrInvalidField) || errors.Is(err, derive.ErrAmbiguous)
}

func checkIDs(tenant, ref, action string) error {
	switch {
	case tenant == "":
		return fmt.Errorf("%w: empty tenant", ErrInvalid)
	case ref == "":
		return fmt.Errorf("%w: empty intent_ref", ErrInvalid)
	case action == "":
		return fmt.Errorf("%w: empty action", ErrInvalid)
	}
	for _, id := range [...]struct{ name, v string }{{"tenant", tenant}, {"intent_ref", ref}, {"action", action}} {
		if !Storable(id.v) {
			return fmt.Errorf("%w: %s %s", ErrInvalid, id.name, unstorable)
		}
		if len(id.v) > MaxIDLen {
			return fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, id.name, MaxIDLen)
		}
	}
	return nil
}

// MaxIDLen bounds a tenant, an intent_ref and an action, in bytes: the
// three together stay inside what a btree index entry may hold (about
// 2.7 kB), which PostgreSQL otherwise refuses at insert time (54000).
const MaxIDLen = 512

const unstorable = "contains a NUL character or invalid UTF-8, which the database refuses"

// Storable reports whether PostgreSQL stores s in a text or jsonb column
// of a UTF-8 database: valid UTF-8 without NUL (text refuses a NUL byte
// with 22021, jsonb "\u0000" with 22P05). Checked before a call is
// frozen or grouped, so that a value the database refuses never fails the
// commit group the call would have joined.
func Storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// unstorableField is a field error for the first payload value that
// Storable refuses, nil when there is none.
func unstorableField(p derive.Payload) error {
	for _, v := range p {
		if !Storable(v.Value) || !Storable(v.Name) {
			return &derive.FieldError{Field: v.Name, Reason: unstorable, Kind: derive.ErrInvalidField}
		}
	}
	return nil
}

// withRef returns a copy of fields with the intent_ref written into every
// reference field the schema names: the reference comes from the system, and
// a model that sent one of its own is overridden.
func (s *Store) withRef(action string, version int, ref string, fields map[string]any) (map[string]any, error) {
	schema, err := s.d.Schema(action, version)
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(fields)+1)
	for k, v := range fields {
		out[k] = v
	}
	for _, f := range schema.Fields {
		for _, rf := range s.refFields {
			if f.Name == rf {
				out[rf] = ref
			}
		}
	}
	return out, nil
}

// movesMoney reports whether the action's schema (at version) has a money
// field: completing it moved money, and amending it would move more.
func (s *Store) movesMoney(action string, version int) (bool, error) {
	schema, err := s.d.Schema(action, version)
	if err != nil {
		return false, err
	}
	for _, f := range schema.Fields {
		if f.Rule == derive.RuleMoney {
			return true, nil
		}
	}
	return false, nil
}

func (s *Store) derive(tenant, ref, action string, version int, fields map[string]any) (*derive.Result, error) {
	f, err := s.withRef(action, version, ref, fields)
	if err != nil {
		return nil, err
	}
	return s.d.Derive(tenant, action, f, &derive.Opts{Version: version})
}

// Extract implements the documented behaviour (see intent.go).
func (s *Store) extract(p FreezeParams) (*Extraction, error) {
	if err := checkIDs(p.Tenant, p.Ref, p.Action); err != nil {
		return nil, err
	}
	if !Storable(p.SourceRef) {
		return nil, fmt.Errorf("%w: source_ref %s", ErrInvalid, unstorable)
	}
	if len(p.SourceRef) > MaxIDLen {
		return nil, fmt.Errorf("%w: source_ref is longer than %d bytes", ErrInvalid, MaxIDLen)
	}
	r, err := s.derive(p.Tenant, p.Ref, p.Action, p.Version, p.Fields)
	if err == nil {
		if err = unstorableField(r.Payload); err != nil {
			r = nil
		}
	}
	x := &Extraction{FreezeParams: p, Result: r}
	if err != nil {
		if !isFieldError(err) {
			return nil, err
		}
		x.Err = err
	}
	return x, nil
}

type pending struct {
	s        *Store
	x        *Extraction
	inserted bool
	found    bool
	in       *Intent
}

func (s *Store) queueFreeze(b *pgx.Batch, x *Extraction) *PendingFreeze {
	pf := &PendingFreeze{p: &pending{s: s, x: x}}
	if x.Err == nil {
		r := x.Result
		b.Queue(IntentFreeze, x.Tenant, x.Ref, x.Action, r.Version, encodePayload(r.Payload), r.Key, x.SourceRef).
			Exec(func(ct pgconn.CommandTag) error {
				pf.p.inserted = ct.RowsAffected() == 1
				return nil
			})
	}
	b.Queue(IntentGet, x.Tenant, x.Ref, x.Action).QueryRow(func(row pgx.Row) error {
		in, err := scanIntent(row)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		pf.p.found, pf.p.in = true, in
		return nil
	})
	return pf
}

func (s *Store) queueFreezeMany(b *pgx.Batch, xs []*Extraction) []*PendingFreeze {
	pfs := make([]*PendingFreeze, len(xs))
	n := len(xs)
	ts, rs, as := make([]string, n), make([]string, n), make([]string, n)
	for i, x := range xs {
		pfs[i] = &PendingFreeze{p: &pending{s: s, x: x}}
		ts[i], rs[i], as[i] = x.Tenant, x.Ref, x.Action
	}
	if args, ok := freezeManyArgs(xs); ok {
		b.Queue(IntentFreezeMany, args...).Query(func(rows pgx.Rows) error {
			var t, r, a string
			_, err := pgx.ForEachRow(rows, []any{&t, &r, &a}, func() error {
				for _, pf := range pfs {
					x := pf.p.x
					if x.Err == nil && x.Tenant == t && x.Ref == r && x.Action == a {
						pf.p.inserted = true
						break
					}
				}
				return nil
			})
			return err
		})
	}
	b.Queue(IntentGetMany, ts, rs, as).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var pos int64
			in, err := scanIntent(rows, &pos)
			if err != nil {
				return err
			}
			if pos < 1 || pos > int64(n) {
				return fmt.Errorf("intent: read-back position %d out of range", pos)
			}
			pfs[pos-1].p.found, pfs[pos-1].p.in = true, in
		}
		return rows.Err()
	})
	return pfs
}

// freezeManyArgs is FreezeManyInsert's parameters for the extractions of
// xs without a field error; ok is false when there is none.
// insertedIntent is the row FreezeManyInsert wrote for x (see
// freezeManyArgs) at createdAt, as scanIntent would read it back: the
// payload in name order, as decodePayload gives it (derive's is already).
func insertedIntent(x *Extraction, createdAt time.Time) *Intent {
	r := x.Result
	byName := func(a, b derive.Value) int { return strings.Compare(a.Name, b.Name) }
	p := slices.Clone(r.Payload)
	if !slices.IsSortedFunc(p, byName) {
		slices.SortFunc(p, byName)
	}
	return &Intent{
		Tenant: x.Tenant, Ref: x.Ref, Action: x.Action, Version: r.Version, Payload: p, Key: r.Key,
		SourceRef: x.SourceRef, CreatedAt: createdAt, UpdatedAt: createdAt,
	}
}

func freezeManyArgs(xs []*Extraction) (args []any, ok bool) {
	var (
		ts, rs, as, ps, ks, ss []string
		vs                     []int32
	)
	for _, x := range xs {
		if x.Err != nil {
			continue
		}
		r := x.Result
		ts, rs, as = append(ts, x.Tenant), append(rs, x.Ref), append(as, x.Action)
		vs, ps = append(vs, int32(r.Version)), append(ps, encodePayload(r.Payload))
		ks, ss = append(ks, r.Key), append(ss, x.SourceRef)
	}
	return []any{ts, rs, as, vs, ps, ks, ss}, len(ts) > 0
}

func (p *pending) result() (*FreezeResult, error) {
	x := p.x
	if !p.found {
		if x.Err != nil {
			return nil, x.Err
		}
		return nil, fmt.Errorf("%w (tenant %q, action %q)", ErrKeyInUse, x.Tenant, x.Action)
	}
	res := &FreezeResult{Intent: p.in, Created: p.inserted}
	if x.Err == nil {
		res.Ignored = x.Result.Ignored
	}
	if p.inserted {
		return res, nil
	}
	// Compare this extraction with the frozen payload under the version
	// it was frozen with, so that a newer default version does not report
	// every field as divergent.
	mine := x.Result
	if x.Err == nil && mine.Version != p.in.Version {
		r, err := p.s.derive(x.Tenant, x.Ref, x.Action, p.in.Version, x.Fields)
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
		res.Divergent = mine.Payload.Diff(p.in.Payload)
	} else {
		var fe *derive.FieldError
		if errors.As(res.ExtractionErr, &fe) {
			res.Divergent = []string{fe.Field}
		}
	}
	if len(res.Divergent) > 0 || res.ExtractionErr != nil {
		// Names only: the values may be personal data.
		p.s.log.Info("intent: divergent extraction dropped",
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
	b.Queue(IntentDurable)
	pf := s.queueFreeze(b, x)
	if err := db.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("intent: freeze: %w", err)
	}
	return pf.Result()
}

func get(ctx context.Context, db DBTX, tenant, ref, action string) (*Intent, error) {
	if err := checkIDs(tenant, ref, action); err != nil {
		return nil, err
	}
	in, err := scanIntent(db.QueryRow(ctx, IntentGet, tenant, ref, action))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("intent: get: %w", err)
	}
	return in, nil
}

func getByKey(ctx context.Context, db DBTX, tenant, key string) (*Intent, error) {
	if tenant == "" || key == "" {
		return nil, fmt.Errorf("%w: empty tenant or key", ErrInvalid)
	}
	in, err := scanIntent(db.QueryRow(ctx, IntentGetByKey, tenant, key))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("intent: get by key: %w", err)
	}
	return in, nil
}

func revisions(ctx context.Context, db DBTX, tenant, ref, action string) ([]Revision, error) {
	if err := checkIDs(tenant, ref, action); err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, IntentRevisionList, tenant, ref, action)
	if err != nil {
		return nil, fmt.Errorf("intent: revisions: %w", err)
	}
	defer rows.Close()
	var out []Revision
	for rows.Next() {
		var (
			r   Revision
			raw []byte
		)
		if err := rows.Scan(&r.Revision, &r.OldVersion, &raw, &r.OldKey, &r.NewKey, &r.Reason, &r.AmendedBy, &r.Overrode, &r.CreatedAt); err != nil {
			return nil, fmt.Errorf("intent: revisions: %w", err)
		}
		if r.OldPayload, err = decodePayload(raw); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("intent: revisions: %w", err)
	}
	return out, nil
}

func (s *Store) amend(ctx context.Context, db Beginner, p AmendParams) (*AmendResult, error) {
	if err := checkIDs(p.Tenant, p.Ref, p.Action); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Reason) == "" {
		return nil, fmt.Errorf("%w: an amendment needs a reason", ErrInvalid)
	}
	if p.OverrideCompleted && strings.TrimSpace(p.By) == "" {
		return nil, fmt.Errorf("%w: an override needs who (By)", ErrInvalid)
	}
	if !Storable(p.Reason) || !Storable(p.By) {
		return nil, fmt.Errorf("%w: reason or by %s", ErrInvalid, unstorable)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("intent: amend: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	if _, err := tx.Exec(ctx, IntentDurable); err != nil {
		return nil, fmt.Errorf("intent: amend: %w", err)
	}

	old, err := scanIntent(tx.QueryRow(ctx, IntentLock, p.Tenant, p.Ref, p.Action))
	if errors.Is(err, pgx.ErrNoRows) {
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
	tomb, _ := json.Marshal(map[string]any{
		"class":   SupersededClass,
		"code":    "amended",
		"message": fmt.Sprintf("intent amended (revision %d replaced)", old.Revision),
	})
	if _, err := tx.Exec(ctx, ActionTombstoneInsert, p.Tenant, old.Key, p.Ref, p.Action, string(tomb)); err != nil {
		return nil, fmt.Errorf("intent: amend: tombstone: %w", err)
	}
	// A new statement: sees a claim committed while the insert above waited.
	var status string
	if err := tx.QueryRow(ctx, ActionStatusGet, p.Tenant, old.Key).Scan(&status); err != nil {
		return nil, fmt.Errorf("intent: amend: action status: %w", err)
	}
	if status == "started" || status == "review" {
		return nil, fmt.Errorf("%w (status %s)", ErrActionActive, status)
	}
	overrode := ""
	if status == "completed" {
		money, err := s.movesMoney(p.Action, old.Version)
		if err != nil {
			return nil, err
		}
		if money && !p.OverrideCompleted {
			return nil, &CompletedError{Tenant: p.Tenant, Ref: p.Ref, Action: p.Action, Key: old.Key}
		}
		if money {
			overrode = status
		}
	}
	if _, err := tx.Exec(ctx, ActionTombstoneDelete, p.Tenant, r.Key); err != nil {
		return nil, fmt.Errorf("intent: amend: lift tombstone: %w", err)
	}
	in, err := scanIntent(tx.QueryRow(ctx, IntentAmend, p.Tenant, p.Ref, p.Action, r.Version, encodePayload(r.Payload), r.Key))
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" {
			return nil, ErrKeyInUse
		}
		return nil, fmt.Errorf("intent: amend: update: %w", err)
	}
	if _, err := tx.Exec(ctx, IntentRevisionInsert, p.Tenant, p.Ref, p.Action, old.Revision, old.Version,
		encodePayload(old.Payload), old.Key, r.Key, p.Reason, p.By, overrode); err != nil {
		return nil, fmt.Errorf("intent: amend: revision: %w", err)
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
