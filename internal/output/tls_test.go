package output

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/table"
	"github.com/galago-project/galago/internal/testcert"
)

// testPKI is a CA with a server certificate for 127.0.0.1 and a client
// certificate, all written as PEM files.
type testPKI struct {
	dir                       string
	caFile, certFile, keyFile string
	clientCert                tls.Certificate
	roots                     *x509.CertPool
	strangerCert              tls.Certificate // signed by another CA
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	dir := t.TempDir()
	ca := testcert.NewCA(t, "test CA")
	other := testcert.NewCA(t, "other CA")
	p := &testPKI{dir: dir, caFile: ca.WriteCA(t, dir, "ca"), roots: ca.Pool(),
		clientCert:   ca.Issue(t, "scraper", x509.ExtKeyUsageClientAuth),
		strangerCert: other.Issue(t, "stranger", x509.ExtKeyUsageClientAuth),
	}
	p.certFile, p.keyFile = testcert.WriteFiles(t, dir, "server", ca.Issue(t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	return p
}

// startTLS serves a one-record exporter over TLS built from the given files.
func startTLS(t *testing.T, pki *testPKI, caFile string) string {
	t.Helper()
	p, exp, _ := newTestPipeline(t, table.Limits{})
	p.Record(linkRecord(t0, "1", "client", "java", 100, 30), nil)
	cfg, err := ServerTLSConfig(pki.certFile, pki.keyFile, caFile)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := StartServer("127.0.0.1:0", exp.Handler(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Error(err)
		}
		if err := <-srv.Done(); err != nil {
			t.Error(err)
		}
	})
	return "https://" + srv.Addr().String() + "/metrics"
}

func get(url string, cfg *tls.Config) (string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestTLSServer(t *testing.T) {
	pki := newTestPKI(t)
	url := startTLS(t, pki, "")

	body, err := get(url, &tls.Config{RootCAs: pki.roots})
	if err != nil {
		t.Fatalf("TLS scrape without mTLS: %v", err)
	}
	if !strings.Contains(body, `gala_gopher_link_rx_bytes{comm="java"`) {
		t.Errorf("unexpected body:\n%s", body)
	}
	// TLS 1.3 only.
	if _, err := get(url, &tls.Config{RootCAs: pki.roots, MaxVersion: tls.VersionTLS12}); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Errorf("a TLS 1.2 client: %v, want a protocol version alert", err)
	}
	// Plain HTTP on the TLS port gets no metrics.
	if body, err := get(strings.Replace(url, "https", "http", 1), nil); err != nil || strings.Contains(body, "gala_gopher") {
		t.Errorf("plain HTTP: %v, %q", err, body)
	}
}

func TestMutualTLSServer(t *testing.T) {
	pki := newTestPKI(t)
	url := startTLS(t, pki, pki.caFile)

	if _, err := get(url, &tls.Config{RootCAs: pki.roots}); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("a client without a certificate: %v, want certificate required", err)
	}
	// Send the stranger's certificate even though the server's CA list does
	// not name its issuer (crypto/tls would otherwise send nothing).
	stranger := &tls.Config{RootCAs: pki.roots, GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		return &pki.strangerCert, nil
	}}
	if _, err := get(url, stranger); err == nil || !strings.Contains(err.Error(), "unknown certificate authority") {
		t.Errorf("a client certificate from another CA: %v, want unknown certificate authority", err)
	}
	body, err := get(url, &tls.Config{RootCAs: pki.roots, Certificates: []tls.Certificate{pki.clientCert}})
	if err != nil {
		t.Fatalf("client with a valid certificate: %v", err)
	}
	if !strings.Contains(body, "gala_gopher_link_rx_bytes") {
		t.Errorf("unexpected body:\n%s", body)
	}
}

func TestServerTLSConfigErrors(t *testing.T) {
	pki := newTestPKI(t)
	if _, err := ServerTLSConfig("", pki.keyFile, ""); err == nil {
		t.Error("no cert_file accepted")
	}
	if _, err := ServerTLSConfig(pki.certFile, filepath.Join(pki.dir, "missing.key"), ""); err == nil {
		t.Error("missing private_key accepted")
	}
	notPEM := filepath.Join(pki.dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfig(pki.certFile, pki.keyFile, notPEM); err == nil {
		t.Error("a ca_file without certificates accepted")
	}
	cfg, err := ServerTLSConfig(pki.certFile, pki.keyFile, pki.caFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS13 || cfg.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Errorf("MinVersion %x ClientAuth %v", cfg.MinVersion, cfg.ClientAuth)
	}
}

func TestStartServerBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := StartServer(ln.Addr().String(), http.NotFoundHandler(), nil, nil); err == nil {
		t.Error("StartServer on a busy port succeeded")
	}
}
