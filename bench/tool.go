package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

// provider is the local no-op HTTP tool every contender calls: it honours
// Idempotency-Key the way a payment provider does (the first answer under a
// key is stored and replayed), does no other work, and counts the requests
// under each key so that a benchmark can tell how often a side effect was
// attempted twice.
//
// It remembers every key for its life, which for a kept pool (the scale
// pair) is every operation of the warm-up and the rounds: hundreds of
// thousands of keys in the benchmark's own process. Kept as strings with
// their answers, they were a heap the garbage collector marked again every
// cycle (at the 10M point a live heap of 127 to 209 MB, more than half of
// it theirs in a 1M point's profile, and a mark phase of 237 to 788 ms
// every 1.4 to 2 s; 2026-12-07), CPU taken from whichever slice a cycle
// fell in: a third of the slices, on either side, ran at two thirds of the
// others' rate.
// A key is therefore kept as its SHA-256 prefix and the answer as its
// sequence number, in a map without pointers, which the collector does
// not scan.
type provider struct {
	srv    *httptest.Server
	client *http.Client
	seq    atomic.Int64
	calls  atomic.Int64

	mu    sync.Mutex
	byKey map[keyHash]keyRecord
}

// keyHash stands for an Idempotency-Key: 128 bits of its SHA-256, so that
// two keys of a run do not share one.
type keyHash [16]byte

func hashKey(key string) keyHash {
	sum := sha256.Sum256([]byte(key))
	return keyHash(sum[:16])
}

// keyRecord is what the provider keeps of a key: no pointers (see provider).
type keyRecord struct {
	seq   int64 // the charge's number, its answer's id
	calls int   // requests under this key
}

// answer is the body of the charge numbered seq.
func answer(seq int64) []byte {
	return fmt.Appendf(nil, `{"id":"ch_%d","status":"paid"}`, seq)
}

func newProvider() *provider {
	p := &provider{byKey: map[keyHash]keyRecord{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	// Keep-alive with room for every caller: a benchmark measures the
	// runtime, not TCP handshakes.
	p.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute,
	}}
	return p
}

func (p *provider) Close() {
	p.client.CloseIdleConnections()
	p.srv.Close()
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	if r.Method != http.MethodPost || key == "" {
		http.Error(w, `{"error":"POST with Idempotency-Key"}`, http.StatusBadRequest)
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	p.calls.Add(1)
	h := hashKey(key)
	p.mu.Lock()
	if rec, ok := p.byKey[h]; ok {
		rec.calls++
		p.byKey[h] = rec
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		_, _ = w.Write(answer(rec.seq))
		return
	}
	seq := p.seq.Add(1)
	p.byKey[h] = keyRecord{seq: seq, calls: 1}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(answer(seq))
}

// charge posts body under key and returns the provider's answer.
func (p *provider) charge(ctx context.Context, key string, body []byte) (json.RawMessage, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.srv.URL+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return nil, tools.Definitive("request", "bad request", err)
	}
	req.Header.Set("Idempotency-Key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, tools.Uncertain("transport", "provider unreachable", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, tools.Uncertain("read", "provider answer cut", err)
	}
	if resp.StatusCode >= 300 {
		return nil, tools.StatusError(resp.StatusCode)
	}
	return out, nil
}

// duplicates is how many requests went beyond the first under each key, in
// total, and how many keys received more than one.
func (p *provider) duplicates() (extra, keys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range p.byKey {
		if r.calls > 1 {
			extra += r.calls - 1
			keys++
		}
	}
	return extra, keys
}

// toolName is the benchmark tool's action.
const toolName = "bench.charge"

// toolSchema: a customer, an amount in cents and the intent_ref, like a
// Pix charge without the Pix key.
func toolSchema() derive.Schema {
	return derive.Schema{Action: toolName, Version: 2, Fields: []derive.Field{
		{Name: "customer_id", Rule: derive.RuleText},
		{Name: "amount", Rule: derive.RuleMoney},
		{Name: tools.RefField, Rule: derive.RuleRef},
	}}
}

// toolTimer records when the tool was called inside one execution, so that
// the latency a runtime adds can be told from the provider's.
type toolTimer struct {
	mu   sync.Mutex
	span toolSpan
}

func (t *toolTimer) add(s toolSpan) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.span.start.IsZero() {
		t.span.start = s.start
	}
	t.span.end = s.end
	t.span.in += s.in
}

func (t *toolTimer) get() toolSpan {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.span
}

type timerKey struct{}

func withTimer(ctx context.Context, t *toolTimer) context.Context {
	return context.WithValue(ctx, timerKey{}, t)
}

func timed(ctx context.Context, f func() (json.RawMessage, error)) (json.RawMessage, error) {
	t0 := time.Now()
	out, err := f()
	if t, ok := ctx.Value(timerKey{}).(*toolTimer); ok {
		t.add(span(t0))
	}
	return out, err
}

// tool is the provider as a retrysafe tool (a tools.Func): the frozen key
// goes out as Idempotency-Key, the frozen payload as the body.
func (p *provider) tool() *tools.Func {
	return &tools.Func{
		ToolName: toolName, ToolDescription: "benchmark charge (no-op provider)",
		Fields: toolSchema(), HonoursKey: true,
		Exec: func(ctx context.Context, key string, payload derive.Payload) (json.RawMessage, error) {
			body, err := payload.MarshalJSON()
			if err != nil {
				return nil, tools.Definitive("encode", "payload", err)
			}
			return timed(ctx, func() (json.RawMessage, error) { return p.charge(ctx, key, body) })
		},
	}
}
