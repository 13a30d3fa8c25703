package toolstest

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// Rounds is for tests of how a client keeps its connections: Hold keeps
// each request at the server until all N of its round have arrived, so
// that N connections are in use at once, and ConnState, as a server's
// http.Server.ConnState, counts the connections the server accepted.
type Rounds struct {
	n       int64
	arrived atomic.Int64
	opened  atomic.Int64

	mu      sync.Mutex
	release map[int64]chan struct{}
}

// NewRounds returns Rounds of n requests each.
func NewRounds(n int) *Rounds {
	return &Rounds{n: int64(n), release: map[int64]chan struct{}{}}
}

// Hold wraps h: each request that only accepts (every request when only
// is nil) waits until its round is complete, then goes on to h.
func (r *Rounds) Hold(h http.Handler, only func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if only == nil || only(req) {
			k := r.arrived.Add(1)
			ch := r.round((k - 1) / r.n)
			if k%r.n == 0 {
				close(ch)
			}
			<-ch
		}
		h.ServeHTTP(w, req)
	})
}

func (r *Rounds) round(i int64) chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	ch := r.release[i]
	if ch == nil {
		ch = make(chan struct{})
		r.release[i] = ch
	}
	return ch
}

// ConnState counts new connections; set it as http.Server.ConnState.
func (r *Rounds) ConnState(_ net.Conn, s http.ConnState) {
	if s == http.StateNew {
		r.opened.Add(1)
	}
}

// Opened is how many connections the server has accepted.
func (r *Rounds) Opened() int64 { return r.opened.Load() }
