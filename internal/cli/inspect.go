package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	Register(&Command{Name: "inspect", Summary: "show a frozen intent and its action, or list actions by status", Run: runInspect})
}

func runInspect(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "inspect", "inspect --tenant T (--ref REF --action A | --key KEY | --status S) [--json]",
		`Shows what retrysafe knows, read-only. Every read is scoped by --tenant.

  --ref REF --action A   the intent frozen under (tenant, ref, action): the
                         normalized payload, the key, the action's state and
                         response or failure, and every amendment
  --key KEY              the same, found by its idempotency key
  --status S             list the tenant's actions in status S (started,
                         completed, failed, review), most recent first;
                         "all" lists every status

The output holds frozen payloads (personal data such as a CPF or Pix key):
it is for operators, not for logs or tickets.`)
	var (
		db DBFlags
		q  inspectQuery
	)
	db.Register(fs, e)
	fs.StringVar(&q.tenant, "tenant", "", "tenant (required)")
	fs.StringVar(&q.ref, "ref", "", "intent_ref")
	fs.StringVar(&q.action, "action", "", "action, e.g. pix.charge")
	fs.StringVar(&q.key, "key", "", "idempotency key")
	fs.StringVar(&q.status, "status", "", "list actions in this status: started, completed, failed, review, all")
	fs.IntVar(&q.limit, "limit", 100, "most actions to list")
	asJSON := fs.Bool("json", false, "print JSON instead of text")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	if err := q.check(); err != nil {
		return usageErr(fmt.Errorf("inspect: %w", err))
	}
	d, err := db.openExisting(ctx, e, "inspect")
	if err != nil {
		return err
	}
	defer d.Close()

	if q.status != "" {
		st := q.status
		if st == "all" {
			st = ""
		}
		acts, err := executor.List(ctx, d.Pool, executor.ListParams{Tenant: q.tenant, Status: st, Limit: q.limit})
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(e.Stdout, map[string]any{"tenant": q.tenant, "actions": listJSON(acts)})
		}
		printActions(e.Stdout, acts)
		return nil
	}

	var v *sidecar.IntentView
	if q.key != "" {
		v, err = sidecar.LoadIntentByKey(ctx, d.Pool, q.tenant, q.key)
	} else {
		v, err = sidecar.LoadIntent(ctx, d.Pool, q.tenant, q.ref, q.action)
	}
	if errors.Is(err, intent.ErrNotFound) {
		return fmt.Errorf("tenant %q has no such intent", q.tenant)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(e.Stdout, v)
	}
	printIntent(e.Stdout, q.tenant, v)
	return nil
}

// inspectQuery is what inspect is asked to show.
type inspectQuery struct {
	tenant, ref, action, key, status string
	limit                            int
}

// check wants a tenant and exactly one way to find what to show.
func (q inspectQuery) check() error {
	modes := 0
	for _, set := range []bool{q.ref != "" || q.action != "", q.key != "", q.status != ""} {
		if set {
			modes++
		}
	}
	switch {
	case q.tenant == "":
		return errors.New("--tenant is required (every read is scoped by tenant)")
	case modes != 1:
		return errors.New("give exactly one of --ref with --action, --key, or --status")
	case (q.ref == "") != (q.action == ""):
		return errors.New("--ref and --action go together")
	case q.limit < 1:
		return errors.New("--limit must be at least 1")
	case q.status != "":
		return checkStatus(q.status, true)
	}
	return nil
}

// checkStatus accepts a stored action status (and "all" when allowAll).
func checkStatus(s string, allowAll bool) error {
	switch s {
	case executor.RowStarted, executor.RowCompleted, executor.RowFailed, executor.RowReview:
		return nil
	case "all":
		if allowAll {
			return nil
		}
	}
	return fmt.Errorf("unknown status %q: want started, completed, failed or review", s)
}

type actionListJSON struct {
	Ref    string `json:"intent_ref"`
	Action string `json:"action"`
	*sidecar.ActionJSON
}

