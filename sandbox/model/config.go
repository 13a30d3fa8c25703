package model

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// DefaultModel is the model id the server reports when a request names none.
const DefaultModel = "retrysafe-sandbox-billing-1"

// DefaultWrongAmountRate is the command's default: often enough that a demo
// with a few dozen conversations shows a divergent re-extraction.
const DefaultWrongAmountRate = 0.1

// maxLatency bounds Config.Latency: a sandbox that sleeps for an hour is a
// typo, not a test.
const maxLatency = 10 * time.Minute

// Config configures a Server.
//
// The zero Config is a well-behaved model: answers vary in spelling only,
// never in value, and nothing fails. DefaultConfig is the command's
// default, with wrong amounts switched on.
type Config struct {
	// Seed makes every answer reproducible: the n-th identical request
	// gets the same answer for the same seed, however other conversations
	// interleave with it. 0 picks a random seed (Server.Seed reports it).
	Seed int64
	// WrongAmountRate is the probability that a tool call carries a wrong
	// amount (a misreading, not a spelling).
	WrongAmountRate float64
	// MalformedRate is the probability that a tool call's arguments are
	// not valid JSON.
	MalformedRate float64
	// UnknownToolRate is the probability that a tool call names a
	// function the request did not offer.
	UnknownToolRate float64
	// FailRate is the probability of answering 429 or 500 (half each)
	// instead of a completion. Failed calls use no tokens.
	FailRate float64
	// ParallelRate is the probability that a tool-calling answer calls
	// the function twice in one message (parallel tool calls, the second
	// spelled differently), as real models do; a request with
	// parallel_tool_calls: false never gets one.
	ParallelRate float64
	// RetryAfter is what a 429 says to wait (Retry-After in whole seconds,
	// rounded up, and retry-after-ms). Default 1s.
	RetryAfter time.Duration
	// Latency is how long an answer takes, ±50% per call.
	Latency time.Duration
	// Model is reported when a request names no model; default DefaultModel.
	Model string
	// APIKey, when set, is the only bearer token accepted. Empty accepts
	// any caller, as local stand-ins usually do.
	APIKey string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// DefaultConfig is the configuration `retrysafe sandbox model` starts from.
func DefaultConfig() Config {
	return Config{WrongAmountRate: DefaultWrongAmountRate, Model: DefaultModel}
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	for _, r := range []struct {
		name string
		v    float64
	}{{"WrongAmountRate", c.WrongAmountRate}, {"MalformedRate", c.MalformedRate}, {"UnknownToolRate", c.UnknownToolRate}, {"FailRate", c.FailRate}, {"ParallelRate", c.ParallelRate}} {
		if !(r.v >= 0 && r.v <= 1) {
			return fmt.Errorf("model: %s %v outside 0..1", r.name, r.v)
		}
	}
	if c.Latency < 0 || c.Latency > maxLatency {
		return fmt.Errorf("model: Latency %v outside 0..%v", c.Latency, maxLatency)
	}
	if c.RetryAfter < 0 || c.RetryAfter > maxLatency {
		return fmt.Errorf("model: RetryAfter %v outside 0..%v", c.RetryAfter, maxLatency)
	}
	if len(c.Model) > 256 {
		return errors.New("model: Model name too long")
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Model == "" {
		c.Model = DefaultModel
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = time.Second
	}
	return c
}
