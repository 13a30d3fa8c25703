package restarttest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/internal/lab/harness"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/webhook"
)

// PSP flavours (Config.PSP).
const (
	PSPV1     = harness.PSPV1
	PSPAPIPix = harness.PSPAPIPix
)

// APIPixCheck is what the API Pix flavour checks beyond the charges: every
// charge paid, each payment's receipt sent once, no charge overwritten.
type APIPixCheck struct {
	// Paid: charges the test paid (every ATIVA one); Effects: payments the
	// server's Pix callback applied (charges of no intent, as the naive
	// control makes, are logged unknown and apply nothing).
	Paid    int `json:"paid"`
	Effects int `json:"payment_effects"`
	// Receipts: payment receipts sent; RunsReceiptOnce: runs charged once
	// whose customer got exactly one; RunsReceiptWrong: the others.
	Receipts         int `json:"receipts"`
	RunsReceiptOnce  int `json:"runs_receipt_once"`
	RunsReceiptWrong int `json:"runs_receipt_wrong"`
	// From the PSP: cob PUTs, charges overwritten (an ATIVA charge given
	// another body: never by retrysafe), callbacks delivered.
	CobPuts     int `json:"cob_puts"`
	Overwritten int `json:"cob_overwritten"`
	Callbacks   int `json:"callbacks"`
}

func (t *tester) apipix() bool { return t.cfg.PSP == PSPAPIPix }

func (t *tester) pspFlavour() string {
	if t.apipix() {
		return PSPAPIPix
	}
	return PSPV1
}

// chargeAction is the tool that charges.
func (t *tester) chargeAction() string {
	if t.apipix() {
		return apipix.CobName
	}
	return tools.PixChargeName
}

// keyKinds: a cob's payer is a CPF or a CNPJ.
func (t *tester) keyKinds() []string {
	if t.apipix() {
		return []string{KindCPF, KindCNPJ}
	}
	return keyKinds
}

func (t *tester) pspWorkerArgs() []string {
	if t.apipix() {
		return []string{"--model-tools", apipix.CobName}
	}
	return nil
}

// failpointFor names the crash points of the charging tool.
func (t *tester) failpointFor(point string) string {
	if t.apipix() {
		return strings.Replace(point, "."+tools.PixChargeName, "."+apipix.CobName, 1)
	}
	return point
}

// pspURLEnv points a worker at its proxy.
func (t *tester) pspURLEnv(proxyURL string) string {
	if t.apipix() {
		return "RETRYSAFE_APIPIX_URL=" + proxyURL + "/api"
	}
	return "RETRYSAFE_PSP_URL=" + proxyURL
}

// charges lists the PSP's charges as collect reads them: for API Pix the
// txid stands for the key, and the charge's solicitacaoPagador (the
// intent_ref, which pix.cob sends by default) names its intent, so that
// the naive control's charges under random txids are counted too.
func (t *tester) charges(ctx context.Context) ([]harness.Charge, error) {
	if !t.apipix() {
		return t.stack.Charges(ctx)
	}
	cobs, err := t.stack.Cobs(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]harness.Charge, 0, len(cobs))
	for _, c := range cobs {
		cents, _ := strconv.ParseInt(strings.Replace(c.Valor.Original, ".", "", 1), 10, 64)
		out = append(out, harness.Charge{ID: c.TxID, AmountCents: cents, IdempotencyKey: c.TxID, Status: c.Status,
			Description: "retrysafe " + c.SolicitacaoPagador})
	}
	return out, nil
}

// requestKey is the key a PSP request carried: for API Pix, the frozen
// key whose first 35 hex digits are the request's txid (else the txid
// itself, which then matches no intent's key).
func (t *tester) requestKey(k string, refByKey map[string]string) string {
	if !t.apipix() || len(k) != apipix.IDLength {
		return k
	}
	for key := range refByKey {
		if strings.HasPrefix(key, k) {
			return key
		}
	}
	return k
}

// payAll pays every ATIVA charge once the runs have settled, and waits
// for the Pix callbacks to be applied and their receipts sent.
func (t *tester) payAll(ctx context.Context) error {
	if !t.apipix() {
		return nil
	}
	t.setPhase("paying", "")
	cobs, err := t.stack.Cobs(ctx)
	if err != nil {
		return err
	}
	keys := map[string]bool{} // the txids of our charges: their keys' first characters
	ins, err := executortest.Intents(ctx, t.stack.Pool, t.stack.Cfg.Tenant, apipix.CobName)
	if err != nil {
		return err
	}
	for _, in := range ins {
		keys[in.Key[:min(len(in.Key), apipix.IDLength)]] = true
	}
	paid, ours := 0, 0
	for _, c := range cobs {
		if c.Status != "ATIVA" {
			continue
		}
		if err := t.stack.Pay(ctx, c.TxID); err != nil {
			return err
		}
		paid++
		if keys[c.TxID] {
			ours++
		}
	}
	t.mu.Lock()
	t.pixPaid = paid
	t.mu.Unlock()
	// The redelivery workers are gone: one plain worker relays the
	// receipts (the payment outbox).
	w, err := t.startWorker(ctx, "receipts", "", 0, nil)
	if err != nil {
		return err
	}
	defer w.proc.Stop(5 * time.Second)
	// Applied, and no receipt left to send.
	return harness.WaitFor(ctx, 90*time.Second, func() (bool, error) {
		c, err := webhook.CountEffects(ctx, t.stack.Pool, t.stack.Cfg.Tenant, webhook.OrderPaid)
		return c.Effects >= ours && c.Pending == 0, err
	})
}

// checkReceipts adds the API Pix checks to the verdict.
func (t *tester) checkReceipts(rep *Report) {
	if !t.apipix() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := &APIPixCheck{}
	rep.APIPix = c
	t.mu.Lock()
	c.Paid = t.pixPaid
	t.mu.Unlock()
	var fail []string
	if ec, err := webhook.CountEffects(ctx, t.stack.Pool, t.stack.Cfg.Tenant, webhook.OrderPaid); err != nil {
		fail = append(fail, "read the payment effects: "+err.Error())
	} else {
		c.Effects = ec.Effects
	}
	msgs, err := t.stack.Messages(ctx)
	if err != nil {
		fail = append(fail, "list the receipts: "+err.Error())
	}
	receipts := map[string]int{}
	for _, m := range msgs {
		if m.Type == "template" && m.Template != refundNoticeTemplate {
			c.Receipts++
			receipts[strings.TrimPrefix(m.To, "+")]++
		}
	}
	if st, err := t.stack.PixStats(ctx); err == nil {
		c.CobPuts, c.Overwritten, c.Callbacks = st["cob_puts"], st["cob_overwritten"], st["callbacks"]
	} else {
		fail = append(fail, "read the PSP's counters: "+err.Error())
	}
	t.mu.Lock()
	for _, res := range rep.Results {
		if res.Charges != 1 || !res.KeysEqual {
			continue // counted as a failure already
		}
		if receipts[t.runs[res.Index].WaID] == 1 {
			c.RunsReceiptOnce++
		} else {
			c.RunsReceiptWrong++
		}
	}
	t.mu.Unlock()
	fl := failureList(fail)
	fl.add(c.RunsReceiptWrong > 0, "%d runs charged once whose receipt was not sent exactly once", c.RunsReceiptWrong)
	fl.add(c.Overwritten > 0, "%d charges overwritten at the PSP", c.Overwritten)
	rep.merge(fl, fmt.Sprintf("; API Pix: %d charges paid, every receipt sent once (%d), none overwritten", c.Paid, c.Receipts))
}
