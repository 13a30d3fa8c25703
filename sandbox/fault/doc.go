// Package fault injects the failures that make retries necessary into a
// sandbox service's HTTP handlers, so that tests and demos can produce each
// of them on purpose:
//
//	delay=D      wait D before executing (the request is slow to start)
//	fail-before  answer 500 without executing (safe to retry)
//	drop-after   execute, then drop the connection without answering: the
//	             response is lost but the effect exists
//	fail-after   execute, then answer 500: the client believes it failed
//	slow=D       execute, then wait D before answering (longer than the
//	             client's timeout: the client gives up, the effect exists)
//
// A request picks its faults with the X-Sandbox-Fault header, a comma
// separated list ("delay=200ms,drop-after"); a process sets a default for
// the requests it chooses (Injector.Default, Rate and Applies). The header
// is not part of any idempotency fingerprint, so a retry without it gets
// the first request's stored answer.
//
// A fault's answer (500, or 400 for a header it cannot parse) is a
// problem+json of type ProblemFault, a section of the repository's
// docs/problems.md.
//
// This package imports the standard library and internal/problem (the
// problem+json writer it shares with the sidecar and the idempotency
// middleware).
package fault
