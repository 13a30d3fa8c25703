package sidecar

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// DatabaseSettings are the server settings a crash's losses depend on, as
// the sidecar's sessions see them (database and role defaults included).
type DatabaseSettings struct {
	// Fsync off: a crash of the server's machine (not only of PostgreSQL)
	// can lose or corrupt committed data, claims included. Nothing the
	// sidecar does makes up for it.
	Fsync string `json:"fsync"`
	// SynchronousCommit is the sessions' default. Claims and intent
	// freezes force it on for their own transactions whatever it says;
	// only successful completions run without waiting (see package
	// executor).
	SynchronousCommit string `json:"synchronous_commit"`
	// FullPageWrites off: a crash mid-write can leave torn pages.
	FullPageWrites string `json:"full_page_writes"`
	// SynchronousStandbyNames names the standbys a commit waits for;
	// empty with standbys attached means a failover can lose the latest
	// commits (claims among them).
	SynchronousStandbyNames string `json:"synchronous_standby_names"`
	// Standbys is how many standbys stream from this server.
	Standbys int `json:"standbys"`
}

// ErrUnsafeDatabase: the database runs with fsync off.
var ErrUnsafeDatabase = errors.New("sidecar: the database runs with fsync=off: a crash can lose committed claims")

const settingsQuery = `SELECT current_setting('fsync'), current_setting('synchronous_commit'),
	current_setting('full_page_writes'), current_setting('synchronous_standby_names'),
	(SELECT count(*) FROM pg_stat_replication)::int`

// ReadDatabaseSettings reads the settings on one of db's sessions.
func ReadDatabaseSettings(ctx context.Context, db DB) (DatabaseSettings, error) {
	var s DatabaseSettings
	err := db.QueryRow(ctx, settingsQuery).Scan(&s.Fsync, &s.SynchronousCommit, &s.FullPageWrites, &s.SynchronousStandbyNames, &s.Standbys)
	if err != nil {
		return s, fmt.Errorf("sidecar: read database settings: %w", err)
	}
	return s, nil
}

// Warnings lists what the settings put at risk, most serious first; nil
// when nothing. ErrUnsafeDatabase is for fsync alone: the rest lose at
// most what the design can recover from (see each field), or only on a
// failover.
func (s DatabaseSettings) Warnings() []string {
	var w []string
	if s.Fsync == "off" {
		w = append(w, "fsync=off: a machine crash can lose or corrupt committed claims")
	}
	if s.FullPageWrites == "off" {
		w = append(w, "full_page_writes=off: a crash mid-write can leave torn pages")
	}
	if s.Standbys > 0 && strings.TrimSpace(s.SynchronousStandbyNames) == "" {
		w = append(w, "standbys are asynchronous (synchronous_standby_names is empty): a failover can lose the latest commits, claims among them")
	}
	if s.SynchronousCommit == "off" || s.SynchronousCommit == "local" {
		w = append(w, "synchronous_commit="+s.SynchronousCommit+" by default: claims and freezes override it for themselves")
	}
	return w
}

// Check returns ErrUnsafeDatabase when fsync is off.
func (s DatabaseSettings) Check() error {
	if s.Fsync == "off" {
		return ErrUnsafeDatabase
	}
	return nil
}
