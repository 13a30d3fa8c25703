// Package testutil holds helpers shared by retrysafe's tests: a valid-CPF
// builder, a goroutine-safe buffer, concurrency barriers and time limits,
// goroutine "crash" points, a logger to the test log, a testing.TB for
// Examples, a throwaway certificate authority for mutual TLS (PKI),
// PgBouncer in front of a server (StartPgBouncer), and the binaries and
// subprocesses of the command tests (BuildBinary, StartProc).
//
// It is for tests only: nothing but _test.go files may import it, and no
// production package ever does. It imports only the standard library and,
// of this module, internal/freeport (a leaf whose tests import nothing of
// it), so any package's tests, internal (package foo) or external (package
// foo_test), can import it without an import cycle.
// Keep it that way: a helper that needs a retrysafe package belongs in that
// package's own tests or in a helper package beside it, like agent/agenttest
// or tools/toolstest.
package testutil
