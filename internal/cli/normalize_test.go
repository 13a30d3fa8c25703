package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/derive"
	"github.com/retrysafe/retrysafe/tools"
)

func TestNormalizeCommand(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{`{"rule":"taxid","version":3,"value":"12.ABC.345/01DE-35"}`, `{"value":"12ABC34501DE35","type":"cnpj"}`},
		{`{"rule":"taxid","version":3,"value":"12abc34501de35"}`, `{"value":"12ABC34501DE35","type":"cnpj"}`},
		{`{"rule":"taxid","version":3,"value":"12ABC34501DE36"}`, `{"error":"invalid field","reason":"CNPJ check digits do not match"}`},
		{`{"rule":"taxid","version":3,"value":52998224725}`, `{"error":"invalid field","reason":"must be a JSON string, not a number: a number loses leading zeros"}`},
		{`{"rule":"pix_key","version":3,"value":"+55 (11) 99999-9999"}`, `{"value":"+5511999999999","type":"phone"}`},
		{`{"rule":"phone","version":3,"value":"0055 35 98262-7235"}`, `{"error":"ambiguous field","reason":"` + "ambiguous phone number: a leading 00 may be an international prefix or a Brazilian carrier selection; write it as +\u003ccountry code\u003e \u003cnumber\u003e" + `"}`},
		{`{"rule":"template","version":1,"value":"ΟΔΟΣ"}`, `{"value":"οδος"}`},
		{`{"rule":"money","version":2,"value":"R$ 1.800,00"}`, `{"value":"180000"}`},
		{`{"rule":"text","version":3,"value":"  "}`, `{"error":"missing required field","reason":"empty"}`},
	}
	var in []string
	for _, c := range cases {
		in = append(in, c.in)
	}
	e, out, errb := testEnv(strings.NewReader(strings.Join(in, "\n")), nil)
	if code := Run(context.Background(), e, []string{"normalize"}); code != 0 {
		t.Fatalf("exit %d: %s", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%d lines for %d inputs:\n%s", len(lines), len(cases), out)
	}
	for i, c := range cases {
		var got, want any
		if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(c.want), &want); err != nil {
			t.Fatal(err)
		}
		if g, _ := json.Marshal(got); string(g) != jsonText(t, want) {
			t.Errorf("%s\n got %s\nwant %s", c.in, lines[i], c.want)
		}
	}
	// A line that is not a request fails the run.
	e, out, _ = testEnv(strings.NewReader(`{"rule":"nope","version":3,"value":"x"}`+"\n"+`{"rule":"text","value":"x"}`), nil)
	if code := Run(context.Background(), e, []string{"normalize"}); code != 1 || strings.Count(out.String(), `"bad request"`) != 2 {
		t.Fatalf("exit %d: %s", code, out)
	}
	// --help lists every rule and the versions.
	e, out, _ = testEnv(strings.NewReader(""), nil)
	Run(context.Background(), e, []string{"normalize", "--help"})
	for _, r := range derive.Rules() {
		if !strings.Contains(out.String(), string(r)) {
			t.Errorf("--help does not list %s", r)
		}
	}
	if !strings.Contains(out.String(), "Versions: 1 to 3") {
		t.Errorf("--help does not list the versions:\n%s", out)
	}
}

func jsonText(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// retrysafe key knows pix.charge: the three spellings of one alphanumeric
// CNPJ give the key the tools' own Deriver gives, at version 3 by default
// and at version 2 on request.
func TestKeyCommandPixCharge(t *testing.T) {
	t.Parallel()
	var in []string
	for _, k := range []string{"12.ABC.345/01DE-35", "12ABC34501DE35", "12abc34501de35"} {
		in = append(in, `{"tenant":"t","action":"pix.charge","fields":{"customer_id":"c1","amount":"180,00","pix_key":"`+k+`","intent_ref":"inv-1"}}`)
	}
	in = append(in, `{"tenant":"t","action":"pix.charge","fields":{"customer_id":"c1","amount":"180,00","pix_key":"529.982.247-25","intent_ref":"inv-1"},"version":2}`)
	e, out, errb := testEnv(strings.NewReader(strings.Join(in, "\n")), map[string]string{"RETRYSAFE_HMAC_KEY": testSecret})
	if code := Run(context.Background(), e, []string{"key"}); code != 0 {
		t.Fatalf("exit %d: %s %s", code, errb, out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var keys []string
	for _, l := range lines {
		var o keyOutput
		if err := json.Unmarshal([]byte(l), &o); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, o.Key)
	}
	d, err := derive.New(derive.Config{Secret: []byte(testSecret), Schemas: tools.BuiltinToolSchemas(),
		DefaultVersions: map[string]int{tools.PixChargeName: 3}})
	if err != nil {
		t.Fatal(err)
	}
	want, err := d.Derive("t", tools.PixChargeName, map[string]any{"customer_id": "c1", "amount": "180,00", "pix_key": "12ABC34501DE35", "intent_ref": "inv-1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if keys[0] != want.Key || keys[1] != want.Key || keys[2] != want.Key {
		t.Fatalf("keys %v, want %s", keys[:3], want.Key)
	}
	v2, err := d.Derive("t", tools.PixChargeName, map[string]any{"customer_id": "c1", "amount": "180,00", "pix_key": "529.982.247-25", "intent_ref": "inv-1"}, &derive.Opts{Version: 2})
	if err != nil || keys[3] != v2.Key {
		t.Fatalf("v2 key %s, want %s (%v)", keys[3], v2.Key, err)
	}
}
