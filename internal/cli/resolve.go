package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/retrysafe/retrysafe/executor"
	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/server/sidecar"
)

func init() {
	Register(&Command{Name: "resolve", Summary: "settle an action in review by hand, with a recorded reason", Run: runResolve})
}

func runResolve(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "resolve", "resolve --tenant T (--key KEY | --ref REF --action A) --status completed|failed --reason TEXT [--response JSON]",
		`Settles an action in review: the executor could not tell whether the
provider acted (uncertain failures until --retry-horizon, or a tool that can
neither take a key nor be asked). Check at the provider first (its dashboard,
or its lookup by the key 'retrysafe inspect' shows), then:

  --status completed --response '{"id":"..."}'   it happened: the response is
                                                 stored and replayed to callers
  --status failed                                it did not happen: callers get
                                                 the failure; a new try needs a
                                                 new intent_ref

--reason is required and recorded with --by. No tool is called. --force also
settles a started action whose lease expired (a stuck action the reconciler
cannot finish).`)
	var db DBFlags
	db.Register(fs, e)
	tenant := fs.String("tenant", "", "tenant (required)")
	key := fs.String("key", "", "idempotency key of the action")
	ref := fs.String("ref", "", "intent_ref (with --action), instead of --key")
	action := fs.String("action", "", "action, e.g. pix.charge (with --ref)")
	status := fs.String("status", "", "completed or failed (required)")
	reason := fs.String("reason", "", "why, for the record (required)")
	response := fs.String("response", "", "with completed: the provider's response as JSON, or @FILE")
	by := fs.String("by", e.Getenv("USER"), "who resolves, recorded with the resolution (env USER)")
	force := fs.Bool("force", false, "also settle a started action whose lease expired")
	asJSON := fs.Bool("json", false, "print the settled action as JSON")
	if err := ParseFlags(e, fs, args); err != nil {
		return err
	}
	usage := func(msg string) error {
		fmt.Fprintln(e.Stderr, "resolve: "+msg)
		return ErrUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case *tenant == "":
		return usage("--tenant is required")
	case (*key == "") == (*ref == "" && *action == ""):
		return usage("give either --key, or --ref with --action")
	case *key == "" && (*ref == "" || *action == ""):
		return usage("--ref and --action go together")
	case *status != executor.RowCompleted && *status != executor.RowFailed:
		return usage("--status must be completed or failed")
	case strings.TrimSpace(*reason) == "":
		return usage("--reason is required: say why (it is recorded with the action)")
	case *status == executor.RowFailed && *response != "":
		return usage("--response goes with --status completed")
	}
	var resp json.RawMessage
	if *response != "" {
		raw := []byte(*response)
		if strings.HasPrefix(*response, "@") {
			b, err := os.ReadFile(strings.TrimPrefix(*response, "@"))
			if err != nil {
				return fmt.Errorf("--response: %w", err)
			}
			raw = b
		}
		if !json.Valid(raw) {
			return usage("--response is not valid JSON")
		}
		resp = raw
	}
	d, err := db.openExisting(ctx, e, "resolve")
	if err != nil {
		return err
	}
	defer d.Close()

	k := *key
	if k == "" {
		in, err := intent.Get(ctx, d.Pool, *tenant, *ref, *action)
		if errors.Is(err, intent.ErrNotFound) {
			return fmt.Errorf("tenant %q has no intent %q for %s", *tenant, *ref, *action)
		}
		if err != nil {
			return err
		}
		k = in.Key
	}
	a, err := executor.Resolve(ctx, d.Pool, executor.ResolveParams{
		Tenant: *tenant, Key: k, Status: *status, Response: resp, Reason: *reason, By: *by, Force: *force,
	})
	switch {
	case errors.Is(err, executor.ErrNotFound):
		return fmt.Errorf("tenant %q has no action under key %s", *tenant, k)
	case errors.Is(err, executor.ErrNotResolvable):
		cur, gerr := executor.Get(ctx, d.Pool, *tenant, k)
		if gerr == nil {
			return fmt.Errorf("the action is %s, not in review: nothing changed (--force settles a started action only after its lease expired)", statusText(cur))
		}
		return err
	case err != nil:
		return err
	}
	if *asJSON {
		return printJSON(e.Stdout, sidecar.ActionView(a))
	}
	fmt.Fprintf(e.Stdout, "resolved %s / %s: %s (attempt %d), reason recorded\n", *tenant, a.Key, a.Status, a.Attempt)
	return nil
}
