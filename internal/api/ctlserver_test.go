package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
)

// gopherCtlSeedConfs are the `gopher-ctl probe set` configurations of
// /work/shared/seeds/000_d19e45e5e5e5935b.txt (FlowTracer), verbatim.
var gopherCtlSeedConfs = []string{
	`{"state":"running"}`,
	`{"cmd": {"probe": ["tcp_stats"]},"snoopers":{"proc_name":[{"comm":"^python.*","cmdline":""}]},"params":{"report_period": 5,"cluster_ip_backend": 2},"state":"running"}`,
	`{"state":"stopped"}`,
	`{"cmd": {"probe": ["tcp_stats"]},"snoopers":{"proc_name":[{"comm":"^python.*","cmdline":""}]},"params":{"report_period": 5,"cluster_ip_backend": 0},"state":"running"}`,
}

// startCtl listens on a fresh socket under a directory that does not exist
// yet and serves until the test ends.
func startCtl(t *testing.T, ctl Controller) (*CtlServer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run", "gala_gopher", "cmd.sock")
	s := NewCtlServer(path, ctl, nil)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("Serve after Shutdown: %v", err)
		}
	})
	return s, path
}

// ctlConn is a raw protocol client.
type ctlConn struct {
	t *testing.T
	c net.Conn
	r *bufio.Reader
}

func dialCtl(t *testing.T, path string) *ctlConn {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return &ctlConn{t, c, bufio.NewReader(c)}
}

func (cc *ctlConn) sendLine(line string) {
	cc.t.Helper()
	if _, err := io.WriteString(cc.c, line+"\n"); err != nil {
		cc.t.Fatal(err)
	}
}

func (cc *ctlConn) recv() (CtlReply, error) {
	var rep CtlReply
	line, err := cc.r.ReadBytes('\n')
	if err != nil {
		return rep, err
	}
	return rep, json.Unmarshal(line, &rep)
}

func (cc *ctlConn) do(req CtlRequest) CtlReply {
	cc.t.Helper()
	b, _ := json.Marshal(req)
	cc.sendLine(string(b))
	rep, err := cc.recv()
	if err != nil {
		cc.t.Fatalf("%+v: %v", req, err)
	}
	return rep
}

func TestCtlSocketFiles(t *testing.T) {
	_, path := startCtl(t, newFake())
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v; want a socket with 0600", fi.Mode())
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != uint32(os.Geteuid()) {
		t.Fatalf("socket owned by %d", uid)
	}
	di, err := os.Stat(filepath.Dir(path))
	if err != nil || di.Mode().Perm() != 0o750 {
		t.Fatalf("socket directory: %v %v; want 0750", di.Mode(), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("socket directory holds %d entries; want only the socket", len(entries))
	}
}

func TestCtlSocketRoundTrip(t *testing.T) {
	fake := newFake()
	_, path := startCtl(t, fake)
	cc := dialCtl(t, path)
	// Several requests on one connection, as the seed document runs them.
	names := []string{"flowtracer", "tcp", "flowtracer", "tcp"}
	for i, conf := range gopherCtlSeedConfs {
		rep := cc.do(CtlRequest{Op: OpSet, Name: names[i], Conf: conf})
		if rep.Status != 200 || rep.Body != successReply {
			t.Fatalf("set %s: %+v", names[i], rep)
		}
	}
	puts := fake.puts()
	if len(puts) != len(names) {
		t.Fatalf("puts = %+v", puts)
	}
	for i, p := range puts {
		if p.Feature != names[i] || p.Body != gopherCtlSeedConfs[i] {
			t.Fatalf("put %d = %+v; want %s %s", i, p, names[i], gopherCtlSeedConfs[i])
		}
	}
	rep := cc.do(CtlRequest{Op: OpGet, Name: "flamegraph"})
	if rep.Status != 200 || rep.Body != string(fake.get["flamegraph"]) {
		t.Fatalf("get: %+v", rep)
	}
}

func TestCtlSocketErrors(t *testing.T) {
	fake := newFake()
	fake.putErr["tcp"] = errors.New(`invalid state "x": must be running or stopped`)
	s, path := startCtl(t, fake)
	cc := dialCtl(t, path)
	for _, tc := range []struct {
		req    CtlRequest
		status int
		body   string
	}{
		{CtlRequest{Op: OpSet, Name: "haproxy", Conf: `{}`}, 404, notFoundReply},
		{CtlRequest{Op: OpGet, Name: "haproxy"}, 404, notFoundReply},
		{CtlRequest{Op: OpGet}, 404, notFoundReply},
		{CtlRequest{Op: OpSet, Conf: `{}`}, 404, notFoundReply},
		{CtlRequest{Op: OpSet, Name: "tcp", Conf: `{"state":`}, 400, failedReply("invalid json format: unexpected end of JSON input (at byte 9)")},
		{CtlRequest{Op: OpSet, Name: "tcp", Conf: `json={"state":"x"}`}, 400, failedReply("invalid json format: invalid character 'j' looking for beginning of value (at byte 1)")},
		{CtlRequest{Op: OpSet, Name: "tcp", Conf: `{"state":"x"}`}, 400, failedReply(`invalid state \"x\": must be running or stopped`)},
		{CtlRequest{Op: OpSet, Name: "tcp", Conf: strings.Repeat(" ", 1<<20) + "{}"}, 400, failedReply("put data size exceeds 1048576")},
		{CtlRequest{Op: "metric"}, 400, failedReply(`unknown operation \"metric\"`)},
	} {
		if rep := cc.do(tc.req); rep.Status != tc.status || rep.Body != tc.body {
			t.Errorf("%+v: %d %q; want %d %q", tc.req.Op+" "+tc.req.Name, rep.Status, rep.Body, tc.status, tc.body)
		}
	}
	if p := fake.puts(); len(p) != 2 { // haproxy, and tcp with state "x"
		t.Fatalf("puts = %+v", p)
	}
	// Comments are stripped before the controller sees the configuration.
	rep := cc.do(CtlRequest{Op: OpSet, Name: "flowtracer", Conf: "{\"state\":\"running\" // on\n}"})
	if p := fake.puts(); rep.Status != 200 || p[len(p)-1].Body != "{\"state\":\"running\" \n}" {
		t.Fatalf("set with a comment: %+v, controller got %q", rep, p[len(p)-1].Body)
	}

	// A malformed request line ends the connection after its answer.
	cc.sendLine("not json")
	if rep, err := cc.recv(); err != nil || rep.Status != 400 || rep.Body != failedReply("invalid request") {
		t.Fatalf("malformed line: %+v %v", rep, err)
	}
	if _, err := cc.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("connection still open after a malformed line: %v", err)
	}

	// A line over the limit is refused without being buffered whole.
	cc = dialCtl(t, path)
	go func() {
		_, _ = cc.c.Write([]byte(`{"op":"set","name":"tcp","conf":"` + strings.Repeat("a", maxCtlRequest(s.maxConf)+1)))
	}()
	if rep, err := cc.recv(); err != nil || rep.Status != 400 || rep.Body != failedReply("put data size exceeds 1048576") {
		t.Fatalf("oversized line: %+v %v", rep, err)
	}
}

