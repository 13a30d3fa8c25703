package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/webhook"
)

func init() {
	Register(&Command{Name: "purge", Summary: "delete settled actions, their intents and old webhook records past their retention", Run: runPurge})
}

// defaultWebhookRetention is webhook.Purge's default for both the delivery
// log and the effects, spelled out so that --help shows it.
const defaultWebhookRetention = 30 * 24 * time.Hour

func runPurge(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "purge", "purge [--retention 168h] [--loop [--every 1h]] [flags]",
		fmt.Sprintf(`Deletes what retrysafe no longer needs, in batches of short transactions
(database clock):

  - completed and failed actions whose finished_at is older than --retention,
    with the intent frozen under the same key (and its revisions);
  - webhook delivery-log rows received more than --webhook-log-retention ago;
  - webhook effects decided more than --webhook-effect-retention ago, with
    their stale-event and notification rows, when their notification was
    sent (or none was owed).

Never deleted: started actions (a worker or the reconciler owns them),
actions in review (they wait for 'retrysafe resolve'), intents whose action
(under the intent's current key) is not both settled and past the
retention, webhook effects whose notification is pending, failed or in
review, and rows a live transaction holds (left for the next pass).

The retention must exceed the longest redelivery horizon of every upstream
(queue redeliveries, webhook retries, a client's retries). A redelivery that
arrives after its intent was purged freezes the intent anew; the same fields
give the same key, so a provider that still remembers the key answers with
its first result, but retrysafe itself no longer deduplicates it. Likewise
an event redelivered after its webhook effect was purged meets only the
order's ordering guard. --retention must be at least %s (default %s).

Without --loop, runs one pass and prints what it deleted. With --loop, runs a
pass every --every until SIGTERM/SIGINT, printing each pass.

Needs only the database: purging calls no provider, so neither the HMAC key
nor the tool settings are read.`, hours(executor.MinRetention), hours(executor.DefaultRetention)))
	var (
		db DBFlags
		lg LogFlags
	)
	db.Register(fs, e)
	lg.Register(fs, e)
	retention := fs.Duration("retention", executor.DefaultRetention,
		fmt.Sprintf("keep settled actions and their intents this long after they finished; at least %s (Go syntax, e.g. 168h)", hours(executor.MinRetention)))
	logRetention := fs.Duration("webhook-log-retention", defaultWebhookRetention, "keep webhook delivery-log rows this long")
	effectRetention := fs.Duration("webhook-effect-retention", defaultWebhookRetention,
		"keep webhook effects this long; must exceed the longest redelivery horizon of every payment provider")
	batch := fs.Int("batch", 1000, "most rows one statement deletes")
	pause := fs.Duration("pause", 0, "sleep between action batches, to leave I/O to live traffic")
	loop := fs.Bool("loop", false, "keep running passes until stopped")
	every := fs.Duration("every", time.Hour, "with --loop: start a pass this often")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	everySet := false
	fs.Visit(func(f *flag.Flag) { everySet = everySet || f.Name == "every" })
	var problem string
	switch {
	case *retention < executor.MinRetention:
		problem = fmt.Sprintf("--retention %s is shorter than the minimum %s: keys must outlive every redelivery", *retention, hours(executor.MinRetention))
	case *logRetention <= 0:
		problem = fmt.Sprintf("--webhook-log-retention must be positive, got %s", *logRetention)
	case *effectRetention <= 0:
		problem = fmt.Sprintf("--webhook-effect-retention must be positive, got %s", *effectRetention)
	case *batch < 1:
		problem = fmt.Sprintf("--batch must be at least 1, got %d", *batch)
	case *pause < 0:
		problem = fmt.Sprintf("--pause must not be negative, got %s", *pause)
	case everySet && !*loop:
		problem = "--every goes with --loop"
	case *every <= 0:
		problem = fmt.Sprintf("--every must be positive, got %s", *every)
	}
	if problem != "" {
		fmt.Fprintf(e.Stderr, "purge: %s\n", problem)
		return ErrUsage
	}
	log, err := lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	d, err := db.openExisting(ctx, e, "purge")
	if err != nil {
		return err
	}
	defer d.Close()

	p := purgePass{
		db:      d,
		actions: executor.PurgeParams{Retention: *retention, Batch: *batch, Pause: *pause},
		webhook: webhook.PurgeParams{LogRetention: *logRetention, EffectRetention: *effectRetention, Batch: *batch},
	}
	if !*loop {
		res, err := p.run(ctx)
		printPurge(e, res)
		return err
	}
	t := time.NewTicker(*every)
	defer t.Stop()
	for {
		res, err := p.run(ctx)
		if ctx.Err() != nil {
			if res.deleted() {
				printPurge(e, res)
			}
			return nil
		}
		printPurge(e, res)
		if err != nil {
			// The loop outlives outages: the next pass tries again.
			log.Error("purge pass failed", "err", err, "retry_in", every.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

type purgePass struct {
	db      *database
	actions executor.PurgeParams
	webhook webhook.PurgeParams
}

type purgeResult struct {
	actions executor.PurgeResult
	webhook webhook.PurgeResult
	took    time.Duration
}

func (r purgeResult) deleted() bool {
	return r.actions.Actions+r.actions.Intents+r.webhook.Log+r.webhook.Effects > 0
}

// run is one pass. The two purges are independent: a failure of one does
// not keep the other from running (unless the pass was stopped).
func (p *purgePass) run(ctx context.Context) (purgeResult, error) {
	start := time.Now()
	var res purgeResult
	var errA, errW error
	res.actions, errA = executor.Purge(ctx, p.db.Pool, p.actions)
	if ctx.Err() == nil {
		res.webhook, errW = webhook.Purge(ctx, p.db.Pool, p.webhook)
	}
	res.took = time.Since(start)
	return res, errors.Join(errA, errW)
}

func printPurge(e *Env, r purgeResult) {
	batches := "batches"
	if r.actions.Batches == 1 {
		batches = "batch"
	}
	took := r.took.Round(time.Millisecond)
	if r.took >= time.Second {
		took = r.took.Round(100 * time.Millisecond)
	}
	fmt.Fprintf(e.Stdout, "%s purge: actions %d, intents %d (%d %s), webhook log %d, webhook effects %d, %s\n",
		time.Now().UTC().Format(time.RFC3339), r.actions.Actions, r.actions.Intents, r.actions.Batches, batches,
		r.webhook.Log, r.webhook.Effects, took)
}

// hours prints a whole number of hours as "24h" rather than "24h0m0s".
func hours(d time.Duration) string {
	if d > 0 && d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return d.String()
}
