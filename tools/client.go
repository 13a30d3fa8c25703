package tools

import (
	"net/http"
	"time"
)

// MaxIdleConnsPerHost is how many idle connections to one provider
// NewClient's transport keeps. net/http's default keeps two, so a third
// concurrent call to a provider closes its connection when it is done and
// the next one opens (and, over TLS, handshakes) a new one: under a few
// dozen concurrent executions that is a handshake per call.
const MaxIdleConnsPerHost = 32

// NewClient returns the HTTP client the built-in tools use when their
// configuration names none, on NewTransport, with no timeout of its own:
// the executor's context bounds each call (shorter than the lease), and a
// client timeout would cut a call that context still allows.
func NewClient() *http.Client {
	return &http.Client{Transport: NewTransport()}
}

// NewTransport is NewClient's transport, for a client that needs its own
// TLS settings (tools/apipix's mTLS): keep-alive with room for concurrent
// calls (MaxIdleConnsPerHost), the environment's proxy, a bounded TLS
// handshake.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		MaxIdleConns:          4 * MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   MaxIdleConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
}