type namedFake struct {
	*fakeController
	names []string
}

func (n namedFake) Names() []string { return n.names }

func TestCtlSocketList(t *testing.T) {
	fake := newFake()
	fake.getErr["sli"] = errors.New("boom")
	_, path := startCtl(t, fake)
	rep := dialCtl(t, path).do(CtlRequest{Op: OpList})
	lines := strings.Split(strings.TrimSuffix(rep.Body, "\n"), "\n")
	if rep.Status != 200 || len(lines) != len(probe.Builtin) {
		t.Fatalf("list: %d, %d lines; want one per built-in feature", rep.Status, len(lines))
	}
	want := map[string]string{
		"flamegraph": "running", "flowtracer": "stopped", "tcp": "unconfigured",
		"sli": "error: boom", "baseinfo": "error: get baseinfo: url not found",
	}
	for _, l := range lines {
		name, state, _ := strings.Cut(l, "\t")
		if w, ok := want[name]; ok && state != w {
			t.Errorf("list: %s is %q; want %q", name, state, w)
		}
	}

	_, path = startCtl(t, namedFake{newFake(), []string{"flowtracer", "mine"}})
	rep = dialCtl(t, path).do(CtlRequest{Op: OpList})
	if rep.Body != "flowtracer\tstopped\nmine\terror: get mine: url not found\n" {
		t.Fatalf("list with Names: %q", rep.Body)
	}
}

func TestCtlListenExistingPath(t *testing.T) {
	dir := t.TempDir()

	// A stale socket (nobody listening) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	_ = ln.Close()
	s := NewCtlServer(stale, newFake(), nil)
	if err := s.Listen(); err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	go func() { _ = s.Serve() }()
	if rep := dialCtl(t, stale).do(CtlRequest{Op: OpGet, Name: "tcp"}); rep.Status != 200 {
		t.Fatalf("after replacing a stale socket: %+v", rep)
	}

	// A live socket is left alone.
	if err := NewCtlServer(stale, newFake(), nil).Listen(); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second server on a live socket: %v", err)
	}
	if rep := dialCtl(t, stale).do(CtlRequest{Op: OpGet, Name: "tcp"}); rep.Status != 200 {
		t.Fatalf("the first server lost its socket: %+v", rep)
	}

	// Shutdown removes the socket file.
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket left after Shutdown: %v", err)
	}

	// A regular file is never deleted.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NewCtlServer(file, newFake(), nil).Listen(); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Fatalf("regular file at the socket path: %v", err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "x" {
		t.Fatal("the regular file was touched")
	}
}

