package ctl

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/galago-project/galago/internal/api"
	"github.com/galago-project/galago/internal/probe"
)

const successReply = `{ "result": "success", "message":"New config takes effect" }` + "\n"

// fake is a Controller that records Put calls and knows a few features.
type fake struct {
	mu   sync.Mutex
	puts [][2]string
	get  map[string]string
}

func (f *fake) Put(feature string, body []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.puts = append(f.puts, [2]string{feature, string(body)})
	if _, ok := f.get[feature]; !ok {
		return fmt.Errorf("%s: %w", feature, probe.ErrUnknownFeature)
	}
	if strings.Contains(string(body), `"report_period": 1,`) {
		return fmt.Errorf("params.report_period invalid value 1, must be in [5, 600]")
	}
	return nil
}

func (f *fake) Get(feature string) ([]byte, error) {
	b, ok := f.get[feature]
	if !ok {
		return nil, probe.ErrUnknownFeature
	}
	return []byte(b), nil
}

func (f *fake) Names() []string { return []string{"tcp", "flowtracer"} }

func (f *fake) calls() [][2]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][2]string(nil), f.puts...)
}

func newFake() *fake {
	return &fake{get: map[string]string{
		"tcp":        "{}\n",
		"flowtracer": `{"state":"running"}` + "\n",
	}}
}

// serve starts the real control socket server for f.
func serve(t *testing.T, f api.Controller) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gala_gopher", "gala_gopher_cmd.sock")
	s := api.NewCtlServer(path, f, nil)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return path
}

func run(socket string, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, &o, &e, socket)
	return code, o.String(), e.String()
}

