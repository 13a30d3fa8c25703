package sidecar_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testutil"
)

// Each bad input of issue 18, sent while good calls are in flight: 400
// naming the field, nothing frozen, nothing sent to the PSP, and every
// good call charged once.
func TestExecuteRefusesBadInputWhileOthersRun(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	good := func(amount string) string {
		return `{"customer_id":"cust-42","amount":` + amount + `,"pix_key":"52998224725","pix_key_type":"cpf"}`
	}
	bad := []struct {
		name, body, field string
	}{
		{"duplicate amount", `{"intent_ref":"bad-1","fields":{"customer_id":"c","amount":"1,00","amount":"9999,00","pix_key":"52998224725","pix_key_type":"cpf"}}`, "fields.amount"},
		{"duplicate intent_ref", `{"intent_ref":"bad-2","intent_ref":"bad-2b","fields":` + good(`"1,00"`) + `}`, "intent_ref"},
		{"NUL in a field", `{"intent_ref":"bad-3","fields":{"customer_id":"cust\u0000-42","amount":"180,00","pix_key":"52998224725","pix_key_type":"cpf"}}`, "fields.customer_id"},
		{"NUL in intent_ref", `{"intent_ref":"bad-4\u0000","fields":` + good(`"180,00"`) + `}`, "intent_ref"},
		{"NUL in source_ref", `{"intent_ref":"bad-5","fields":` + good(`"180,00"`) + `,"source_ref":"m\u0000"}`, "source_ref"},
		{"NUL in a member name", `{"intent_ref":"bad-6","fields":{"customer_id":"c","amount":"180,00","pix_key":"52998224725","pix_key_type":"cpf","x\u0000":"1"}}`, "fields.x\x00"},
		{"invalid UTF-8", "{\"intent_ref\":\"bad-7\",\"fields\":{\"customer_id\":\"cust\xff\",\"amount\":\"180,00\",\"pix_key\":\"52998224725\",\"pix_key_type\":\"cpf\"}}", "fields.customer_id"},
		{"unpaired surrogate", `{"intent_ref":"bad-8","fields":{"customer_id":"cust\ud800","amount":"180,00","pix_key":"52998224725","pix_key_type":"cpf"}}`, "fields.customer_id"},
	}
	const goods = 24
	var wg sync.WaitGroup
	goodStatus := make([]int, goods)
	for i := range goods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f := `{"customer_id":"cust-42","amount":"180,00","pix_key":` + quote(testutil.CPF(3000+i)) + `,"pix_key_type":"cpf"}`
			goodStatus[i] = h.execute(tokenA, fmt.Sprintf("good-%d", i), f).status
		}()
	}
	replies := make([]reply, len(bad))
	for i, b := range bad {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = doHTTP(t, http.MethodPost, h.url+"/v1/tools/pix.charge/execute", tokenA, b.body)
		}()
	}
	wg.Wait()
	for i, b := range bad {
		r := replies[i]
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400: %s", b.name, r.status, r.body)
			continue
		}
		p := r.problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != b.field {
			t.Errorf("%s: errors %+v, want field %q", b.name, p.Errors, b.field)
		}
		if strings.Contains(strings.ToLower(p.Detail), "retrying the same call is safe") {
			t.Errorf("%s: told to retry: %s", b.name, r.body)
		}
	}
	for i, s := range goodStatus {
		if s != http.StatusOK {
			t.Errorf("good call %d: HTTP %d", i, s)
		}
	}
	if n := h.count("intents"); n != goods {
		t.Errorf("%d intents frozen, want %d (the good calls only)", n, goods)
	}
	if n := h.psp.Count(chargePath); n != goods || h.psp.Requests() != goods {
		t.Errorf("PSP: %d charges from %d requests, want %d and %d", n, h.psp.Requests(), goods, goods)
	}
}
