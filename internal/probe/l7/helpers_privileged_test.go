package l7

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/realsrv"
	"github.com/galago-project/galago/internal/testcert"
)

// helpers are the other roles the test binary plays when re-executed with
// helperEnv set (TestMain): servers print "port <n>" once they listen and
// serve until killed; clients print "count <key...> <n>" lines, their own
// tally of what they sent and got, which the tests take as ground truth.
var helpers = map[string]func() error{
	"h2server":    h2Server,
	"h2client":    h2Client,
	"grpcserver":  grpcServer,
	"grpcclient":  grpcClient,
	"mysqlclient": mysqlClient,
	"kafkabroker": kafkaBroker,
	"kafkaclient": kafkaClient,
	"dnsclient":   dnsClient,
}

// listenLoopback listens on a free loopback port and prints it.
func listenLoopback() (net.Listener, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fmt.Printf("port %d\n", ln.Addr().(*net.TCPAddr).Port)
	return ln, nil
}

// helperCmd is the test binary as helper mode, with env added.
func (e *env) helperCmd(mode string, env ...string) *exec.Cmd {
	e.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd := exec.CommandContext(e.ctx, exe)
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + mode}, env...)...)
	cmd.Dir = e.dir
	return cmd
}

// startHelper starts a helper server in the test's cgroup and returns the
// port it printed.
func (e *env) startHelper(mode string, env ...string) (*realsrv.Proc, int) {
	e.t.Helper()
	p, err := e.procs.Start(mode, e.helperCmd(mode, env...))
	if err != nil {
		e.t.Fatal(err)
	}
	return p, waitPort(e, p)
}

// waitPort waits for a helper's "port <n>" line.
func waitPort(e *env, p *realsrv.Proc) int {
	e.t.Helper()
	var port int
	probetest.WaitFor(e.t, "the port of "+p.Name, func() bool {
		out := p.Output.String()
		if i := strings.Index(out, "port "); i >= 0 {
			if j := strings.IndexByte(out[i:], '\n'); j > 0 {
				port, _ = strconv.Atoi(out[i+5 : i+j])
			}
		}
		return port > 0
	})
	return port
}

// runHelper runs a helper client to completion in the test's cgroup and
// returns its counts: "count a b 3" is counts["a b"] = 3.
func (e *env) runHelper(mode string, env ...string) map[string]float64 {
	e.t.Helper()
	cmd := e.helperCmd(mode, env...)
	out, err := e.procs.Run(e.ctx, cmd)
	if cmd.Process != nil {
		e.targets.remember(cmd.Process.Pid)
	}
	if err != nil {
		e.t.Fatalf("%s: %v\n%s", mode, err, out)
	}
	counts := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || f[0] != "count" {
			continue
		}
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			e.t.Fatalf("%s: bad count line %q", mode, sc.Text())
		}
		counts[strings.Join(f[1:len(f)-1], " ")] += n
	}
	e.t.Logf("%s counted: %v", mode, counts)
	return counts
}

// printCounts prints a helper client's counts for runHelper.
func printCounts(counts map[string]int) {
	for k, n := range counts {
		fmt.Printf("count %s %d\n", k, n)
	}
}

// envInt is an integer from the environment (0 if unset or bad).
func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

// tlsFiles makes a CA and a server certificate for 127.0.0.1 in the test's
// directory: the environment of a helper server (GALAGO_L7_CERT and
// GALAGO_L7_KEY) and of a helper client (GALAGO_L7_CA).
func (e *env) tlsFiles() (srvEnv, cliEnv []string) {
	e.t.Helper()
	ca := testcert.NewCA(e.t, "galago-l7-test-ca")
	cert, key := testcert.WriteFiles(e.t, e.dir, "server", ca.Issue(e.t, "127.0.0.1", x509.ExtKeyUsageServerAuth))
	return []string{"GALAGO_L7_CERT=" + cert, "GALAGO_L7_KEY=" + key}, []string{"GALAGO_L7_CA=" + ca.WriteCA(e.t, e.dir, "ca")}
}

// clientTLS is a helper client's TLS configuration: trusting GALAGO_L7_CA,
// nil without one.
func clientTLS() (*tls.Config, error) {
	ca := os.Getenv("GALAGO_L7_CA")
	if ca == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	return &tls.Config{RootCAs: pool}, nil
}
