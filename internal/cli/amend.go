package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/retrysafe/retrysafe/intent"
	"github.com/retrysafe/retrysafe/internal/strictjson"
)

func init() {
	Register(&Command{Name: "amend", Summary: "replace a frozen intent's fields deliberately, with a recorded reason", Run: runAmend})
}

func runAmend(ctx context.Context, e *Env, args []string) error {
	fs := NewFlagSet(e, "amend", "amend --tenant T --ref REF --action A --fields JSON --reason TEXT [--override-completed]",
		`Replaces the frozen fields of an intent (an operator fixing a wrong Pix key
after a definitive failure): the intent gets a new key, the old one is
recorded as a revision, and the next call executes under the new key.

Refused while the action under the current key is started or in review
(settle it first: 'retrysafe resolve'), and, for a tool that moves money,
when it completed: the amended intent would be charged again. A wrong
amount that was charged is corrected by a refund at the provider, or by
charging the difference under a new intent_ref. --override-completed
amends anyway, for an operator who means a second charge under this
intent: it needs --by and --reason, is recorded with the revision, and
'retrysafe inspect' shows both actions.

--fields is the complete new extraction as a JSON object (not a patch).
Needs the tool settings of serve (RETRYSAFE_HMAC_KEY and the tools' URLs)
to normalize and key the fields; calls no tool.`)
	var f engineFlags
	f.register(fs, e)
	tenant := fs.String("tenant", "", "tenant (required)")
	ref := fs.String("ref", "", "intent_ref (required)")
	action := fs.String("action", "", "action, e.g. pix.charge (required)")
	fieldsJSON := fs.String("fields", "", "the new fields, a JSON object (required)")
	reason := fs.String("reason", "", "why, for the record (required)")
	by := fs.String("by", e.Getenv("USER"), "who amends, recorded with the revision (env USER)")
	override := fs.Bool("override-completed", false, "amend even though the money-moving action completed: a second charge (recorded)")
	if err := ParseNoArgs(e, fs, args); err != nil {
		return err
	}
	p := intent.AmendParams{Tenant: *tenant, Ref: *ref, Action: *action, Reason: *reason, By: *by, OverrideCompleted: *override}
	var err error
	if p.Fields, err = checkAmend(p, *fieldsJSON); err != nil {
		return usageErr(fmt.Errorf("amend: %w", err))
	}
	d, rtm, _, err := f.openRuntime(ctx, e, "amend")
	if err != nil {
		return err
	}
	defer d.Close()
	res, err := rtm.Intents.Amend(ctx, d.Pool, p)
	if err != nil {
		return amendRefused(err, p)
	}
	fmt.Fprintf(e.Stdout, "amended %s / %s / %s: revision %d replaced, key %s -> %s, changed %s\n",
		*tenant, *ref, *action, res.Revision, res.OldKey, res.Intent.Key, strings.Join(res.Changed, ","))
	if *override {
		fmt.Fprintln(e.Stdout, "override recorded: the next execution acts under the new key, beside the completed action")
	}
	return nil
}

// checkAmend checks amend's flags and returns the new fields: the complete
// extraction, a JSON object whose numbers stay exact.
func checkAmend(p intent.AmendParams, fieldsJSON string) (map[string]any, error) {
	switch {
	case p.Tenant == "" || p.Ref == "" || p.Action == "":
		return nil, errors.New("--tenant, --ref and --action are required")
	case strings.TrimSpace(p.Reason) == "":
		return nil, errors.New("--reason is required: say why (it is recorded with the revision)")
	case p.OverrideCompleted && strings.TrimSpace(p.By) == "":
		return nil, errors.New("--override-completed needs --by: who decided")
	case fieldsJSON == "":
		return nil, errors.New("--fields is required: the complete new extraction as a JSON object")
	}
	if err := strictjson.Check([]byte(fieldsJSON)); err != nil {
		return nil, fmt.Errorf("--fields: %w", err)
	}
	var fields map[string]any
	dec := json.NewDecoder(strings.NewReader(fieldsJSON))
	dec.UseNumber() // amounts never pass through float64
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, errors.New("--fields must be a JSON object")
	}
	return fields, nil
}

// amendRefused says why the ledger refused an amendment, and what to do
// instead.
func amendRefused(err error, p intent.AmendParams) error {
	var ce *intent.CompletedError
	switch {
	case errors.As(err, &ce):
		return fmt.Errorf("refused: the %s under key %s completed and moves money; amending would charge again. Refund at the provider, or charge the difference under a new intent_ref; --override-completed --by WHO amends anyway (recorded)", p.Action, ce.Key)
	case errors.Is(err, intent.ErrNotFound):
		return fmt.Errorf("tenant %q has no intent %q for %s", p.Tenant, p.Ref, p.Action)
	case errors.Is(err, intent.ErrActionActive):
		return fmt.Errorf("refused: %w; settle it first ('retrysafe resolve')", err)
	}
	return err
}
