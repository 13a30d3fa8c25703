package apipix_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testutil"
	sandbox "github.com/retrysafe/retrysafe/sandbox/apipix"
	"github.com/retrysafe/retrysafe/tools"
	"github.com/retrysafe/retrysafe/tools/apipix"
	"github.com/retrysafe/retrysafe/tools/toolstest"
)

// mtlsFiles are the PEM files of a throwaway PKI: the CA, and a client
// certificate and key it signed.
type mtlsFiles struct {
	ca, cert, key string
	pki           *testutil.PKI // the CA that signed the server's certificate and the client's
}

// config is the tool's configuration for the PSP at srv with f's files,
// as a deployment gives them.
func (f mtlsFiles) config(srv *httptest.Server) apipix.Config {
	return apipix.Config{BaseURL: srv.URL + "/api", ClientID: "cid", ClientSecret: "csecret", Chave: chave,
		CertFile: f.cert, KeyFile: f.key, CAFile: f.ca}
}

// startMTLS starts h behind TLS that requires a client certificate signed
// by a new CA, and writes that CA and such a certificate to files. tune,
// when given, changes the server's TLS settings before it starts.
func startMTLS(t *testing.T, h http.Handler, connState func(net.Conn, http.ConnState), tune ...func(*tls.Config)) (*httptest.Server, mtlsFiles) {
	t.Helper()
	p := testutil.NewPKI(t)
	srvCert, srvKey := p.Issue(t, "psp", x509.ExtKeyUsageServerAuth)
	cliCert, cliKey := p.Issue(t, "receiver", x509.ExtKeyUsageClientAuth)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	files := mtlsFiles{ca: write("ca.pem", p.CAPEM), cert: write("client.pem", cliCert), key: write("client.key", cliKey), pki: p}

	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = connState
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.CA)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: roots}
	for _, f := range tune {
		f(srv.TLS)
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv, files
}

// TestMutualTLSFromPEMFiles runs the tool against a PSP that requires a
// client certificate signed by its CA, with the certificate, key and CA
// read from PEM files, as a deployment configures them.
func TestMutualTLSFromPEMFiles(t *testing.T) {
	t.Parallel()
	psp, _ := sandbox.New(sandbox.Config{ClientID: "cid", ClientSecret: "csecret"})
	srv, f := startMTLS(t, psp.Handler(), nil)

	cfg := f.config(srv)
	cob, err := apipix.NewCob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil) // for its deriver
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	if _, err := cob.Execute(context.Background(), r.Key, r.Payload); err != nil {
		t.Fatalf("with the client certificate: %v", err)
	}
	if st := psp.Stats(); st.CobCreated != 1 || st.TokensIssued != 1 {
		t.Fatalf("stats %+v", st)
	}

	// Without a client certificate the handshake fails before anything
	// is sent: the token request never reaches the PSP.
	cfg.CertFile, cfg.KeyFile = "", ""
	bare, err := apipix.NewCob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r2 := e.derive(t, apipix.CobName, cobFields("NF-2"))
	_, err = bare.Execute(context.Background(), r2.Key, r2.Payload)
	if te := classOf(t, err); te.Class != tools.ClassTransient {
		t.Fatalf("without a certificate: %v, want transient (nothing acted)", err)
	}
	if st := psp.Stats(); st.TokensIssued != 1 || st.CobPuts != 1 {
		t.Fatalf("a request got through without a certificate: %+v", st)
	}
}

// The client apipix builds for its certificate keeps its connections to the
// PSP between concurrent calls: each one it dropped would cost the next
// call a new mutual TLS handshake (net/http's default transport keeps two
// idle per host). The handler holds each round's charges until all of
// them are in, so that that many connections are in use at once.
func TestMutualTLSKeepsConnections(t *testing.T) {
	t.Parallel()
	const conc, rounds = 8, 4
	psp, _ := sandbox.New(sandbox.Config{ClientID: "cid", ClientSecret: "csecret"})
	held := toolstest.NewRounds(conc)
	srv, f := startMTLS(t, held.Hold(psp.Handler(), func(r *http.Request) bool { return r.Method == http.MethodPut }), held.ConnState)
	cob, err := apipix.NewCob(f.config(srv))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil) // for its deriver
	for r := range rounds {
		var wg sync.WaitGroup
		for i := range conc {
			k := e.derive(t, apipix.CobName, cobFields(fmt.Sprintf("NF-%d-%d", r, i)))
			wg.Go(func() {
				if _, err := cob.Execute(context.Background(), k.Key, k.Payload); err != nil {
					t.Errorf("round %d charge %d: %v", r, i, err)
				}
			})
		}
		wg.Wait()
	}
	if st := psp.Stats(); st.CobCreated != conc*rounds {
		t.Fatalf("stats %+v, want %d charges", st, conc*rounds)
	}
	t.Logf("%d rounds of %d concurrent charges opened %d TLS connections", rounds, conc, held.Opened())
	// The token request's connection, one per charge held at once, and a
	// few a round may miss while its predecessor's go back to the pool.
	if got, most := held.Opened(), int64(1+conc+conc/2); got > most {
		t.Fatalf("%d rounds of %d concurrent charges opened %d TLS connections, want at most %d", rounds, conc, got, most)
	}
}

