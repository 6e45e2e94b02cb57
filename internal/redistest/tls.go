package redistest

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
	"path/filepath"
	"testing"
	"time"
)

type tlsFiles struct {
	ca, cert, key string // file paths
	caPEM         []byte
}

// NewCA makes a self-signed CA and a server certificate for 127.0.0.1, ::1 and localhost,
// and writes ca.crt, server.crt and server.key into dir.
func makeTLS(t testing.TB, dir string) *tlsFiles {
	t.Helper()
	fail := func(err error) {
		if err != nil {
			t.Fatalf("redistest: tls: %v", err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	fail(err)
	caCert, err := x509.ParseCertificate(caDER)
	fail(err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	fail(err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "redistest server"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	fail(err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	fail(err)

	f := &tlsFiles{
		ca:    filepath.Join(dir, "ca.crt"),
		cert:  filepath.Join(dir, "server.crt"),
		key:   filepath.Join(dir, "server.key"),
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
	}
	fail(os.WriteFile(f.ca, f.caPEM, 0o600))
	fail(os.WriteFile(f.cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	fail(os.WriteFile(f.key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return f
}

// CAPEM is the PEM of a new self-signed CA (a Secret's ca.crt that parses).
func CAPEM(t testing.TB) []byte {
	t.Helper()
	return makeTLS(t, t.TempDir()).caPEM
}
