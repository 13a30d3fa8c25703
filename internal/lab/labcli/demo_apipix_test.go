package labcli

import "testing"

// The API Pix demo, as a user runs it: one cob under the key's txid, found
// by the second worker instead of created again, one reply, one receipt,
// one refund made once and notified once.
func TestDemoAPIPix(t *testing.T) {
	t.Parallel()
	bin := buildBinary(t)
	var rep apipixReport
	runDemoCmd(t, bin, &rep, "--psp", "apipix")
	if len(rep.Cobs) != 1 || rep.PSP["cob_puts"] != 1 || rep.PSP["cob_reads"] < 1 || rep.Attempts < 2 || rep.Key[:35] != rep.TxID {
		t.Fatalf("report: %+v", rep)
	}
	if rep.Callbacks["duplicate"] < 1 || rep.Callbacks["processed"] != 2 {
		t.Fatalf("callback verdicts %v, want 2 processed (payment, partial refund) and a duplicate", rep.Callbacks)
	}
}
