package agent

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/internal/backoff"
	"github.com/retrysafe/retrysafe/tools"
)

// RetryAfterTransport is an http.RoundTripper for the model API that
// honours what a 429 (or 503) says about when to try again: go-openai
// returns the error without its headers, so without this a caller can only
// guess. It reads retry-after-ms (milliseconds, OpenAI's) and Retry-After
// (seconds or an HTTP date), waits that long and sends the request again,
// up to MaxRetries times. A wait longer than MaxWait is not slept in the
// request: the 429 is returned, and the agent's job is snoozed for the
// wait instead of holding a worker (ModelError.RetryAfter).
//
// Put it in the go-openai client: config.HTTPClient = &http.Client{Transport: &RetryAfterTransport{}}.
type RetryAfterTransport struct {
	// Base sends the requests. Default: one transport shared by every
	// RetryAfterTransport without a Base, tools.NewTransport's, which keeps
	// an idle connection per concurrent call (net/http's default keeps two
	// per host: a model API on HTTP/1.1 would see a new TLS connection for
	// every call past the second at once).
	Base http.RoundTripper
	// MaxRetries bounds the waits per request. Default 2; negative: none
	// (the wait is still reported to the agent).
	MaxRetries int
	// MaxWait is the longest wait slept inside a request. Default 20s.
	MaxWait time.Duration
	// Sleep waits; tests inject one. Default: a timer, ended early by the
	// request's context.
	Sleep func(ctx context.Context, d time.Duration) error
	// Now is the clock an HTTP-date Retry-After is read against. Default
	// time.Now.
	Now func() time.Time
}

// defaultModelTransport is RetryAfterTransport's default Base.
var defaultModelTransport = tools.NewTransport()

// RoundTrip implements http.RoundTripper.
func (t *RetryAfterTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := t.Base
	if base == nil {
		base = defaultModelTransport
	}
	retries := t.MaxRetries
	if retries == 0 {
		retries = 2
	}
	maxWait := t.MaxWait
	if maxWait == 0 {
		maxWait = 20 * time.Second
	}
	sleep := t.Sleep
	if sleep == nil {
		sleep = backoff.Sleep
	}
	now := t.Now
	if now == nil {
		now = time.Now
	}
	for attempt := 0; ; attempt++ {
		resp, err := base.RoundTrip(req)
		if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
			return resp, err
		}
		wait, ok := RetryAfter(resp.Header, now())
		if !ok {
			return resp, nil
		}
		if h := hintFrom(req.Context()); h != nil {
			h.set(wait)
		}
		if attempt >= retries || wait > maxWait || (req.Body != nil && req.GetBody == nil) {
			return resp, nil
		}
		// The answer is not used: read it to reuse the connection.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err := sleep(req.Context(), wait); err != nil {
			return nil, err
		}
		next := req.Clone(req.Context())
		if req.GetBody != nil {
			if next.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		req = next
	}
}

// RetryAfter reads when to try again from a response's headers:
// retry-after-ms first (finer), then Retry-After in seconds or as an HTTP
// date. ok is false when neither says.
func RetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e9 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 && secs < 1e7 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// retryHint carries the last Retry-After the transport saw back to the
// agent, through the request's context.
type retryHint struct {
	mu   sync.Mutex
	wait time.Duration
}

func (h *retryHint) set(d time.Duration) {
	h.mu.Lock()
	h.wait = d
	h.mu.Unlock()
}

func (h *retryHint) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wait
}

type hintKey struct{}

func withHint(ctx context.Context, h *retryHint) context.Context {
	return context.WithValue(ctx, hintKey{}, h)
}

func hintFrom(ctx context.Context) *retryHint {
	h, _ := ctx.Value(hintKey{}).(*retryHint)
	return h
}
