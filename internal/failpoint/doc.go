// Package failpoint lets a crash test kill the process at a named point.
//
// Hit(name) does nothing unless the environment variable RETRYSAFE_FAILPOINTS
// names the point (a comma-separated list, read once at start-up), in which
// case the process sends itself SIGKILL: no deferred function runs, no
// transaction commits, no buffered response is flushed, exactly as when the
// machine dies. A restart test sets the variable on a worker, waits for it
// to die at the point, restarts it without the variable and checks that no
// side effect happened twice.
//
// A name may carry a count, "name@N": the point kills on its Nth hit in this
// process (earlier hits pass), so a test can let the first call through.
//
// This package imports only the standard library.
package failpoint
