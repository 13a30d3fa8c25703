package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/webhook"
)

func init() {
	Register(&Command{Name: "purge", Summary: "delete settled actions, their intents and old webhook records past their retention", Run: runPurge})
}

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
nor the tool settings are read.`, durationText(executor.MinRetention), durationText(executor.DefaultRetention)))
	var (
		db DBFlags
		lg LogFlags
		p  purgePass
	)
	db.Register(fs, e)
	lg.Register(fs, e)
	fs.DurationVar(&p.actions.Retention, "retention", executor.DefaultRetention,
		fmt.Sprintf("keep settled actions and their intents this long after they finished; at least %s (e.g. 168h)", durationText(executor.MinRetention)))
	fs.DurationVar(&p.webhook.LogRetention, "webhook-log-retention", webhook.DefaultPurgeRetention, "keep webhook delivery-log rows this long")
	fs.DurationVar(&p.webhook.EffectRetention, "webhook-effect-retention", webhook.DefaultPurgeRetention,
		"keep webhook effects this long; must exceed the longest redelivery horizon of every payment provider")
	fs.IntVar(&p.actions.Batch, "batch", executor.DefaultPurgeBatch, "most rows one statement deletes")
	fs.DurationVar(&p.actions.Pause, "pause", 0, "sleep after each action batch that deleted rows, to leave I/O to live traffic (beside live traffic with a latency target, lower the purge's rate with a small --batch and a longer --pause: README, \"The purge's batch and pause\")")
	loop := fs.Bool("loop", false, "keep running passes until stopped")
	every := fs.Duration("every", time.Hour, "with --loop: start a pass this often")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	p.webhook.Batch = p.actions.Batch
	everySet := false
	fs.Visit(func(f *flag.Flag) { everySet = everySet || f.Name == "every" })
	if err := p.check(*loop, everySet, *every); err != nil {
		return usageErr(fmt.Errorf("purge: %w", err))
	}
	log, err := lg.Logger(e.Stderr)
	if err != nil {
		return err
	}
	if p.db, err = db.openExisting(ctx, e, "purge"); err != nil {
		return err
	}
	defer p.db.Close()
	if !*loop {
		res, err := p.run(ctx)
		printPurge(e, res)
		return err
	}
	p.loop(ctx, e, log, *every)
	return nil
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

// check refuses settings that would purge too much, or make no sense.
func (p *purgePass) check(loop, everySet bool, every time.Duration) error {
	switch {
	case p.actions.Retention < executor.MinRetention:
		return fmt.Errorf("--retention %s is shorter than the minimum %s: keys must outlive every redelivery", durationText(p.actions.Retention), durationText(executor.MinRetention))
	case p.webhook.LogRetention <= 0:
		return fmt.Errorf("--webhook-log-retention must be positive, got %s", p.webhook.LogRetention)
	case p.webhook.EffectRetention <= 0:
		return fmt.Errorf("--webhook-effect-retention must be positive, got %s", p.webhook.EffectRetention)
	case p.actions.Batch < 1:
		return fmt.Errorf("--batch must be at least 1, got %d", p.actions.Batch)
	case p.actions.Pause < 0:
		return fmt.Errorf("--pause must not be negative, got %s", p.actions.Pause)
	case everySet && !loop:
		return errors.New("--every goes with --loop")
	case every <= 0:
		return fmt.Errorf("--every must be positive, got %s", every)
	}
	return nil
}

// loop runs a pass every interval until ctx ends. It outlives outages: a
// failed pass is logged, and the next one tries again.
func (p *purgePass) loop(ctx context.Context, e *Env, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		res, err := p.run(ctx)
		if ctx.Err() != nil {
			if res.deleted() {
				printPurge(e, res)
			}
			return
		}
		printPurge(e, res)
		if err != nil {
			log.Error("purge pass failed", "err", err, "retry_in", every.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
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
