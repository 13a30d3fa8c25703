package restarttest

import (
	"bytes"
	"context"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// faultHeader selects the sandbox PSP's faults for one request (see
// sandbox/fault; spelled out here because only cmd/ and tests import
// sandbox/).
const faultHeader = "X-Sandbox-Fault"

// pspProxy stands between one worker process and the sandbox PSP. Each
// armed worker gets its own, so the proxy knows which process it serves:
//
//   - it kills that worker inside a provider call: the PSP has charged and
//     answered, the answer is in the proxy, the worker is waiting for it
//     (the "provider-call" crash point, which no failpoint inside the
//     worker can reach: the worker is blocked reading the socket);
//   - it asks the PSP for faults on that worker's charge requests through
//     the PSP's own X-Sandbox-Fault header (500, dropped answer, slow
//     answer, delay), so that faults hit one batch and not the redelivery.
//
// Everything else passes through unchanged: the PSP sees the worker's
// Idempotency-Key and logs it as the worker sent it.
type pspProxy struct {
	target string
	ln     net.Listener
	srv    *http.Server
	client *http.Client

	mu        sync.Mutex
	rng       *rand.Rand
	fault     string   // X-Sandbox-Fault for charge POSTs; "" none
	mix       []string // else one of these, drawn per request (the soak)
	faultRate float64  // share of charge POSTs after the first that get it
	killAt    int      // kill the worker on this answered charge POST (1 = first); 0 never
	kill      func()   // SIGKILLs the worker and waits for its exit
	posts     int
	injected  int
	killed    bool
	// failFirstRefund: the proxy stands before serve's sidecar and fails
	// the first PUT of each refund (503, the PSP does nothing), so that
	// the refund is left to the workers' reconcilers.
	failFirstRefund bool
	refundsSeen     map[string]bool
}

func newPSPProxy(target string, seed uint64) (*pspProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &pspProxy{
		target: strings.TrimRight(target, "/"),
		ln:     ln,
		rng:    rand.New(rand.NewPCG(seed, 0x70726f7879)),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}},
	}
	// Aborted answers are the point; net/http need not log them.
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go p.srv.Serve(ln) //nolint:errcheck // ends with Close
	return p, nil
}

// configure sets what the proxy does to its worker's charge requests,
// before the worker starts.
func (p *pspProxy) configure(fault string, rate float64, killAt int, kill func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.faultRate, p.killAt, p.kill = fault, rate, killAt, kill
}

// configureMix makes the proxy ask for one of faults, drawn per charge
// request, on a share rate of them (the first always).
func (p *pspProxy) configureMix(faults []string, rate float64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mix, p.faultRate = faults, rate
}

// URL is what the worker gets as RETRYSAFE_PSP_URL.
func (p *pspProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy (its worker is dead or done by then).
func (p *pspProxy) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	p.srv.Shutdown(ctx) //nolint:errcheck // Close below covers a timeout
	p.srv.Close()       //nolint:errcheck
	p.client.CloseIdleConnections()
}

// stats reports charge POSTs seen, faults asked for, and whether the
// proxy killed its worker.
func (p *pspProxy) stats() (posts, injected int, killed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.posts, p.injected, p.killed
}

// hopHeaders are connection-level headers a proxy does not forward.
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (p *pspProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	// The worker's context: a worker that dies (or gives up) cancels the
	// request to the PSP, as its own socket closing would.
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	out.Header = r.Header.Clone()
	for _, h := range hopHeaders {
		out.Header.Del(h)
	}
	refund := r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/pix/") && strings.Contains(r.URL.Path, "/devolucao/")
	charge := r.Method == http.MethodPost && r.URL.Path == "/v1/pix/charges" ||
		r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/api/cob/") || // API Pix
		refund
	if refund {
		p.mu.Lock()
		first := p.failFirstRefund && !p.refundsSeen[r.URL.Path]
		if p.failFirstRefund {
			p.refundsSeen[r.URL.Path] = true
		}
		p.mu.Unlock()
		if first {
			out.Header.Set(faultHeader, "fail-before")
		}
	}

	killThis := false
	if charge {
		p.mu.Lock()
		p.posts++
		// The first charge always gets the fault (a scenario is never
		// left untested by the dice), later ones at faultRate.
		fault := p.fault
		if len(p.mix) > 0 {
			fault = p.mix[p.rng.IntN(len(p.mix))]
		}
		if fault != "" && (p.injected == 0 || p.rng.Float64() < p.faultRate) {
			out.Header.Set(faultHeader, fault)
			p.injected++
		}
		killThis = p.killAt > 0 && p.posts >= p.killAt && !p.killed && p.kill != nil
		p.mu.Unlock()
	}
	resp, err := p.client.Do(out)
	if err != nil {
		// The PSP dropped the connection (drop-after) or the worker went
		// away: the worker must see a dropped connection too.
		panic(http.ErrAbortHandler)
	}
	defer resp.Body.Close()
	respBody, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	if killThis && resp.StatusCode < 300 {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
		// The charge exists and its answer is here; the worker never gets
		// it: it dies waiting.
		p.kill()
		panic(http.ErrAbortHandler)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	for _, h := range hopHeaders {
		w.Header().Del(h)
	}
	w.WriteHeader(resp.StatusCode)
	w.Write(respBody) //nolint:errcheck // the worker may be gone
}
