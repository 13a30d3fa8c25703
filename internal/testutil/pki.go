package testutil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// PKI is a throwaway certificate authority for tests of mutual TLS: it
// signs server certificates (for 127.0.0.1) and client certificates, each
// with a serial number of its own, so that a test can tell which of two
// certificates a peer presented.
type PKI struct {
	CA    *x509.Certificate
	CAPEM []byte

	key    *ecdsa.PrivateKey
	mu     sync.Mutex
	serial int64
}

// NewPKI makes a CA valid from an hour ago to an hour from now.
func NewPKI(tb testing.TB) *PKI {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return &PKI{CA: ca, CAPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key, serial: 1}
}

// Issue signs a certificate for cn, valid from an hour ago to an hour from
// now, and returns it and its key in PEM.
func (p *PKI) Issue(tb testing.TB, cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte) {
	tb.Helper()
	return p.IssueValid(tb, cn, usage, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
}

// IssueValid is Issue with a validity period.
func (p *PKI) IssueValid(tb testing.TB, cn string, usage x509.ExtKeyUsage, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	tb.Helper()
	p.mu.Lock()
	p.serial++
	serial := p.serial
	p.mu.Unlock()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
		NotBefore: notBefore, NotAfter: notAfter,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature,
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, &key.PublicKey, p.key)
	if err != nil {
		tb.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// Serial is the serial number of a PEM certificate, in decimal.
func Serial(tb testing.TB, certPEM []byte) string {
	tb.Helper()
	b, _ := pem.Decode(certPEM)
	if b == nil {
		tb.Fatal("testutil: no PEM block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		tb.Fatal(err)
	}
	return c.SerialNumber.String()
}

// ReplaceFile writes b beside path and renames it over path, as a
// certificate manager renews a file: a reader sees the old file or the new
// one, never half of one.
func ReplaceFile(tb testing.TB, path string, b []byte) {
	tb.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}
