package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/testcert"
)

// TestTLSServers: ssl_auth = "on" serves the exporter over HTTPS (TLS 1.3)
// and, with ca_file, the REST API over mutual TLS: a client without a
// certificate of that CA is refused, one with it is served.
func TestTLSServers(t *testing.T) {
	requireE2E(t)
	ca := testcert.NewCA(t, "galago-e2e-ca")
	other := testcert.NewCA(t, "someone-else")
	dir := t.TempDir()
	certFile, keyFile := testcert.WriteFiles(t, dir, "srv", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	caFile := ca.WriteCA(t, dir, "ca")
	tlsKeys := func(withCA bool) string {
		s := fmt.Sprintf(`ssl_auth = "on"; private_key = "%s"; cert_file = "%s";`, keyFile, certFile)
		if withCA {
			s += fmt.Sprintf(` ca_file = "%s";`, caFile)
		}
		return s
	}
	d := startDaemon(t, daemonOpts{webTLS: tlsKeys(false), restTLS: tlsKeys(true)})

	client := func(certs ...tls.Certificate) *http.Client {
		cfg := &tls.Config{RootCAs: ca.Pool(), Certificates: certs, MinVersion: tls.VersionTLS12}
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
	code, body, err := get(client(), fmt.Sprintf("https://127.0.0.1:%d/metrics", d.metricPort))
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
	if _, _, err := get(client(), rest); err == nil {
		t.Fatal("REST served a client without a certificate")
	}
	if _, _, err := get(client(other.Issue(t, "stranger", x509.ExtKeyUsageClientAuth)), rest); err == nil {
		t.Fatal("REST served a client certificate from another CA")
	}
	code, body, err = get(client(ca.Issue(t, "scraper", x509.ExtKeyUsageClientAuth)), rest)
	if err != nil || code != http.StatusOK || body != "{}\n" {
		t.Fatalf("mTLS GET /baseinfo: %d %q %v", code, body, err)
	}
}
