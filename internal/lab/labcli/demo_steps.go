package labcli

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/internal/lab/harness"
)

// The steps both demo stories (the v1 PSP and API Pix) take the same way.

// deliverTwice posts the customer's message twice at once, as WhatsApp
// does when it redelivers before the first answer.
func deliverTwice(ctx context.Context, st *harness.Stack) ([]int, error) {
	statuses := make([]int, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range statuses {
		wg.Go(func() { statuses[i], errs[i] = st.Deliver(ctx, demoMsgID, demoWaID, demoMessage) })
	}
	wg.Wait()
	return statuses, cmp.Or(errs...)
}

// awaitCrash waits for worker #1 to kill itself at its crash point.
func awaitCrash(ctx context.Context, w *harness.Proc) error {
	select {
	case <-w.Done():
		return nil
	case <-time.After(90 * time.Second):
		return errors.New("demo: worker #1 did not reach its crash point within 90s")
	case <-ctx.Done():
		return ctx.Err()
	}
}

// redeliverOnce posts the message once more, as WhatsApp does, and
// starts worker #2; began is when it was asked to start.
func redeliverOnce(ctx context.Context, st *harness.Stack) (status int, began time.Time, err error) {
	if status, err = st.Deliver(ctx, demoMsgID, demoWaID, demoMessage); err != nil {
		return 0, time.Time{}, err
	}
	began = time.Now()
	if _, err := st.StartWorker(ctx, "worker-2"); err != nil {
		return 0, time.Time{}, err
	}
	return status, began, nil
}

// awaitSettled waits until the conversation is over: a reply sent, the
// action past started and, with minMessages, that many messages out.
func awaitSettled(ctx context.Context, st *harness.Stack, action string, minMessages int) error {
	return harness.WaitFor(ctx, 150*time.Second, func() (bool, error) {
		replies, err := st.Replies(ctx)
		if err != nil {
			return false, err
		}
		acts, err := st.Actions(ctx, action)
		if err != nil {
			return false, err
		}
		enough := true
		if minMessages > 0 {
			msgs, err := st.Messages(ctx)
			if err != nil {
				return false, err
			}
			enough = len(msgs) >= minMessages
		}
		return len(replies) > 0 && len(acts) > 0 && acts[0].Status != "started" && enough, nil
	})
}

// demoOutcome is what both stories read once the conversation settled.
type demoOutcome struct {
	replies      []harness.Reply
	receipts     []harness.Message // the templates sent
	orderStatus  string
	verdicts     map[string]int // the payment webhook's (or Pix callback's)
	actionStatus string
	attempts     int
}

// readOutcome reads the replies, the receipts, the order and the action
// of the demo's conversation.
func readOutcome(ctx context.Context, st *harness.Stack, action string) (demoOutcome, error) {
	var o demoOutcome
	var err error
	if o.replies, err = st.Replies(ctx); err != nil {
		return o, err
	}
	msgs, err := st.Messages(ctx)
	if err != nil {
		return o, err
	}
	for _, m := range msgs {
		if m.Type == "template" {
			o.receipts = append(o.receipts, m)
		}
	}
	if o.orderStatus, err = st.OrderStatus(ctx, demoInvoice); err != nil {
		return o, err
	}
	if o.verdicts, err = st.PaymentWebhookVerdicts(ctx); err != nil {
		return o, err
	}
	acts, err := st.Actions(ctx, action)
	if err != nil {
		return o, err
	}
	if len(acts) > 0 {
		o.actionStatus, o.attempts = acts[0].Status, acts[0].Attempt
	}
	return o, nil
}

// sidecarExecute calls POST /v1/tools/{action}/execute.
func sidecarExecute(ctx context.Context, st *harness.Stack, action, ref, fields string) (*sidecarCheck, error) {
	body := fmt.Sprintf(`{"intent_ref":%q,"fields":%s,"source_ref":"demo-sidecar"}`, ref, fields)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, st.Server.Ready+"/v1/tools/"+action+"/execute", bytes.NewBufferString(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+st.APIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var sc sidecarCheck
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &sc); err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("demo: sidecar answered %s: %s", resp.Status, raw)
	}
	return &sc, nil
}

// writeJSON writes v, indented, as the --json report of a lab command.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