// TestSeedCommands runs the gopher-ctl commands of
// /work/shared/seeds/000_d19e45e5e5e5935b.txt (FlowTracer), as the shell
// would split them.
func TestSeedCommands(t *testing.T) {
	f := newFake()
	sock := serve(t, f)
	cmds := [][]string{
		{"probe", "set", "flowtracer", `{"state":"running"}`},
		{"probe", "set", "tcp", `{"cmd": {"probe": ["tcp_stats"]},"snoopers":{"proc_name":[{"comm":"^python.*","cmdline":""}]},"params":{"report_period": 5,"cluster_ip_backend": 2},"state":"running"}`},
		{"probe", "set", "flowtracer", `{"state":"stopped"}`},
		{"probe", "set", "tcp", `{"cmd": {"probe": ["tcp_stats"]},"snoopers":{"proc_name":[{"comm":"^python.*","cmdline":""}]},"params":{"report_period": 5,"cluster_ip_backend": 0},"state":"running"}`},
	}
	for _, args := range cmds {
		code, out, errOut := run(sock, args...)
		if code != 0 || out != successReply || errOut != "" {
			t.Fatalf("gopher-ctl %q: exit %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	got := f.calls()
	if len(got) != len(cmds) {
		t.Fatalf("controller got %d puts; want %d", len(got), len(cmds))
	}
	for i, args := range cmds {
		if got[i] != [2]string{args[2], args[3]} {
			t.Fatalf("put %d = %q; want %q", i, got[i], args[2:])
		}
	}
}

func TestGetAndList(t *testing.T) {
	sock := serve(t, newFake())
	if code, out, errOut := run(sock, "probe", "get", "flowtracer"); code != 0 || out != `{"state":"running"}`+"\n" || errOut != "" {
		t.Fatalf("get: %d %q %q", code, out, errOut)
	}
	if code, out, _ := run(sock, "probe", "list"); code != 0 || out != "tcp\tunconfigured\nflowtracer\trunning\n" {
		t.Fatalf("list: %d %q", code, out)
	}
}

func TestRefusedRequestsExitNonZero(t *testing.T) {
	f := newFake()
	sock := serve(t, f)
	for _, tc := range []struct {
		args []string
		out  string
	}{
		{[]string{"probe", "get", "haproxy"}, `{ "result": "failed", "message":"url not found" }` + "\n"},
		{[]string{"probe", "set", "haproxy", `{"state":"running"}`}, `{ "result": "failed", "message":"url not found" }` + "\n"},
		{[]string{"probe", "set", "tcp", `{"state":`}, `{ "result": "failed", "message":"invalid json format: unexpected end of JSON input (at byte 9)" }` + "\n"},
		{[]string{"probe", "set", "tcp", `json={"state":"running"}`}, `{ "result": "failed", "message":"invalid json format: invalid character 'j' looking for beginning of value (at byte 1)" }` + "\n"},
		{[]string{"probe", "set", "tcp", `{"params":{"report_period": 1, "x": 0}}`},
			`{ "result": "failed", "message":"params.report_period invalid value 1, must be in [5, 600]" }` + "\n"},
	} {
		code, out, errOut := run(sock, tc.args...)
		if code != 1 || out != tc.out || errOut != "" {
			t.Errorf("gopher-ctl %q: exit %d, stdout %q, stderr %q; want 1, %q", tc.args, code, out, errOut, tc.out)
		}
	}
}

func TestSocketFlag(t *testing.T) {
	sock := serve(t, newFake())
	missing := filepath.Join(t.TempDir(), "none.sock")
	for _, args := range [][]string{
		{"--socket", sock, "probe", "get", "tcp"},
		{"--socket=" + sock, "probe", "get", "tcp"},
		{"-socket", sock, "probe", "get", "tcp"},
	} {
		if code, out, errOut := run(missing, args...); code != 0 || out != "{}\n" {
			t.Fatalf("%q: %d %q %q", args, code, out, errOut)
		}
	}
}

func TestConnectionFailure(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.sock")
	code, out, errOut := run(missing, "probe", "get", "tcp")
	if code != 1 || out != "" || !strings.Contains(errOut, "cannot connect to the galago control socket "+missing) ||
		!strings.Contains(errOut, "is galago running?") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// badServer accepts one connection, reads the request and answers with
// reply (nothing when empty) before closing.
func badServer(t *testing.T, reply string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bad.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Read(make([]byte, 4096))
		_, _ = c.Write([]byte(reply))
		_ = c.Close()
	}()
	return path
}

func TestBrokenDaemon(t *testing.T) {
	for reply, want := range map[string]string{
		"":          "closed the connection without a reply",
		"garbage\n": "malformed reply",
	} {
		code, out, errOut := run(badServer(t, reply), "probe", "get", "tcp")
		if code != 1 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("reply %q: exit %d, stdout %q, stderr %q", reply, code, out, errOut)
		}
	}
}

func TestUsage(t *testing.T) {
	sock := serve(t, newFake())
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "please specify the request type"},
		{[]string{"probes"}, "unknown request type: probes"},
		{[]string{"metric"}, `"metric" is not supported`},
		{[]string{"probe"}, "please specify the probe operation"},
		{[]string{"probe", "del", "tcp"}, "unknown probe operation: del"},
		{[]string{"probe", "get"}, "please specify the probe name"},
		{[]string{"probe", "set"}, "please specify the probe name"},
		{[]string{"probe", "set", "tcp"}, "please specify the probe config"},
		{[]string{"probe", "set", "tcp", "{state:", "running}"}, "quote the probe config"},
		{[]string{"probe", "get", "tcp", "x"}, "too many arguments"},
		{[]string{"probe", "list", "x"}, "too many arguments"},
		{[]string{"--bogus"}, "flag provided but not defined"},
	} {
		code, out, errOut := run(sock, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.msg) || !strings.Contains(errOut, "Usage:") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errOut, tc.msg)
		}
	}
	if code, _, errOut := run(sock, "-h"); code != 0 || !strings.Contains(errOut, "gopher-ctl [--socket PATH] probe set") ||
		!strings.Contains(errOut, "else $GALAGO_CTL_SOCKET, else the default") || !strings.Contains(errOut, "(default \""+sock+"\")") {
		t.Errorf("-h: exit %d, %q", code, errOut)
	}
}