// A renewed client certificate written over the files is presented from
// the next connection on, by the same tool; files that do not pair, and a
// certificate the PSP does not accept, fail the handshake before the PSP
// reads anything: transient, and the PSP saw no request.
func TestMutualTLSCertificateRenewal(t *testing.T) {
	t.Parallel()
	for _, version := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(version), func(t *testing.T) {
			t.Parallel()
			psp, _ := sandbox.New(sandbox.Config{ClientID: "cid", ClientSecret: "csecret"})
			var mu sync.Mutex
			var presented string // the client certificate of the last request
			srv, f := startMTLS(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				presented = r.TLS.PeerCertificates[0].Subject.CommonName
				mu.Unlock()
				psp.Handler().ServeHTTP(w, r)
			}), nil, func(c *tls.Config) { c.MaxVersion = version })
			// A connection per request: every call shakes hands again.
			srv.Config.SetKeepAlivesEnabled(false)
			cob, err := apipix.NewCob(f.config(srv))
			if err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, nil) // for its deriver
			charge := func(ref, wantCN string) {
				t.Helper()
				r := e.derive(t, apipix.CobName, cobFields(ref))
				if _, err := cob.Execute(context.Background(), r.Key, r.Payload); err != nil {
					t.Fatalf("%s: %v", ref, err)
				}
				mu.Lock()
				defer mu.Unlock()
				if presented != wantCN {
					t.Fatalf("%s: the PSP saw the certificate of %q, want %q", ref, presented, wantCN)
				}
			}
			refused := func(ref, code string) { refusedBeforePSP(t, e, cob, psp, ref, code) }
			charge("NF-1", "receiver")

			renewed, renewedKey := f.pki.Issue(t, "receiver-renewed", x509.ExtKeyUsageClientAuth)
			f.renew(t, renewed, renewedKey)
			charge("NF-2", "receiver-renewed")

			// Half a renewal: the next certificate, the current key.
			next, nextKey := f.pki.Issue(t, "receiver-next", x509.ExtKeyUsageClientAuth)
			testutil.ReplaceFile(t, f.cert, next)
			refused("NF-3", "tls_client_certificate")
			testutil.ReplaceFile(t, f.key, nextKey)
			charge("NF-3", "receiver-next")

			// A pair the PSP's CA did not sign.
			other, otherKey := testutil.NewPKI(t).Issue(t, "receiver", x509.ExtKeyUsageClientAuth)
			f.renew(t, other, otherKey)
			refused("NF-4", "tls")
		})
	}
}

// A certificate outside its validity is refused by name and date, not
// left to the PSP's bare alert: at start, an error; renewed over the files
// while running, a transient failure before anything is sent.
func TestMutualTLSCertificateValidity(t *testing.T) {
	t.Parallel()
	psp, _ := sandbox.New(sandbox.Config{ClientID: "cid", ClientSecret: "csecret"})
	srv, f := startMTLS(t, psp.Handler(), nil)
	srv.Config.SetKeepAlivesEnabled(false)
	cfg := f.config(srv)
	good, goodKey := f.pki.Issue(t, "receiver", x509.ExtKeyUsageClientAuth)
	expired, expiredKey := f.pki.IssueValid(t, "receiver", x509.ExtKeyUsageClientAuth,
		time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	early, earlyKey := f.pki.IssueValid(t, "receiver", x509.ExtKeyUsageClientAuth,
		time.Now().Add(24*time.Hour), time.Now().Add(48*time.Hour))

	f.renew(t, expired, expiredKey)
	if _, err := apipix.NewCob(cfg); err == nil || !strings.Contains(err.Error(), "expired on 2026-12-01T00:00:00Z") || !strings.Contains(err.Error(), f.cert) {
		t.Fatalf("an expired certificate at start: %v", err)
	}
	f.renew(t, early, earlyKey)
	if _, err := apipix.NewCob(cfg); err == nil || !strings.Contains(err.Error(), "not valid until") {
		t.Fatalf("a certificate not yet valid at start: %v", err)
	}

	f.renew(t, good, goodKey)
	cob, err := apipix.NewCob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil) // for its deriver
	r := e.derive(t, apipix.CobName, cobFields("NF-1"))
	if _, err := cob.Execute(context.Background(), r.Key, r.Payload); err != nil {
		t.Fatal(err)
	}
	f.renew(t, expired, expiredKey)
	if err := refusedBeforePSP(t, e, cob, psp, "NF-2", "tls_client_certificate"); !strings.Contains(err.Error(), "expired on") {
		t.Fatalf("an expired certificate renewed in: %v, want the expiry named", err)
	}
}

// renew writes a new pair over f's files, the key first, each as a
// certificate manager does (testutil.ReplaceFile).
func (f mtlsFiles) renew(t *testing.T, certPEM, keyPEM []byte) {
	t.Helper()
	testutil.ReplaceFile(t, f.key, keyPEM)
	testutil.ReplaceFile(t, f.cert, certPEM)
}

// refusedBeforePSP charges ref through cob and wants a transient failure
// with code, which the PSP never read a charge of; it returns the error.
func refusedBeforePSP(t *testing.T, e *env, cob *apipix.Cob, psp *sandbox.Server, ref, code string) error {
	t.Helper()
	puts := psp.Stats().CobPuts
	r := e.derive(t, apipix.CobName, cobFields(ref))
	_, err := cob.Execute(context.Background(), r.Key, r.Payload)
	if te := classOf(t, err); te.Class != tools.ClassTransient || te.Code != code {
		t.Fatalf("%s: %v (class %s, code %s), want transient %s", ref, err, te.Class, te.Code, code)
	}
	if got := psp.Stats().CobPuts; got != puts {
		t.Fatalf("%s: the PSP read %d charges through a failed handshake", ref, got-puts)
	}
	return err
}
