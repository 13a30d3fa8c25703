package agent

import (
	"crypto/rand"
	"encoding/hex"
)

// FailNaiveRandomKey is not a crash point: armed in RETRYSAFE_FAILPOINTS, it
// turns the worker into the deliberately broken control of `retrysafe
// restart-test --naive`. Every provider call then carries a fresh random
// Idempotency-Key instead of the frozen one — the bug retrysafe exists to
// prevent (a key drawn inside the attempt) — so that the restart test can
// show that it catches duplicate charges when they happen. The action row,
// the intent and Lookup still use the frozen key, exactly as a runtime that
// froze the intent but let the HTTP client draw its own key would.
//
// Only the restart test arms it; unarmed (every normal process) the tool
// wrapper passes the frozen key through untouched.
const FailNaiveRandomKey = "agent.naive-random-key"

// naiveKey is what the broken control sends instead of the frozen key: 64
// random hex characters, the shape of a real key, different every call.
func naiveKey() string {
	b := make([]byte, 32)
	rand.Read(b) //nolint:errcheck // crypto/rand does not fail on Linux
	return hex.EncodeToString(b)
}
