package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	Register(&Command{Name: "reconcile", Summary: "settle actions whose lease expired (once, or in a loop)", Run: runReconcile})
}

func runReconcile(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "reconcile", "reconcile [--loop] [flags]",
		`Finds started actions whose lease expired (a worker crashed or timed out
mid-call), takes each over with a compare-and-set on its attempt, and settles
it: asks the provider by key where the tool can (a Pix charge found under the
key completes the action), else calls again with the same key. Past
--retry-horizon (or --max-attempts, when set) an action the provider provably
never acted on fails; one nobody can tell about goes to review ('retrysafe
resolve').

Without --loop, runs one pass and prints what it settled. With --loop, runs
until SIGTERM/SIGINT and prints every pass that found something.
'retrysafe serve' runs this loop itself unless given --reconcile=false.

Needs the same tool settings as serve (RETRYSAFE_HMAC_KEY, RETRYSAFE_PSP_URL,
RETRYSAFE_PSP_TOKEN, ...): settling calls the providers.`)
	var f engineFlags
	f.register(fs, e)
	loop := fs.Bool("loop", false, "keep running passes until stopped")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	d, rtm, log, err := f.openRuntime(ctx, e, "reconcile")
	if err != nil {
		return err
	}
	defer d.Close()
	r := &sidecar.Reconciler{Executor: rtm.Executor, Logger: log, Interval: f.rt.reconcileInterval, Batch: f.rt.reconcileBatch}
	if !*loop {
		res, err := r.Once(ctx)
		printPass(e, res)
		return err
	}
	r.OnPass = func(res executor.ReconcileResult, err error) {
		if err == nil && res != (executor.ReconcileResult{}) {
			printPass(e, res)
		}
	}
	return r.Run(ctx)
}

func printPass(e *Env, r executor.ReconcileResult) {
	fmt.Fprintf(e.Stdout, "%s reconcile: taken over %d: completed %d, failed %d, review %d, retrying %d, lease lost %d, errors %d\n",
		time.Now().UTC().Format(time.RFC3339), r.TakenOver, r.Completed, r.Failed, r.Review, r.Retrying, r.LeaseLost, r.Errors)
}
