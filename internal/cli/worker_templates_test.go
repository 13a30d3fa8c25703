package cli

import "testing"

func TestParseReplyTemplates(t *testing.T) {
	got, err := parseReplyTemplates("retomar_conversa:pt_BR, acme=acme_retomar ,")
	if err != nil || len(got) != 2 || got["*"].Name != "retomar_conversa" || got["*"].Language != "pt_BR" || got["acme"].Name != "acme_retomar" || !got["acme"].BodyParam {
		t.Fatalf("%+v %v", got, err)
	}
	for _, bad := range []string{"=x", "acme=", "Bad Name", "a=x,a=y"} {
		if _, err := parseReplyTemplates(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
