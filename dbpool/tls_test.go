package dbpool_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/retrysafe/retrysafe/dbpool"
	"github.com/retrysafe/retrysafe/internal/pgembed"
	"github.com/retrysafe/retrysafe/internal/testutil"
)

// A database that takes clients by certificate (pg_hba's cert method over
// TLS, a private cluster): a certificate and key renewed in place, over
// the files DATABASE_URL's sslcert and sslkey name, are what the pool's
// next connection presents, without a restart or a new pool. pgx reads
// those files at every handshake since v5.13 unless the configuration's
// TLSConfig is replaced or given certificates of its own; this test fails
// if ParseConfig or Configure ever does that.
func TestClientCertificateRenewedInPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ca := testutil.NewPKI(t)
	srvCert, srvKey := ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth)
	c, err := pgembed.StartWith(ctx, pgembed.Options{
		DataFiles: map[string][]byte{
			"server.crt": srvCert, "server.key": srvKey, "root.crt": ca.CAPEM,
			"pg_hba.conf": []byte("local all all trust\n" +
				"hostssl all all 127.0.0.1/32 cert\n" +
				"host all all 127.0.0.1/32 reject\n"),
		},
		Settings: []string{"ssl=on", "ssl_ca_file=root.crt"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })

	// Without a certificate the server lets nobody in: what the serials
	// below show is what authenticated each session.
	if conn, err := pgx.Connect(ctx, c.URL); err == nil {
		conn.Close(ctx)
		t.Fatal("a connection without TLS was let in")
	} else if pe := (*pgconn.PgError)(nil); !errors.As(err, &pe) || pe.Code != "28000" {
		t.Fatalf("a connection without TLS: %v, want pg_hba's refusal (28000)", err)
	}

	dir := t.TempDir()
	files := map[string]string{"ca": filepath.Join(dir, "ca.pem"), "cert": filepath.Join(dir, "client.pem"), "key": filepath.Join(dir, "client.key")}
	// install writes over the files as a renewal does.
	install := func(name string, b []byte) { testutil.ReplaceFile(t, files[name], b) }
	first, firstKey := ca.Issue(t, "postgres", x509.ExtKeyUsageClientAuth)
	install("ca", ca.CAPEM)
	install("cert", first)
	install("key", firstKey)
	url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=verify-full&sslrootcert=%s&sslcert=%s&sslkey=%s",
		c.Port, files["ca"], files["cert"], files["key"])

	pool, err := dbpool.Open(ctx, url, "public", 2)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if got := sessionSerial(t, pool); got != testutil.Serial(t, first) {
		t.Fatalf("the session presented serial %s, want the first certificate's %s", got, testutil.Serial(t, first))
	}

	renewed, renewedKey := ca.Issue(t, "postgres", x509.ExtKeyUsageClientAuth)
	install("cert", renewed)
	install("key", renewedKey)
	// The open connections keep their sessions; new ones shake hands again.
	pool.Reset()
	if got := sessionSerial(t, pool); got != testutil.Serial(t, renewed) {
		t.Fatalf("after the renewal a new session presented serial %s, want the renewed certificate's %s (the first was %s)",
			got, testutil.Serial(t, renewed), testutil.Serial(t, first))
	}

	// A renewal that went wrong (an expired certificate written over the
	// files) fails new connections with the server's reason, and the next
	// good one is used without a restart either.
	expired, expiredKey := ca.IssueValid(t, "postgres", x509.ExtKeyUsageClientAuth, time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour))
	install("cert", expired)
	install("key", expiredKey)
	pool.Reset()
	// Under TLS 1.3 the client's side of the handshake is done before the
	// server has checked the client's certificate: the server's alert can
	// come after the client sent its startup message into a socket the
	// server closed, and the client then reads a reset, not the reason.
	// Every try must fail; the reason must come through in one of a few.
	var errs []error
	for range 5 {
		_, err := pool.Exec(ctx, "SELECT 1")
		if err == nil {
			t.Fatal("a session with an expired client certificate was let in")
		}
		if errs = append(errs, err); strings.Contains(err.Error(), "expired certificate") {
			break
		}
	}
	if err := errs[len(errs)-1]; !strings.Contains(err.Error(), "expired certificate") {
		t.Fatalf("a session with an expired client certificate, %d tries: %v, want the server's refusal", len(errs), errors.Join(errs...))
	}
	again, againKey := ca.Issue(t, "postgres", x509.ExtKeyUsageClientAuth)
	install("cert", again)
	install("key", againKey)
	if got := sessionSerial(t, pool); got != testutil.Serial(t, again) {
		t.Fatalf("after the second renewal a session presented serial %s, want %s", got, testutil.Serial(t, again))
	}
}

// sessionSerial is the serial number of the client certificate the
// server verified for the session that runs the query.
func sessionSerial(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var ssl bool
	var serial *string
	err := pool.QueryRow(context.Background(),
		`SELECT ssl, client_serial::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()`).Scan(&ssl, &serial)
	if err != nil {
		t.Fatal(err)
	}
	if !ssl || serial == nil {
		t.Fatalf("session without TLS or without a client certificate (ssl %v)", ssl)
	}
	return *serial
}
