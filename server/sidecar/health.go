package sidecar

import (
	"context"
	"net/http"

	"github.com/retrysafe/retrysafe/migrations"
)

// Health is the body of /readyz.
type Health struct {
	Status     string `json:"status"` // ok or unavailable
	Database   string `json:"database"`
	Migrations struct {
		Schema  string `json:"schema"`
		Current int    `json:"current"`
		Latest  int    `json:"latest"`
	} `json:"migrations"`
	// Settings are the database's durability settings; Warnings what they
	// put at risk. fsync=off makes the sidecar not ready unless
	// Config.AllowUnsafeDatabase says the database is a throwaway.
	Settings *DatabaseSettings `json:"settings,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
}

// healthz says the process serves HTTP; it touches nothing, so an
// orchestrator does not restart a healthy process because PostgreSQL is
// down (readiness says that).
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz says the sidecar can answer executions: the database answers and
// its schema is at exactly the version this binary embeds (older: tables or
// columns missing; newer: a later binary migrated and this one may not
// understand the rows), and it does not run with fsync off (unless
// Config.AllowUnsafeDatabase). It reports the durability settings.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.ReadyTimeout)
	defer cancel()
	h := Health{Status: "ok", Database: "ok"}
	h.Migrations.Schema = s.cfg.Schema
	h.Migrations.Latest = migrations.Latest()
	if err := s.cfg.DB.Ping(ctx); err != nil {
		h.Status, h.Database = "unavailable", "unreachable"
		s.log.Warn("sidecar: not ready: database unreachable", "error", err)
	} else if v, err := migrations.Version(ctx, s.cfg.DB, s.cfg.Schema); err != nil {
		h.Status, h.Database = "unavailable", "error"
		s.log.Warn("sidecar: not ready: migration version unreadable", "error", err)
	} else {
		h.Migrations.Current = v
		if v != h.Migrations.Latest {
			h.Status = "unavailable"
		}
		if st, err := ReadDatabaseSettings(ctx, s.cfg.DB); err != nil {
			h.Status, h.Database = "unavailable", "error"
			s.log.Warn("sidecar: not ready: database settings unreadable", "error", err)
		} else {
			h.Settings, h.Warnings = &st, st.Warnings()
			if st.Check() != nil && !s.cfg.AllowUnsafeDatabase {
				h.Status, h.Database = "unavailable", "unsafe"
			}
		}
	}
	code := http.StatusOK
	if h.Status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, h)
}
