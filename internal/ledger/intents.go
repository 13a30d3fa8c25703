package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Durable makes db's transaction commit synchronously whatever the
// session says (intentDurable): the first statement of an amendment.
func Durable(ctx context.Context, db DBTX) error {
	_, err := db.Exec(ctx, intentDurable)
	return err
}

// IntentGet reads id's intent; ErrNotFound when there is none.
func IntentGet(ctx context.Context, db DBTX, id ID) (*Intent, error) {
	return oneIntent(db.QueryRow(ctx, intentGet, id.Tenant, id.Ref, id.Action))
}

// IntentGetByKey reads the tenant's intent frozen under key; ErrNotFound
// when there is none.
func IntentGetByKey(ctx context.Context, db DBTX, tenant, key string) (*Intent, error) {
	return oneIntent(db.QueryRow(ctx, intentGetByKey, tenant, key))
}

// IntentLock reads id's intent and locks it (FOR UPDATE) for the rest of
// db's transaction; ErrNotFound when there is none.
func IntentLock(ctx context.Context, db DBTX, id ID) (*Intent, error) {
	return oneIntent(db.QueryRow(ctx, intentLock, id.Tenant, id.Ref, id.Action))
}

// IntentAmend writes row's rules version, payload and key into the intent
// row.ID names (row.SourceRef is not written), counts the revision, and
// returns the row as written. Another intent of the tenant holding the key
// fails it (IsUniqueViolation).
func IntentAmend(ctx context.Context, db DBTX, row *NewIntent) (*Intent, error) {
	return oneIntent(db.QueryRow(ctx, intentAmend, row.Tenant, row.Ref, row.Action, row.Version, encodePayload(row.Payload), row.Key))
}

// IntentRefsByKeyPrefix returns the refs of the tenant's intents of action
// whose key starts with prefix, at most two (enough to tell one from
// several). Keys are 64 hex digits: a longer prefix finds nothing.
func IntentRefsByKeyPrefix(ctx context.Context, db DBTX, tenant, action, prefix string) ([]string, error) {
	pad := 64 - len(prefix)
	if pad < 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, intentRefsByKeyPrefix, tenant,
		prefix+strings.Repeat("0", pad), prefix+strings.Repeat("f", pad), len(prefix), prefix, action)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

func oneIntent(row pgx.Row) (*Intent, error) {
	in, err := scanIntent(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	return in, err
}

// RevisionInsert records the amendment that replaced old (revision
// old.Revision) with newKey.
func RevisionInsert(ctx context.Context, db DBTX, old *Intent, newKey, reason, by, overrode string) error {
	_, err := db.Exec(ctx, intentRevisionInsert, old.Tenant, old.Ref, old.Action, old.Revision, old.Version,
		encodePayload(old.Payload), old.Key, newKey, reason, by, overrode)
	return err
}

// RevisionList lists id's amendments, oldest first.
func RevisionList(ctx context.Context, db DBTX, id ID) ([]Revision, error) {
	rows, err := db.Query(ctx, intentRevisionList, id.Tenant, id.Ref, id.Action)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Revision
	for rows.Next() {
		var (
			r   Revision
			raw []byte
		)
		if err := rows.Scan(&r.Revision, &r.OldVersion, &raw, &r.OldKey, &r.NewKey, &r.Reason, &r.AmendedBy, &r.Overrode, &r.CreatedAt); err != nil {
			return nil, err
		}
		if r.OldPayload, err = decodePayload(raw); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// ActionSupersede blocks key, the key an amendment of id's intent (at
// revision) replaces, with a tombstone action (status failed, error class
// SupersededClass) unless an action is already there, and returns the
// status of the action under key as a new statement sees it: a claim
// racing the amendment either conflicts with the tombstone or is seen
// here, committed.
func ActionSupersede(ctx context.Context, db DBTX, id ID, key string, revision int) (status string, err error) {
	tomb, _ := json.Marshal(map[string]any{
		"class":   SupersededClass,
		"code":    "amended",
		"message": fmt.Sprintf("intent amended (revision %d replaced)", revision),
	})
	if _, err := db.Exec(ctx, actionTombstoneInsert, id.Tenant, key, id.Ref, id.Action, string(tomb)); err != nil {
		return "", fmt.Errorf("tombstone: %w", err)
	}
	// A new statement: sees a claim committed while the insert above waited.
	if err := db.QueryRow(ctx, actionStatusGet, id.Tenant, key).Scan(&status); err != nil {
		return "", fmt.Errorf("action status: %w", err)
	}
	return status, nil
}

// ActionUnsupersede lifts the tombstone under the tenant's key, if there
// is one: an amendment returns to a key an earlier one superseded.
func ActionUnsupersede(ctx context.Context, db DBTX, tenant, key string) error {
	_, err := db.Exec(ctx, actionTombstoneDelete, tenant, key)
	return err
}

// IsUniqueViolation reports whether err is PostgreSQL's unique_violation
// (IntentAmend onto a key another intent holds).
func IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}
