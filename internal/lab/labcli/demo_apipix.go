package labcli

import (
	"context"
	"fmt"
	"time"

	"github.com/retrysafe/retrysafe/internal/cli"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// The API Pix story's crash point: right after the PSP created the charge,
// before the worker recorded it.
const demoAPIPixCrashPoint = "agent.provider-answered." + apipix.CobName

// apipixReport is the API Pix story, for --json.
type apipixReport struct {
	OK             bool              `json:"ok"`
	Schema         string            `json:"schema"`
	Deliveries     []int             `json:"webhook_statuses"`
	CrashPoint     string            `json:"crash_point"`
	Intent         map[string]string `json:"frozen_payload"`
	Key            string            `json:"idempotency_key"`
	TxID           string            `json:"txid"`
	Cobs           []harness.Cob     `json:"cobs"`
	PSP            map[string]int    `json:"psp_stats"`
	Replies        []harness.Reply   `json:"replies"`
	Receipts       []harness.Message `json:"receipts"`
	OrderStatus    string            `json:"order_status"`
	Callbacks      map[string]int    `json:"pix_callback_verdicts"`
	ActionStatus   string            `json:"action_status"`
	Attempts       int               `json:"action_attempts"`
	Sidecar        *sidecarCheck     `json:"sidecar_reexecution,omitempty"`
	Refund         *sidecarCheck     `json:"refund,omitempty"`
	RefundReplayed *sidecarCheck     `json:"refund_again,omitempty"`
	RecoverySecs   float64           `json:"recovery_seconds"`
}

// runDemoAPIPix is `demo --psp apipix`: the billing story on the Central
// Bank's API Pix. The charge is a cob under a txid derived from the frozen
// key; worker #1 dies right after the PSP created it; worker #2 asks the
// PSP by txid; the customer pays; the PSP's Pix callback, redelivered once,
// makes one receipt; a partial refund through the sidecar is made once and
// notified once.
func runDemoAPIPix(ctx context.Context, e *cli.Env, cfg harness.StackConfig, asJSON bool, say func(string, ...any)) error {
	cfg.PSPFlavour = harness.PSPAPIPix
	cfg.WorkerArgs = append(cfg.WorkerArgs, "--model-tools", apipix.CobName)
	rep := &apipixReport{CrashPoint: demoAPIPixCrashPoint}
	say("retrysafe demo (API Pix): one cob, a redelivered message, a worker killed mid-charge, a payment, a refund\n")
	st, err := harness.StartStack(ctx, cfg)
	if err != nil {
		return fmt.Errorf("demo: start: %w", err)
	}
	defer st.Close()
	rep.Schema = st.Cfg.Schema
	say("1. Started: the sandbox PSP speaking API Pix %s (OAuth2 client credentials), the", st.PSP.Ready)
	say("   model %s, WhatsApp %s, and the server %s with the Pix callback.", st.Model.Ready, st.WhatsApp.Ready, st.Server.Ready)

	fi, err := demoAPIPixCrash(ctx, st, rep, say)
	if err != nil {
		return err
	}
	if err := demoAPIPixRecover(ctx, st, rep, say); err != nil {
		return err
	}
	if err := demoAPIPixPay(ctx, st, rep, fi, say); err != nil {
		return err
	}
	// Let a late duplicate (there should be none) show up before counting.
	time.Sleep(time.Second)
	if err := demoAPIPixRead(ctx, st, rep); err != nil {
		return err
	}
	return demoAPIPixResult(e, rep, fi, asJSON, say)
}

// demoAPIPixCrash seeds the conversation, delivers the message twice with
// worker #1 armed, and waits for it to die after the PSP created the cob.
func demoAPIPixCrash(ctx context.Context, st *harness.Stack, rep *apipixReport, say func(string, ...any)) (*harness.FrozenIntent, error) {
	if err := st.SeedConversation(ctx, demoWaID, demoCustomer, demoInvoice, demoDueCents); err != nil {
		return nil, err
	}
	say("2. Customer %s owes invoice %s, R$ 180,00; the invoice is the intent reference.", demoCustomer, demoInvoice)
	w1, err := st.StartWorker(ctx, "worker-1", "RETRYSAFE_FAILPOINTS="+demoAPIPixCrashPoint)
	if err != nil {
		return nil, err
	}
	say("3. Worker #1 started, armed to kill itself at %q.", demoAPIPixCrashPoint)
	statuses, err := deliverTwice(ctx, st)
	if err != nil {
		return nil, err
	}
	rep.Deliveries = append(rep.Deliveries, statuses...)
	say("4. The customer writes %q; WhatsApp delivers it twice: HTTP %d and %d.", demoMessage, statuses[0], statuses[1])
	if err := awaitCrash(ctx, w1); err != nil {
		return nil, err
	}
	fi, err := st.Intent(ctx, demoInvoice, apipix.CobName)
	if err != nil || fi == nil {
		return nil, fmt.Errorf("demo: no frozen intent after the crash (%v)", err)
	}
	rep.Intent, rep.Key = fi.Payload, fi.Key
	if rep.TxID, err = apipix.TxID(fi.Key); err != nil {
		return nil, err
	}
	cobs, err := st.Cobs(ctx)
	if err != nil {
		return nil, err
	}
	say("5. Worker #1 froze %s and PUT /cob/%s (charges at the PSP: %d),", mustJSON(fi.Payload), rep.TxID, len(cobs))
	say("   then was killed with SIGKILL before recording it. txid = the key's first 35 hex digits.")
	return fi, nil
}

// demoAPIPixRecover redelivers the message once more and lets worker #2
// find the cob by txid once the queue rescues the job.
func demoAPIPixRecover(ctx context.Context, st *harness.Stack, rep *apipixReport, say func(string, ...any)) error {
	st2, began, err := redeliverOnce(ctx, st)
	if err != nil {
		return err
	}
	rep.Deliveries = append(rep.Deliveries, st2)
	say("6. Redelivered once more (HTTP %d); worker #2 started, waiting for the queue to rescue the job...", st2)
	if err := awaitSettled(ctx, st, apipix.CobName, 0); err != nil {
		return fmt.Errorf("demo: the conversation did not settle: %w\nserver log:\n%s", err, lastWorkerTail(st))
	}
	rep.RecoverySecs = time.Since(began).Seconds()
	ps, err := st.PixStats(ctx)
	if err != nil {
		return err
	}
	say("7. Worker #2 took the lease over, asked the PSP by txid (GET /cob/%s) and found the", rep.TxID)
	say("   charge instead of creating another (%.0fs; the PSP saw PUTs %d, reads %d).", rep.RecoverySecs, ps["cob_puts"], ps["cob_reads"])
	return nil
}

// demoAPIPixPay pays the cob, redelivers its Pix callback, asks the
// sidecar for the charge again, and refunds part of it twice.
func demoAPIPixPay(ctx context.Context, st *harness.Stack, rep *apipixReport, fi *harness.FrozenIntent, say func(string, ...any)) error {
	if err := st.Pay(ctx, rep.TxID); err != nil {
		return err
	}
	say("8. The customer pays the Pix; the PSP calls POST /webhooks/pix/sandbox/pix.")
	if err := awaitTemplates(ctx, st, 1); err != nil {
		return fmt.Errorf("demo: no receipt: %w", err)
	}
	cobs, err := st.Cobs(ctx)
	if err != nil || len(cobs) == 0 || len(cobs[0].Pix) == 0 {
		return fmt.Errorf("demo: the paid charge is not listed (%v)", err)
	}
	e2e := cobs[0].Pix[0].EndToEndID
	if err := st.RedeliverPix(ctx, e2e); err != nil {
		return err
	}
	if err := harness.WaitFor(ctx, 30*time.Second, func() (bool, error) {
		s, err := st.PixStats(ctx)
		return s["callbacks"] >= 2, err
	}); err != nil {
		return fmt.Errorf("demo: the redelivered callback did not arrive: %w", err)
	}
	say("9. The PSP notifies the same Pix again: a duplicate; the receipt went out once.")

	if rep.Sidecar, err = sidecarExecute(ctx, st, apipix.CobName, demoInvoice,
		`{"amount":"R$ 190,00","payer_tax_id":"52998224725","payer_name":"C-42"}`); err != nil {
		return err
	}
	say("10. Another agent asks the sidecar for the same invoice with R$ 190,00: %s, replayed %v, divergent %v.",
		rep.Sidecar.Status, rep.Sidecar.Replayed, rep.Sidecar.Divergent)
	refundRef := demoInvoice + ":refund:1"
	refund := fmt.Sprintf(`{"e2eid":%q,"amount":"50,00","description":"desconto"}`, e2e)
	if rep.Refund, err = sidecarExecute(ctx, st, apipix.RefundName, refundRef, refund); err != nil {
		return err
	}
	if rep.RefundReplayed, err = sidecarExecute(ctx, st, apipix.RefundName, refundRef, refund); err != nil {
		return err
	}
	if err := awaitTemplates(ctx, st, 2); err != nil {
		return fmt.Errorf("demo: no refund notice: %w", err)
	}
	say("11. A partial refund of R$ 50,00 (pix.refund, its own intent): %s, then %s (replayed %v);",
		rep.Refund.Status, rep.RefundReplayed.Status, rep.RefundReplayed.Replayed)
	say("    the PSP settles it and notifies it; the order is partially refunded.")
	return nil
}

// awaitTemplates waits until n templates (the receipt, the refund's
// notice) went out.
func awaitTemplates(ctx context.Context, st *harness.Stack, n int) error {
	return harness.WaitFor(ctx, 60*time.Second, func() (bool, error) {
		ms, err := st.Messages(ctx)
		var tpl int
		for _, m := range ms {
			if m.Type == "template" {
				tpl++
			}
		}
		return tpl >= n, err
	})
}

// demoAPIPixRead fills the report with what the conversation left.
func demoAPIPixRead(ctx context.Context, st *harness.Stack, rep *apipixReport) error {
	var err error
	if rep.Cobs, err = st.Cobs(ctx); err != nil {
		return err
	}
	if rep.PSP, err = st.PixStats(ctx); err != nil {
		return err
	}
	oc, err := readOutcome(ctx, st, apipix.CobName)
	if err != nil {
		return err
	}
	rep.Replies, rep.Receipts, rep.OrderStatus, rep.Callbacks = oc.replies, oc.receipts, oc.orderStatus, oc.verdicts
	rep.ActionStatus, rep.Attempts = oc.actionStatus, oc.attempts
	return nil
}

// demoAPIPixResult judges the story, prints the result (and the report
// with --json) and says whether it held.
func demoAPIPixResult(e *cli.Env, rep *apipixReport, fi *harness.FrozenIntent, asJSON bool, say func(string, ...any)) error {
	refunds := 0
	for _, c := range rep.Cobs {
		for _, p := range c.Pix {
			refunds += len(p.Devolucoes)
		}
	}
	rep.OK = len(rep.Cobs) == 1 && rep.Cobs[0].TxID == rep.TxID && rep.PSP["cob_overwritten"] == 0 && rep.PSP["cob_puts"] == 1 &&
		len(rep.Replies) == 1 && len(rep.Receipts) == 2 && rep.OrderStatus == "partially_refunded" && rep.ActionStatus == "completed" &&
		rep.Sidecar.Key == fi.Key && rep.Sidecar.Replayed && refunds == 1 && rep.PSP["refunds_created"] == 1 &&
		rep.Refund.Status == "completed" && rep.RefundReplayed.Replayed
	say("")
	say("Result (API Pix)")
	say("  charges at the PSP   %d  (txid %s, revisao %d, overwritten %d)", len(rep.Cobs), rep.TxID, revisao(rep.Cobs), rep.PSP["cob_overwritten"])
	say("  replies sent         %d  %s", len(rep.Replies), replyText(rep.Replies))
	say("  receipts sent        %d  %v (order %s)", len(rep.Receipts), templates(rep.Receipts), rep.OrderStatus)
	say("  refunds at the PSP   %d  (PUTs %d)", refunds, rep.PSP["refund_puts"])
	say("  Pix callbacks        %s", cli.CountsText(rep.Callbacks))
	if asJSON {
		if err := writeJSON(e.Stdout, rep); err != nil {
			return err
		}
	}
	if !rep.OK {
		say("\nFAIL: expected one cob under the key's txid, never overwritten, one reply, one receipt and one refund notice, one refund.")
		return cli.ErrSilentFailure
	}
	say("\nOK: one intent, one txid, one cob, one reply, one receipt, one refund, through redeliveries and a crash.")
	return nil
}

func revisao(cs []harness.Cob) int {
	if len(cs) == 0 {
		return -1
	}
	return cs[0].Revisao
}

func templates(ms []harness.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Template)
	}
	return out
}
