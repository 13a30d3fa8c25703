package restarttest

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/retrysafe/retrysafe/executor/executortest"
	"github.com/retrysafe/retrysafe/tools/apipix"
)

// collectRefunds reads what became of every refund and adds it to the
// verdict. Called after collect.
func (t *tester) collectRefunds(ctx context.Context, rep *Report) {
	rc := t.refunds
	if rc == nil {
		return
	}
	rep.Refunds = rc
	var fail []string
	tenant := t.stack.Cfg.Tenant
	keys := map[string]string{}   // intent_ref → frozen key
	status := map[string]string{} // intent_ref → action status
	err := retryQuery(ctx, func() error {
		ins, err := executortest.Intents(ctx, t.stack.Pool, tenant, apipix.RefundName)
		for _, in := range ins {
			keys[in.Ref], status[in.Ref] = in.Key, in.Status
		}
		return err
	})
	if err != nil {
		fail = append(fail, "read the refund intents: "+err.Error())
	}
	refundsOn, idsOn, pspFail := t.refundsAtPSP(ctx, rc)
	fail = append(fail, pspFail...)

	rows := map[string]*Row{}
	for _, name := range RefundPoints {
		rows[name] = &Row{Scenario: "refund:" + name, Description: refundCrashPoint(name).Description, Charges: map[int]int{}}
	}
	for _, k := range rc.Kills {
		rows[strings.TrimPrefix(k.Scenario, "refund:")].countKill(k)
	}
	t.mu.Lock()
	for _, r := range t.runs {
		if r.RefundScenario == "" || r.E2EID == "" {
			continue
		}
		ref := refundRef(r.Invoice)
		res := refundResult(RefundResult{Index: r.Index, Scenario: r.RefundScenario, IntentRef: ref, E2EID: r.E2EID, AmountCents: r.RefundCents,
			FrozenKey: keys[ref], ActionStatus: status[ref], Refunds: refundsOn[r.E2EID], Hits: t.refundHits[r.Index]}, idsOn[r.E2EID])
		rc.Results = append(rc.Results, res)
		rows[r.RefundScenario].addRefund(res)
	}
	t.mu.Unlock()
	fail = append(fail, rc.total(rows)...)
	fl := failureList(fail)
	total := rc.Total
	fl.add(total.Duplicates > 0, "%d duplicate refunds", total.Duplicates)
	fl.add(total.Lost > 0, "%d lost refunds", total.Lost)
	fl.add(total.Stuck > 0, "%d refunds left started", total.Stuck)
	fl.add(total.KeysEqual < total.Runs, "%d refunds whose attempts carried different devolução ids", total.Runs-total.KeysEqual)
	fl.add(rc.PSPCreated != total.Runs, "the PSP created %d refunds for %d refund intents", rc.PSPCreated, total.Runs)
	replayed := rc.SidecarReplay["completed (replayed)"]
	fl.add(replayed != total.Runs && !t.cfg.Naive, "%d of %d refunds asked again through the sidecar answered other than completed (replayed)", total.Runs-replayed, total.Runs)
	rep.merge(fl, fmt.Sprintf("; refunds: %d made exactly once through %d worker kills, one devolução id per refund, 0 lost, 0 stuck", total.Runs, total.Kills))
}

// refundsAtPSP reads the refunds the PSP made (e2eid → devoluções), the
// devolução ids of its refund requests (e2eid → ids), its counters and
// the refund notices sent.
func (t *tester) refundsAtPSP(ctx context.Context, rc *RefundCheck) (refundsOn map[string]int, idsOn map[string][]string, fail []string) {
	cobs, err := t.stack.Cobs(ctx)
	if err != nil {
		fail = append(fail, "list the PSP's charges: "+err.Error())
	}
	refundsOn = map[string]int{}
	for _, c := range cobs {
		for _, p := range c.Pix {
			refundsOn[p.EndToEndID] += len(p.Devolucoes)
		}
	}
	reqs, err := t.stack.PSPRequests(ctx)
	if err != nil {
		fail = append(fail, "read the PSP's request log: "+err.Error())
	}
	idsOn = map[string][]string{}
	for _, rq := range reqs {
		rest, ok := strings.CutPrefix(rq.Path, "/api/pix/")
		if !ok {
			continue
		}
		if e, _, ok := strings.Cut(rest, "/devolucao/"); ok {
			idsOn[e] = append(idsOn[e], rq.IdempotencyKey)
		}
	}
	if st, err := t.stack.PixStats(ctx); err == nil {
		rc.PSPPuts, rc.PSPCreated = st["refund_puts"], st["refunds_created"]
	} else {
		fail = append(fail, "read the PSP's counters: "+err.Error())
	}
	if msgs, err := t.stack.Messages(ctx); err == nil {
		for _, m := range msgs {
			if m.Type == "template" && m.Template == refundNoticeTemplate {
				rc.Notices++
			}
		}
	}
	return refundsOn, idsOn, fail
}