func TestCtlShutdown(t *testing.T) {
	fake := newFake()
	fake.block = make(chan struct{})
	path := filepath.Join(t.TempDir(), "s")
	s := NewCtlServer(path, fake, nil)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.Serve() }()

	idle := dialCtl(t, path)
	if rep := idle.do(CtlRequest{Op: OpGet, Name: "tcp"}); rep.Status != 200 {
		t.Fatal(rep)
	}
	busy := dialCtl(t, path)
	busy.sendLine(`{"op":"set","name":"tcp","conf":"{}"}`)
	for len(fake.puts()) == 0 {
		time.Sleep(time.Millisecond)
	}
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// The idle connection is closed at once, not after the read timeout.
	if _, err := idle.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle connection: %v", err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if _, err := net.Dial("unix", path); err == nil {
		t.Fatal("new connections accepted during shutdown")
	}
	close(fake.block)
	if rep, err := busy.recv(); err != nil || rep.Status != 200 || rep.Body != successReply {
		t.Fatalf("request in flight: %+v %v", rep, err)
	}
	if err := <-shut; err != nil {
		t.Fatal(err)
	}
}

func TestCtlIdleClientCutOff(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	s := NewCtlServer(path, newFake(), nil)
	s.readTimeout = 100 * time.Millisecond
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	defer func() { _ = s.Shutdown(context.Background()) }()
	cc := dialCtl(t, path)                      // its own deadline is 10 s
	_, _ = io.WriteString(cc.c, `{"op":"get",`) // never finishes the line
	if rep, err := cc.recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("a client that never finished its request: %+v, %v; want the connection closed", rep, err)
	}

	// A last request without its newline, then EOF, is still answered.
	cc = dialCtl(t, path)
	_, _ = io.WriteString(cc.c, `{"op":"get","name":"tcp"}`)
	_ = cc.c.(*net.UnixConn).CloseWrite()
	if rep, err := cc.recv(); err != nil || rep.Status != 200 || rep.Body != "{}\n" {
		t.Fatalf("request ended by EOF: %+v, %v", rep, err)
	}
}

func TestCheckPeer(t *testing.T) {
	allowed := []uint32{0, 1000}
	for _, tc := range []struct {
		cred *unix.Ucred
		ok   bool
	}{
		{&unix.Ucred{Pid: 1, Uid: 0, Gid: 0}, true},
		{&unix.Ucred{Pid: 2, Uid: 1000, Gid: 1000}, true},
		{&unix.Ucred{Pid: 3, Uid: 65534, Gid: 0}, false},
		{&unix.Ucred{Pid: 4, Uid: 1, Gid: 0}, false},
		{nil, false},
	} {
		if err := checkPeer(tc.cred, allowed); (err == nil) != tc.ok {
			t.Errorf("checkPeer(%+v) = %v; want ok=%v", tc.cred, err, tc.ok)
		}
	}
	if err := checkPeer(&unix.Ucred{Uid: 1000}, []uint32{0}); err == nil {
		t.Error("uid 1000 accepted when only root is allowed")
	}
}

const helperEnv = "GALAGO_API_TEST_CTL_SOCKET"

// TestHelperCtlClient is not a test: TestCtlRejectsNonRoot runs the test
// binary as another user with this test selected, to be a non-root peer.
func TestHelperCtlClient(t *testing.T) {
	path := os.Getenv(helperEnv)
	if path == "" {
		return
	}
	cc := dialCtl(t, path)
	// The server may answer and close before reading: ignore a failed write.
	_, _ = io.WriteString(cc.c, `{"op":"set","name":"tcp","conf":"{}"}`+"\n")
	rep, err := cc.recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
}

// TestCtlRejectsNonRoot opens the socket to everyone (undoing the 0600 mode)
// and checks that SO_PEERCRED still keeps a non-root process out.
func TestCtlRejectsNonRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a client as another user")
	}
	dir, err := os.MkdirTemp("", "galago-ctl-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	fake := newFake()
	path := filepath.Join(dir, "cmd.sock")
	s := NewCtlServer(path, fake, nil)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	// The test binary may sit in a private build directory: copy it.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "client")
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestHelperCtlClient$")
	cmd.Env = append(os.Environ(), helperEnv+"="+path)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client as uid 65534: %v\n%s", err, out)
	}
	var rep CtlReply
	if err := json.NewDecoder(strings.NewReader(string(out))).Decode(&rep); err != nil {
		t.Fatalf("client output %q: %v", out, err)
	}
	if rep.Status != 403 || rep.Body != failedReply("permission denied") {
		t.Fatalf("non-root peer got %+v", rep)
	}
	if c := fake.Calls(); len(c) != 0 {
		t.Fatalf("a non-root peer reached the controller: %+v", c)
	}
}