func listJSON(acts []*executor.Action) []actionListJSON {
	out := make([]actionListJSON, 0, len(acts))
	for _, a := range acts {
		out = append(out, actionListJSON{Ref: a.Ref, Action: a.Action, ActionJSON: sidecar.ActionView(a)})
	}
	return out
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printActions(w io.Writer, acts []*executor.Action) {
	if len(acts) == 0 {
		fmt.Fprintln(w, "no actions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "UPDATED\tSTATUS\tATTEMPT\tACTION\tINTENT_REF\tKEY\tFAILURE")
	for _, a := range acts {
		failure := ""
		if f := a.Failure; f != nil {
			failure = string(f.Class) + " " + f.Code
			if f.Resolution != nil {
				failure += " (resolved by " + orUnknown(f.Resolution.By) + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.UpdatedAt.UTC().Format(time.RFC3339), statusText(a), a.Attempt, a.Action, a.Ref, a.Key, failure)
	}
	tw.Flush()
}

func statusText(a *executor.Action) string {
	if a.Status == executor.RowStarted && a.Expired {
		return "started (lease expired)"
	}
	return a.Status
}

func printIntent(w io.Writer, tenant string, v *sidecar.IntentView) {
	in := v.Intent
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "intent\t%s / %s / %s\n", tenant, in.IntentRef, in.Action)
	fmt.Fprintf(tw, "key\t%s\n", in.IdempotencyKey)
	fmt.Fprintf(tw, "rules\tv%d, revision %d\n", in.RulesVersion, in.Revision)
	fmt.Fprintf(tw, "frozen\t%s", in.CreatedAt.UTC().Format(time.RFC3339))
	if in.SourceRef != "" {
		fmt.Fprintf(tw, " by %s", in.SourceRef)
	}
	fmt.Fprintln(tw)
	names := make([]string, 0, len(in.Payload))
	for n := range in.Payload {
		names = append(names, n)
	}
	sort.Strings(names)
	for i, n := range names {
		label := ""
		if i == 0 {
			label = "payload"
		}
		fmt.Fprintf(tw, "%s\t%s = %s\n", label, n, in.Payload[n])
	}
	fmt.Fprintf(tw, "status\t%s\n", v.Status)
	if a := v.Action; a != nil {
		fmt.Fprintf(tw, "attempt\t%d\n", a.Attempt)
		if a.LeaseUntil != nil {
			fmt.Fprintf(tw, "lease\t%s until %s\n", a.LeaseOwner, a.LeaseUntil.UTC().Format(time.RFC3339))
		}
		if a.FinishedAt != nil {
			fmt.Fprintf(tw, "finished\t%s\n", a.FinishedAt.UTC().Format(time.RFC3339))
		}
		if len(a.Response) > 0 {
			fmt.Fprintf(tw, "response\t%s\n", compactJSON(a.Response))
		}
		if f := a.Error; f != nil {
			if f.Code != "" || f.Message != "" {
				fmt.Fprintf(tw, "failure\t%s %s (HTTP %d) at attempt %d: %s\n", f.Class, f.Code, f.Status, f.Attempt, f.Message)
			}
			if r := f.Resolution; r != nil {
				fmt.Fprintf(tw, "resolved\t%s by %s at %s: %q\n", r.Status, orUnknown(r.By), r.At.UTC().Format(time.RFC3339), r.Reason)
			}
		}
	}
	tw.Flush()
	if len(v.Revisions) == 0 {
		fmt.Fprintln(w, "revisions: none")
		return
	}
	fmt.Fprintln(w, "revisions:")
	for _, r := range v.Revisions {
		fmt.Fprintf(w, "  #%d %s by %s: %q\n    old key %s -> new key %s\n", r.Revision, r.CreatedAt.UTC().Format(time.RFC3339), orUnknown(r.AmendedBy), r.Reason, r.OldKey, r.NewKey)
		if r.Overrode != "" {
			fmt.Fprintf(w, "    OVERRIDE: amended past a %s action (a second effect under the new key)\n", r.Overrode)
		}
	}
	if len(v.EarlierActions) > 0 {
		fmt.Fprintln(w, "earlier actions (under replaced keys):")
		for _, a := range v.EarlierActions {
			fmt.Fprintf(w, "  %s  %s attempt %d", a.IdempotencyKey, a.Status, a.Attempt)
			if len(a.Response) > 0 {
				fmt.Fprintf(w, "  response %s", compactJSON(a.Response))
			}
			fmt.Fprintln(w)
		}
	}
}

func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
