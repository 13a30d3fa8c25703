// Package toolstest provides an in-process stand-in for the providers that
// the built-in tools call: a Pix PSP (and WhatsApp/e-mail endpoints of the
// same shape) that honours Idempotency-Key the way a real provider does, with
// fault injection and counters. It is for tests; it imports only the
// standard library.
package toolstest

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what the provider does to one request.
type Fault int

// Faults.
const (
	// None: behave.
	None Fault = iota
	// FailBefore: answer 500 without acting.
	FailBefore
	// DropAfter: act (record the charge), then close the connection
	// without answering.
	DropAfter
	// Slow: wait Provider.SlowDelay, then act and answer (the client has
	// usually given up by then).
	Slow
	// Reject: answer 422 without acting.
	Reject
	// RateLimit: answer 429 without acting.
	RateLimit
)

// Request describes one create request to a FaultFunc.
type Request struct {
	Path string
	Key  string
	N    int // 1 for the first request with this key, 2 for the second...
	Body map[string]any
}

// FaultFunc picks the fault for a request.
type FaultFunc func(r Request) Fault

// Provider is the fake. Create it with NewProvider; close it with Close.
type Provider struct {
	*httptest.Server
	// Token, when set, is required as "Authorization: Bearer <Token>".
	Token string
	// SlowDelay is how long a Slow request waits. Default 2s.
	SlowDelay time.Duration

	mu       sync.Mutex
	records  map[string]*record // path + " " + key
	inflight map[string]bool
	perKey   map[string]int
	fault    FaultFunc
	seq      int
	requests atomic.Int64
	replays  atomic.Int64

	// LookupDown, when true, answers every lookup 503: the provider
	// cannot be asked, so an uncertain outcome stays uncertain.
	LookupDown atomic.Bool
}

type record struct {
	path        string
	fingerprint [32]byte
	body        []byte // the stored response
}

// NewProvider starts the fake on a local port.
func NewProvider() *Provider {
	p := &Provider{
		SlowDelay: 2 * time.Second,
		records:   map[string]*record{},
		inflight:  map[string]bool{},
		perKey:    map[string]int{},
	}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	return p
}

// SetFault installs f (nil: no faults).
func (p *Provider) SetFault(f FaultFunc) {
	p.mu.Lock()
	p.fault = f
	p.mu.Unlock()
}

// Count is the number of distinct actions (charges, messages) recorded
// under path ("" for all paths).
func (p *Provider) Count(path string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, r := range p.records {
		if path == "" || r.path == path {
			n++
		}
	}
	return n
}

// CountKey is 1 when an action is recorded under key, else 0.
func (p *Provider) CountKey(key string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k := range p.records {
		if strings.HasSuffix(k, " "+key) {
			n++
		}
	}
	return n
}

// Records returns the stored responses under path, ordered by id.
func (p *Provider) Records(path string) []map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []map[string]any
	for _, r := range p.records {
		if path != "" && r.path != path {
			continue
		}
		var m map[string]any
		_ = json.Unmarshal(r.body, &m)
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]["id"]) < fmt.Sprint(out[j]["id"]) })
	return out
}

// Requests is the number of create requests received.
func (p *Provider) Requests() int64 { return p.requests.Load() }

// Replays is the number of create requests answered from a stored record.
func (p *Provider) Replays() int64 { return p.replays.Load() }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (p *Provider) serve(w http.ResponseWriter, r *http.Request) {
	if p.Token != "" && r.Header.Get("Authorization") != "Bearer "+p.Token {
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
		return
	}
	switch r.Method {
	case http.MethodGet:
		p.lookup(w, r)
	case http.MethodPost:
		p.create(w, r)
	default:
		writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "method"})
	}
}

func (p *Provider) lookup(w http.ResponseWriter, r *http.Request) {
	if p.LookupDown.Load() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "lookup unavailable"})
		return
	}
	key := r.URL.Query().Get("idempotency_key")
	p.mu.Lock()
	rec := p.records[r.URL.Path+" "+key]
	p.mu.Unlock()
	if rec == nil {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "not_found"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rec.body)
}

func (p *Provider) create(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	key := r.Header.Get("Idempotency-Key")
	if key == "" || len(key) > 255 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "Idempotency-Key required"})
		return
	}
	var raw bytes.Buffer
	if _, err := raw.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20)); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "body"})
		return
	}
	var body map[string]any
	if err := json.Unmarshal(raw.Bytes(), &body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "json"})
		return
	}
	fp := sha256.Sum256(raw.Bytes())
	id := r.URL.Path + " " + key

	p.mu.Lock()
	p.perKey[id]++
	n := p.perKey[id]
	if rec := p.records[id]; rec != nil {
		p.mu.Unlock()
		if rec.fingerprint != fp {
			writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "idempotency key reused with another request"})
			return
		}
		p.replays.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(rec.body)
		return
	}
	if p.inflight[id] {
		p.mu.Unlock()
		writeJSON(w, http.StatusConflict, map[string]string{"error": "a request with this key is in flight"})
		return
	}
	fault := None
	if p.fault != nil {
		fault = p.fault(Request{Path: r.URL.Path, Key: key, N: n, Body: body})
	}
	switch fault {
	case FailBefore:
		p.mu.Unlock()
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "internal"})
		return
	case Reject:
		p.mu.Unlock()
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": "rejected"})
		return
	case RateLimit:
		p.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "slow down"})
		return
	}
	if msg := validate(r.URL.Path, body); msg != "" {
		p.mu.Unlock()
		writeJSON(w, http.StatusUnprocessableEntity, map[string]string{"error": msg})
		return
	}
	p.inflight[id] = true
	p.mu.Unlock()

	if fault == Slow {
		time.Sleep(p.SlowDelay)
	}

	p.mu.Lock()
	p.seq++
	resp := map[string]any{
		"id":              fmt.Sprintf("ch_%06d", p.seq),
		"idempotency_key": key,
		"created":         time.Now().UTC().Format(time.RFC3339Nano),
	}
	for k, v := range body {
		resp[k] = v
	}
	if strings.Contains(r.URL.Path, "pix") {
		resp["status"] = "paid"
	} else {
		resp["status"] = "sent"
	}
	stored, _ := json.Marshal(resp)
	p.records[id] = &record{path: r.URL.Path, fingerprint: fp, body: stored}
	delete(p.inflight, id)
	p.mu.Unlock()

	if fault == DropAfter {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(stored)
}

func validate(path string, body map[string]any) string {
	if !strings.Contains(path, "pix") {
		return ""
	}
	amt, ok := body["amount_cents"].(float64)
	if !ok || amt <= 0 || amt != float64(int64(amt)) {
		return "amount_cents must be a positive integer"
	}
	if s, _ := body["pix_key"].(string); s == "" {
		return "pix_key required"
	}
	return ""
}
