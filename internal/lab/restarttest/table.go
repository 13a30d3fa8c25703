package restarttest

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// chargesCell writes a charges-per-intent histogram: "1×19", or
// "0×1 1×15 2×3".
func chargesCell(h map[int]int) string { return joinCounts(h, "%d×%d", " ") }

// joinCounts writes m's counts in the order of their keys, each with
// format (key, count), joined by sep.
func joinCounts[K cmp.Ordered](m map[K]int, format, sep string) string {
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf(format, k, m[k])
	}
	return strings.Join(parts, sep)
}

// WriteTable writes the human report: settings, one row per scenario,
// notes and the verdict on the last line.
func (r *Report) WriteTable(w io.Writer) error {
	r.writeSettings(w)
	if err := r.writeRows(w); err != nil {
		return err
	}
	if err := r.writeNotes(w); err != nil {
		return err
	}
	r.writeFailedRuns(w)
	fmt.Fprintln(w)
	_, err := fmt.Fprintln(w, r.Verdict)
	return err
}

func (r *Report) writeSettings(w io.Writer) {
	s := r.Settings
	mode := ""
	if r.Naive {
		mode = " — NAIVE CONTROL (random key per provider call)"
	}
	fmt.Fprintf(w, "retrysafe restart-test: %d runs, seed %d, %s%s\n", r.Runs, r.Seed, r.Duration, mode)
	fmt.Fprintf(w, "  database:   %s, schema %s\n", s.Database, s.Schema)
	if s.Batch > 0 {
		fmt.Fprintf(w, "  workers:    one armed worker per batch of %d runs, then %d redelivery workers; journal %s\n", s.Batch, s.Workers, s.Journal)
	} else {
		fmt.Fprintf(w, "  workers:    %d long-lived workers, never killed; journal %s\n", s.Workers, s.Journal)
	}
	fmt.Fprintf(w, "  flags:      worker %s\n", s.WorkerFlags)
	fmt.Fprintf(w, "              serve %s\n", s.ServeFlags)
	fmt.Fprintf(w, "  model:      sandbox, --wrong-amount-rate %g, --latency %s\n", s.WrongAmountRate, s.ModelLatency)
	fmt.Fprintf(w, "  redelivery: %s\n\n", s.Redelivery)
}

func (r *Report) writeRows(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\truns\tkills\tat point\thit\tredeliveries\tkeys equal\tcharges/intent\tlost\tstuck\tmodel calls/msg\t")
	line := func(row Row) {
		name := row.Scenario
		if !row.Covered && name != "total" {
			name += " (!)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d/%d\t%s\t%d\t%d\t%.2f (max %d)\t\n", name, row.Runs, row.Kills, row.AtPoint, row.Hit,
			row.Redeliveries, row.KeysEqual, row.Runs, chargesCell(row.Charges), row.Lost, row.Stuck, row.ModelPerMessage, row.MaxModelCalls)
	}
	for _, row := range r.Rows {
		line(row)
	}
	line(r.Total)
	return tw.Flush()
}

func (r *Report) writeNotes(w io.Writer) error {
	fmt.Fprintln(w)
	t := r.Total
	fmt.Fprintf(w, "  webhook: %d signed posts for %d messages (WhatsApp-style duplicates answered 200, stored once); runs found in flight by two kills or more: %d\n",
		r.WebhookPosts, r.Messages, r.RunsHitTwice)
	fmt.Fprintf(w, "  multi-spelling intents (CPF punctuated and bare, a phone three ways, in separate messages): %d, one key and one charge: %d\n", r.MultiSpelling, r.MultiSpellingOK)
	fmt.Fprintf(w, "  PSP requests: %d (every key attributed to an intent: %d unattributed); duplicate replies: %d; actions left started: %d\n",
		r.PSPRequests, r.UnattributedRequests, t.DuplicateReplies, r.StartedActions)
	fmt.Fprintf(w, "  faults: PSP faults injected %d, PostgreSQL restarts %d, crashes %d, failovers %d, jobs handed to a racing worker %d; model calls %d real + %d replayed from the journal\n",
		t.FaultsInjected, t.PGRestarts, t.PGCrashes, t.Failovers, t.RaceHandouts, t.ModelCalls, t.ModelReplayed)
	for _, row := range r.Rows {
		if row.DBDownMax != "" {
			fmt.Fprintf(w, "  %s: the database was gone for at most %s (from SIGKILL until it took writes again); River's rescuer brought back %d jobs\n", row.Scenario, row.DBDownMax, row.Rescues)
		}
	}
	if r.RiverLeader != "" {
		fmt.Fprintf(w, "  River's leader after the redelivery: %s\n", r.RiverLeader)
	}
	if a := r.APIPix; a != nil {
		fmt.Fprintf(w, "  API Pix: %d cob PUTs, %d charges overwritten; %d charges paid, %d payments applied by the Pix callback (%d calls), %d receipts; runs charged once with one receipt: %d, others: %d\n",
			a.CobPuts, a.Overwritten, a.Paid, a.Effects, a.Callbacks, a.Receipts, a.RunsReceiptOnce, a.RunsReceiptWrong)
	}
	if rc := r.Refunds; rc != nil {
		if err := rc.writeTable(w); err != nil {
			return err
		}
	}
	if r.WrongAmounts > 0 {
		fmt.Fprintf(w, "  charged once at a misread amount: %d (the model's first extraction was wrong and was frozen; --wrong-amount-rate)\n", r.WrongAmounts)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "  problem: %s\n", p)
	}
	return nil
}

// writeFailedRuns lists the runs that failed, duplicates first, so that a
// red verdict says where to look (every run is in --json).
func (r *Report) writeFailedRuns(w io.Writer) {
	shown := 0
	for pass := 0; pass < 2 && shown <= 10; pass++ {
		for _, res := range r.Results {
			var what []string
			if res.Charges != 1 {
				what = append(what, fmt.Sprintf("%d charges", res.Charges))
			}
			if (pass == 0) != (len(what) > 0) {
				continue // duplicates and missing charges in the first pass
			}
			if !res.KeysEqual {
				what = append(what, fmt.Sprintf("%d distinct keys", len(res.Keys)))
			}
			if res.Lost {
				what = append(what, "lost: "+res.LostWhy)
			}
			if res.Stuck > 0 {
				what = append(what, fmt.Sprintf("%d actions started", res.Stuck))
			}
			if len(what) == 0 {
				continue
			}
			if shown == 10 {
				fmt.Fprintln(w, "  ... (every run is in --json)")
				shown++
				break
			}
			shown++
			status := res.ActionStatus
			if status == "" {
				status = "none"
			}
			fmt.Fprintf(w, "  run %d (%s, invoice %s, %d messages, hit by %d kills, action %s, %d PSP requests): %s\n",
				res.Index, res.Scenario, res.Invoice, res.Messages, res.Hits, status, res.PSPRequests, strings.Join(what, "; "))
		}
	}
}
