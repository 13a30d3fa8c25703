package idempotency

import (
	"cmp"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// Defaults applied by Config.WithDefaults to zero fields.
const (
	DefaultLease          = 30 * time.Second
	DefaultRetention      = 24 * time.Hour
	DefaultLockTimeout    = 100 * time.Millisecond
	DefaultRetryAfter     = 1 * time.Second
	DefaultMaxBodyBytes   = 1 << 20
	DefaultPurgeBatch     = 1000
	DefaultPurgeEvery     = time.Minute
	DefaultPollInterval   = 20 * time.Millisecond
	DefaultLostWriteRetry = 10 * time.Second

	// MaxKeyLength is the longest accepted Idempotency-Key, in characters
	// (keys are ASCII, so also in bytes). Stripe and most providers accept
	// 255; a longer key is refused rather than truncated, since truncation
	// could make two keys collide.
	MaxKeyLength = 255
)

// defaultStoreHeaders are the response headers that define what a client
// sees in an answer. Date, Content-Length and hop-by-hop headers are
// recomputed per response, and cookies are never replayed.
var defaultStoreHeaders = []string{
	"Cache-Control",
	"Content-Disposition",
	"Content-Encoding",
	"Content-Language",
	"Content-Type",
	"ETag",
	"Last-Modified",
	"Link",
	"Location",
	"Retry-After",
}

// Config configures a Middleware. The zero value of each field means its
// default; Tenant is required.
type Config struct {
	// Tenant names the authenticated caller of a request. It is the first
	// part of a key's scope and must come from authentication, never from
	// the body. An error (or "") answers 401 without running anything.
	Tenant func(r *http.Request) (string, error)

	// Lease is how long a reservation-mode handler may run before another
	// request with the same key may take the key over and run the handler
	// again. It should exceed the handler's worst case; the handler's
	// context ends with the lease. Default 30s.
	Lease time.Duration

	// Retention is how long a finished key is kept after its answer was
	// stored. It should exceed the longest time a client may retry (the
	// redelivery horizon of every upstream). Default 24h; never less than
	// Lease.
	Retention time.Duration

	// LockTimeout bounds how long a duplicate of an uncommitted
	// transactional request waits on the first one's key (holding a
	// connection) before it is answered 409 or starts polling. Default
	// 100ms.
	LockTimeout time.Duration

	// RetryAfter is the Retry-After given with 409 answers. Default 1s
	// (rounded up to whole seconds on the wire).
	RetryAfter time.Duration

	// PollInterval is the first pause between polls of a route with Wait;
	// it doubles up to 16 times this value. Default 20ms.
	PollInterval time.Duration

	// MaxBodyBytes caps the request body the middleware reads to
	// fingerprint it; a larger body answers 413. Default 1 MiB.
	MaxBodyBytes int64

	// StoreHeaders adds response headers to store and replay, beyond
	// Cache-Control, Content-Disposition, Content-Encoding,
	// Content-Language, Content-Type, ETag, Last-Modified, Link, Location
	// and Retry-After.
	StoreHeaders []string

	// PurgeBatch is the most rows one purge statement deletes. Default 1000.
	PurgeBatch int

	// PurgeEvery is RunPurger's pause between purges. Default 1m.
	PurgeEvery time.Duration

	// Logger receives problems that cannot be reported to the client (a
	// response that could not be stored). Default slog.Default().
	Logger *slog.Logger

	// LostWriteRetry is how long a write lost with its connection after
	// it was sent (a reservation, an answer, the end of a lease) is sent
	// again while the database cannot be reached (no connection can be
	// made, or the server says it is starting up, shutting down or
	// full), and how long a transactional request whose COMMIT was lost
	// waits to read what the COMMIT left; the client waits for its
	// answer meanwhile. Then the request is answered 503 (a reservation,
	// a commit whose outcome is unknown) or its answer goes unstored,
	// the key's lease ending it. Set it to how long the database's
	// restart or failover takes, bounded by what clients wait. Default
	// 10s.
	LostWriteRetry time.Duration

	// OnLostWrite, when set, hears each of the middleware's writes whose
	// connection was lost after it was sent (so that it may have
	// committed or not), once sending it again, or reading what it left,
	// has ended: for a metric or an alert, since each is a request that
	// was nearest to not knowing what it did. It runs on the request's
	// goroutine before the answer is sent, so it must be quick.
	OnLostWrite func(LostWrite)

	// OnInFlight, when set, hears each time a request finds its key held
	// by an unfinished request with the same fingerprint: before it is
	// answered 409, or before each pause of a route that waits
	// (Route.Wait). For a metric of how often clients retry while the
	// first request still runs (a client timeout shorter than the
	// handler's, a retry storm). It runs on the request's goroutine, so it
	// must be quick.
	OnInFlight func(InFlight)
}

// InFlight is a request that found its key's first request unfinished.
type InFlight struct {
	// Operation is the route's (Route.Operation).
	Operation string
	// Round counts the request's tries of the key, from 1.
	Round int
	// Waiting is true when the request waits and polls again (the route's
	// Route.Wait is not spent), false when it is answered 409.
	Waiting bool
}

// The writes a LostWrite names.
const (
	WriteReservation = "reservation" // a reservation-mode request's claim of its key
	WriteAnswer      = "answer"      // a reservation-mode answer stored under the key
	WriteRelease     = "release"     // a reservation-mode lease ended without an answer
	WriteCommit      = "commit"      // a transactional request's COMMIT (answer and effects)
)

// LostWrite is a write lost with its connection, and how sending it again
// ended.
type LostWrite struct {
	// Operation is the route's (Route.Operation).
	Operation string
	// Write is WriteReservation, WriteAnswer, WriteRelease or WriteCommit.
	Write string
	// Attempt is the attempt the write was for; 0 for a reservation,
	// whose attempt was in the answer that was lost.
	Attempt int32
	// Lost is what the first send ended in.
	Lost error
	// Err is what the last send again ended in: nil, it got through (for
	// a commit: what the commit left was read, committed or not);
	// otherwise the request was answered 503 (a reservation, a commit
	// whose outcome is unknown) or its answer went unstored.
	Err error
	// Sends counts the sends after the loss; Elapsed runs from the loss
	// to the last one's end.
	Sends   int
	Elapsed time.Duration
}

// WithDefaults returns a copy of c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	c.Lease = cmp.Or(c.Lease, DefaultLease)
	c.Retention = cmp.Or(c.Retention, max(DefaultRetention, c.Lease))
	c.LockTimeout = cmp.Or(c.LockTimeout, DefaultLockTimeout)
	c.RetryAfter = cmp.Or(c.RetryAfter, DefaultRetryAfter)
	c.PollInterval = cmp.Or(c.PollInterval, DefaultPollInterval)
	c.MaxBodyBytes = cmp.Or(c.MaxBodyBytes, DefaultMaxBodyBytes)
	c.PurgeBatch = cmp.Or(c.PurgeBatch, DefaultPurgeBatch)
	c.PurgeEvery = cmp.Or(c.PurgeEvery, DefaultPurgeEvery)
	c.LostWriteRetry = cmp.Or(c.LostWriteRetry, DefaultLostWriteRetry)
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

// Validate reports the first invalid field of c (after defaults) as a
// *ConfigError.
func (c Config) Validate() error {
	switch {
	case c.Tenant == nil:
		return &ConfigError{Field: "Tenant", Reason: "is required: the key scope's tenant must come from authentication"}
	case c.Lease < 10*time.Millisecond:
		return &ConfigError{Field: "Lease", Reason: fmt.Sprintf("%v is below 10ms", c.Lease)}
	case c.Retention < c.Lease:
		return &ConfigError{Field: "Retention", Reason: fmt.Sprintf("%v is less than the lease %v: a running key could be purged", c.Retention, c.Lease)}
	case c.LockTimeout < time.Millisecond:
		return &ConfigError{Field: "LockTimeout", Reason: "must be at least 1ms (0 would let a duplicate wait forever)"}
	case c.RetryAfter <= 0:
		return &ConfigError{Field: "RetryAfter", Reason: "must be positive"}
	case c.PollInterval <= 0:
		return &ConfigError{Field: "PollInterval", Reason: "must be positive"}
	case c.MaxBodyBytes <= 0:
		return &ConfigError{Field: "MaxBodyBytes", Reason: "must be positive"}
	case c.PurgeBatch <= 0:
		return &ConfigError{Field: "PurgeBatch", Reason: "must be positive"}
	case c.PurgeEvery <= 0:
		return &ConfigError{Field: "PurgeEvery", Reason: "must be positive"}
	case c.LostWriteRetry <= 0:
		return &ConfigError{Field: "LostWriteRetry", Reason: "must be positive"}
	}
	for _, h := range c.StoreHeaders {
		if h == "" || strings.ContainsAny(h, " :\r\n") {
			return &ConfigError{Field: "StoreHeaders", Reason: fmt.Sprintf("%q is not a header name", h)}
		}
	}
	return nil
}

// Policy describes the retention and lease policy in words, for --help
// output and logs.
func (c Config) Policy() string {
	c = c.WithDefaults()
	return fmt.Sprintf("Idempotency keys are scoped by (tenant, operation, key) and kept %v after their "+
		"answer is stored; an expired key is treated as new, and a purge deletes expired keys every %v "+
		"in batches of %d. A reservation-mode request that dies is taken over by the next request with "+
		"its key after a lease of %v (the route's handler then runs again and must tolerate it). "+
		"Retention is never shorter than the lease.",
		c.Retention, c.PurgeEvery, c.PurgeBatch, c.Lease)
}

func (c Config) storeHeaderSet() map[string]bool {
	set := make(map[string]bool, len(defaultStoreHeaders)+len(c.StoreHeaders))
	for _, h := range defaultStoreHeaders {
		set[http.CanonicalHeaderKey(h)] = true
	}
	for _, h := range c.StoreHeaders {
		set[http.CanonicalHeaderKey(h)] = true
	}
	return set
}
