package stripe_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is an http.RoundTripper that keeps what stripe-go sent.
type recorder struct {
	mu   sync.Mutex
	reqs []sent
}

type sent struct {
	method, path, idemKey string
	query                 url.Values
	form                  url.Values
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	s := sent{method: req.Method, path: req.URL.Path, idemKey: req.Header.Get("Idempotency-Key"), query: req.URL.Query()}
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		_ = req.Body.Close()
		s.form, _ = url.ParseQuery(string(b))
		req.Body = io.NopCloser(strings.NewReader(string(b)))
	}
	r.mu.Lock()
	r.reqs = append(r.reqs, s)
	r.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (r *recorder) sent() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]sent(nil), r.reqs...)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}
