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
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	p := executor.ResolveParams{Tenant: *tenant, Key: *key, Status: *status, Reason: *reason, By: *by, Force: *force}
	var err error
	if p.Response, err = checkResolve(p, *ref, *action, *response); err != nil {
		return usageErr(fmt.Errorf("resolve: %w", err))
	}
	d, err := db.openExisting(ctx, e, "resolve")
	if err != nil {
		return err
	}
	defer d.Close()
	if p.Key == "" {
		in, err := intent.Get(ctx, d.Pool, *tenant, *ref, *action)
		if errors.Is(err, intent.ErrNotFound) {
			return fmt.Errorf("tenant %q has no intent %q for %s", *tenant, *ref, *action)
		}
		if err != nil {
			return err
		}
		p.Key = in.Key
	}
	a, err := executor.Resolve(ctx, d.Pool, p)
	if err != nil {
		return resolveRefused(ctx, d, err, p)
	}
	if *asJSON {
		return printJSON(e.Stdout, sidecar.ActionView(a))
	}
	fmt.Fprintf(e.Stdout, "resolved %s / %s: %s (attempt %d), reason recorded\n", *tenant, a.Key, a.Status, a.Attempt)
	return nil
}

// checkResolve checks resolve's flags and returns the response to store:
// --response, or the file it names with @FILE.
func checkResolve(p executor.ResolveParams, ref, action, response string) (json.RawMessage, error) {
	switch {
	case p.Tenant == "":
		return nil, errors.New("--tenant is required")
	case (p.Key == "") == (ref == "" && action == ""):
		return nil, errors.New("give either --key, or --ref with --action")
	case p.Key == "" && (ref == "" || action == ""):
		return nil, errors.New("--ref and --action go together")
	case p.Status != executor.RowCompleted && p.Status != executor.RowFailed:
		return nil, errors.New("--status must be completed or failed")
	case strings.TrimSpace(p.Reason) == "":
		return nil, errors.New("--reason is required: say why (it is recorded with the action)")
	case p.Status == executor.RowFailed && response != "":
		return nil, errors.New("--response goes with --status completed")
	case response == "":
		return nil, nil
	}
	raw := []byte(response)
	if name, ok := strings.CutPrefix(response, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--response: %w", err)
		}
		raw = b
	}
	if !json.Valid(raw) {
		return nil, errors.New("--response is not valid JSON")
	}
	return raw, nil
}

// resolveRefused says why the ledger refused to settle the action.
func resolveRefused(ctx context.Context, d *database, err error, p executor.ResolveParams) error {
	switch {
	case errors.Is(err, executor.ErrNotFound):
		return fmt.Errorf("tenant %q has no action under key %s", p.Tenant, p.Key)
	case errors.Is(err, executor.ErrNotResolvable):
		if cur, gerr := executor.Get(ctx, d.Pool, p.Tenant, p.Key); gerr == nil {
			return fmt.Errorf("the action is %s, not in review: nothing changed (--force settles a started action only after its lease expired)", statusText(cur))
		}
	}
	return err
}
