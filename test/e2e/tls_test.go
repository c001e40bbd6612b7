package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA issues certificates for the TLS test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM certificate and key signed by the CA.
func (ca *testCA) issue(t *testing.T, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "galago-e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTLSServers: ssl_auth = "on" serves the exporter over HTTPS (TLS 1.3)
// and, with ca_file, the REST API over mutual TLS: a client without a
// certificate of that CA is refused, one with it is served.
func TestTLSServers(t *testing.T) {
	requireE2E(t)
	ca := newTestCA(t, "galago-e2e-ca")
	other := newTestCA(t, "someone-else")
	dir := t.TempDir()
	srvCert, srvKey := ca.issue(t, true)
	cliCert, cliKey := ca.issue(t, false)
	badCert, badKey := other.issue(t, false)
	writeFiles(t, dir, map[string][]byte{"ca.pem": ca.pem, "srv.pem": srvCert, "srv.key": srvKey})
	tlsKeys := func(ca bool) string {
		s := fmt.Sprintf(`ssl_auth = "on"; private_key = "%s/srv.key"; cert_file = "%s/srv.pem";`, dir, dir)
		if ca {
			s += fmt.Sprintf(` ca_file = "%s/ca.pem";`, dir)
		}
		return s
	}
	d := startDaemon(t, daemonOpts{webTLS: tlsKeys(false), restTLS: tlsKeys(true)})

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	client := func(cert, key []byte) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			pair, err := tls.X509KeyPair(cert, key)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 5 * time.Second}
	}
	get := func(c *http.Client, url string) (int, string, error) {
		resp, err := c.Get(url)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.TLS == nil || resp.TLS.Version != tls.VersionTLS13 {
			return 0, "", fmt.Errorf("not TLS 1.3: %+v", resp.TLS)
		}
		return resp.StatusCode, string(b), err
	}

	// Exporter: HTTPS without client certificates.
	code, body, err := get(client(nil, nil), fmt.Sprintf("https://127.0.0.1:%d/metrics", d.metricPort))
	if err != nil || code != http.StatusOK || !strings.Contains(body, "galago_records_total") {
		t.Fatalf("HTTPS /metrics: %d %v", code, err)
	}
	// A plain-HTTP request to the TLS port is never served metrics.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", d.metricPort)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(b), "galago_records_total") {
			t.Fatal("metrics served over plain HTTP with ssl_auth on")
		}
	}

	// REST: mutual TLS.
	rest := fmt.Sprintf("https://127.0.0.1:%d/baseinfo", d.restPort)
	if _, _, err := get(client(nil, nil), rest); err == nil {
		t.Fatal("REST served a client without a certificate")
	}
	if _, _, err := get(client(badCert, badKey), rest); err == nil {
		t.Fatal("REST served a client certificate from another CA")
	}
	code, body, err = get(client(cliCert, cliKey), rest)
	if err != nil || code != http.StatusOK || body != "{}\n" {
		t.Fatalf("mTLS GET /baseinfo: %d %q %v", code, body, err)
	}
}