// refundResult judges one refund: res holds what the ledger and the
// PSP's charges say, ids the devolução ids of its requests at the PSP.
func refundResult(res RefundResult, reqIDs []string) RefundResult {
	ids := map[string]bool{}
	var why []string
	if res.FrozenKey == "" {
		why = append(why, "no frozen refund intent")
	} else if id, err := apipix.DevolucaoID(res.FrozenKey); err == nil {
		ids[id] = true
	}
	for _, id := range reqIDs {
		ids[id] = true
		res.PSPRequests++
	}
	for id := range ids {
		res.IDs = append(res.IDs, id)
	}
	slices.Sort(res.IDs)
	res.IDsEqual = res.FrozenKey != "" && len(ids) == 1
	switch {
	case res.ActionStatus == "started":
	case res.ActionStatus != "completed":
		why = append(why, "refund action "+cmp.Or(res.ActionStatus, "missing"))
	}
	if res.Refunds == 0 {
		why = append(why, "no refund at the PSP")
	}
	res.Lost = len(why) > 0
	res.LostWhy = strings.Join(why, "; ")
	return res
}

// addRefund adds a refund of the row's scenario: a run of one message
// whose charges are the refunds and whose keys the devolução ids.
func (row *Row) addRefund(res RefundResult) {
	stuck := 0
	if res.ActionStatus == "started" {
		stuck = 1
	}
	row.addResult(RunResult{Messages: 1, KeysEqual: res.IDsEqual, Charges: res.Refunds, Lost: res.Lost, Stuck: stuck, PSPRequests: res.PSPRequests})
}

// killsAt says how each worker armed at the refund point name died and
// how many refunds it held then, for a point left uncovered: whether the
// worker was forced because nothing was left to settle (serve or the
// sidecar took the chunk) or died of something else.
func (rc *RefundCheck) killsAt(name string) string {
	var out []string
	for _, k := range rc.Kills {
		if k.Scenario == "refund:"+name {
			out = append(out, fmt.Sprintf("%s %s, held %d", k.Worker, k.How, k.RunsHit))
		}
	}
	if len(out) == 0 {
		return "none started"
	}
	return strings.Join(out, "; ")
}

// total sets the refund rows, in RefundPoints order, and their total,
// and returns the points no refund reached.
func (rc *RefundCheck) total(rows map[string]*Row) []string {
	var fail []string
	total := Row{Scenario: "refund total", Charges: map[int]int{}, Covered: true}
	for _, name := range RefundPoints {
		row := rows[name]
		row.Covered = row.Runs == 0 || row.AtPoint > 0
		rc.Rows = append(rc.Rows, *row)
		total.add(*row)
		if !row.Covered {
			fail = append(fail, fmt.Sprintf("refund at %s not covered (never reached; its workers: %s)", name, rc.killsAt(name)))
		}
	}
	rc.Total = total
	return fail
}

// refundNoticeTemplate is the template of a partial refund's notice
// (webhook's default notifier).
const refundNoticeTemplate = "reembolso_parcial"

// refundsPlanned reports whether the test asks for refunds at all.
func (t *tester) refundsPlanned() bool {
	if !t.apipix() {
		return false
	}
	for _, r := range t.runs {
		if r.RefundScenario != "" {
			return true
		}
	}
	return false
}

// writeTable writes the refunds' rows and figures.
func (rc *RefundCheck) writeTable(w io.Writer) error {
	fmt.Fprintf(w, "\n  refunds (a partial pix.refund after the paid charge, its own intent <invoice>:refund:1, asked through serve's sidecar,\n")
	fmt.Fprintf(w, "  whose first PUT fails before the PSP acts, so that a worker's reconciler settles it): %d planned, %d asked for\n", rc.Planned, rc.Requested)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "refund scenario\trefunds\tkills\tat point\thit\tids equal\trefunds/intent\tlost\tstuck\tPSP requests\t")
	line := func(row Row) {
		name := row.Scenario
		if !row.Covered {
			name += " (!)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d/%d\t%s\t%d\t%d\t%d\t\n", name, row.Runs, row.Kills, row.AtPoint, row.Hit,
			row.KeysEqual, row.Runs, chargesCell(row.Charges), row.Lost, row.Stuck, row.PSPRequests)
	}
	for _, row := range rc.Rows {
		line(row)
	}
	line(rc.Total)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  refunds at the PSP: %d PUTs, %d created; sidecar first answers %s, asked again %s; partial-refund notices sent %d\n",
		rc.PSPPuts, rc.PSPCreated, countsCell(rc.SidecarFirst), countsCell(rc.SidecarReplay), rc.Notices)
	if rc.Moved > 0 {
		fmt.Fprintf(w, "  %d refunds moved from a later point to one whose chunks serve's reconciler had taken before the armed worker reached it\n", rc.Moved)
	}
	shown := 0
	for _, res := range rc.Results {
		if !res.Lost && res.Refunds == 1 && res.IDsEqual {
			continue
		}
		if shown == 10 {
			fmt.Fprintln(w, "  ... (every refund is in --json)")
			break
		}
		shown++
		fmt.Fprintf(w, "  refund of run %d (%s, %s, hit by %d kills, action %s, %d PSP requests): %d refunds, %d ids; %s\n",
			res.Index, res.Scenario, res.IntentRef, res.Hits, cmp.Or(res.ActionStatus, "none"), res.PSPRequests, res.Refunds, len(res.IDs), res.LostWhy)
	}
	return nil
}

// countsCell writes counts by name: "completed 3, in_flight 20".
func countsCell(m map[string]int) string { return cmp.Or(joinCounts(m, "%s %d", ", "), "none") }
