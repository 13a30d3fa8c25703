package apipix

import "testing"

// The request log names charges by txid and refunds by devolução id, and
// nothing else.
func TestRequestKey(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]string{
		"/api/cob/abc123":                      "abc123",
		"/api/pix/E123/devolucao/D1":           "D1",
		"/api/cob/":                            "",
		"/api/cob/abc/x":                       "",
		"/api/pix/E123":                        "",
		"/api/pix/E123/devolucao/":             "",
		"/api/pix/E1/x/devolucao/D1":           "",
		"/api/pix/E123/devolucao/D1/x":         "",
		"/api/webhook/7d9f0335-8dcc-4054-9bf9": "",
	} {
		got, ok := requestKey(path)
		if got != want && ok || ok != (want != "") {
			t.Errorf("%s: %q %v, want %q", path, got, ok, want)
		}
	}
}
