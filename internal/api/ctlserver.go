package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/galago-project/galago/internal/probe"
)

// Deadlines of the control socket: the client has ctlReadTimeout to send
// each request (and to start the next one), the server ctlWriteTimeout to
// deliver each reply. Handling the request itself (which may start a probe)
// has no deadline here.
const (
	ctlReadTimeout  = 10 * time.Second
	ctlWriteTimeout = 10 * time.Second
)

// CtlServer serves the control socket that gopher-ctl uses. The socket is
// created with mode 0600 (its directory 0750 if it has to be created), so
// only its owner — root for the daemon — can connect; each peer's
// credentials are checked again with SO_PEERCRED.
type CtlServer struct {
	path    string
	ctl     Controller
	log     *slog.Logger
	maxConf int64
	// allowed are the peer uids accepted: root and the daemon's own.
	allowed     []uint32
	readTimeout time.Duration

	mu      sync.Mutex
	ln      *net.UnixListener
	sock    os.FileInfo // the socket file we created, to remove only ours
	conns   map[net.Conn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// NewCtlServer builds the control socket server for path (DefaultCtlSocket
// for gala-gopher's). Nothing is created until Listen.
func NewCtlServer(path string, ctl Controller, log *slog.Logger) *CtlServer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	allowed := []uint32{0}
	if uid := uint32(os.Geteuid()); uid != 0 {
		allowed = append(allowed, uid)
	}
	return &CtlServer{
		path: path, ctl: ctl, log: log, maxConf: DefaultMaxBody, allowed: allowed,
		readTimeout: ctlReadTimeout, conns: map[net.Conn]struct{}{},
	}
}

// Listen creates the socket. A stale socket file left by a dead daemon is
// replaced; a live one (another daemon answering) or a non-socket file at
// the path is an error.
func (s *CtlServer) Listen() error {
	ln, fi, err := listenUnix(s.path)
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	s.mu.Lock()
	s.ln, s.sock = ln, fi
	s.mu.Unlock()
	s.log.Info("control socket listening", "path", s.path)
	return nil
}

// listenUnix binds the socket in a private temporary directory, sets its
// mode to 0600 and renames it into place, so the socket is never reachable
// with a wider mode.
func listenUnix(path string) (*net.UnixListener, os.FileInfo, error) {
	dir := filepath.Dir(path)
	if err := ensureDir(dir); err != nil {
		return nil, nil, err
	}
	if err := removeStale(path); err != nil {
		return nil, nil, err
	}
	tmp, err := os.MkdirTemp(dir, ".ctl-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	tmpPath := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmpPath, Net: "unix"})
	if err != nil {
		return nil, nil, err
	}
	// The listener was bound at tmpPath; we remove the real path ourselves.
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*net.UnixListener, os.FileInfo, error) {
		_ = ln.Close()
		return nil, nil, err
	}
	if err := os.Chmod(tmpPath, 0o600); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmpPath, path); err != nil {
		return fail(err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fail(err)
	}
	return ln, fi, nil
}

// ensureDir creates the socket's directory with mode 0750 (gala-gopher's
// /var/run/gala_gopher); an existing directory is left as it is.
func ensureDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err == nil && fi.IsDir():
		return nil
	case err == nil:
		return fmt.Errorf("%s exists and is not a directory", dir)
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	return os.Chmod(dir, 0o750) // whatever the umask
}

// removeStale removes a socket file nobody answers on.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode().Type() != os.ModeSocket {
		return fmt.Errorf("%s exists and is not a socket", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("%s is in use by another process (is galago or gala-gopher already running?)", path)
	}
	if !errors.Is(err, unix.ECONNREFUSED) {
		return fmt.Errorf("probing %s: %w", path, err)
	}
	return os.Remove(path)
}

// Serve accepts connections until Shutdown, after which it returns nil.
func (s *CtlServer) Serve() error {
	s.mu.Lock()
	ln := s.ln
	s.mu.Unlock()
	if ln == nil {
		return errors.New("control socket: Serve before Listen")
	}
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			return fmt.Errorf("control socket: %w", err)
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			_ = c.Close()
			return nil
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// Shutdown stops accepting, lets requests being handled finish and answer,
// closes the connections and removes the socket file. It waits for the
// handlers up to ctx, then closes what is left.
func (s *CtlServer) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	var err error
	if s.ln != nil {
		err = s.ln.Close()
		if fi, lerr := os.Lstat(s.path); lerr == nil && os.SameFile(fi, s.sock) {
			_ = os.Remove(s.path)
		}
	}
	// Wake connections blocked waiting for a request; a handler busy in the
	// Controller still writes its reply, then sees closing and returns.
	for c := range s.conns {
		_ = c.SetReadDeadline(time.Now())
	}
	s.mu.Unlock()

	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		<-done
	}
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *CtlServer) serveConn(c *net.UnixConn) {
	defer func() {
		_ = c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	cred, err := peerCred(c)
	if err == nil {
		err = checkPeer(cred, s.allowed)
	}
	if err != nil {
		s.log.Warn("control socket: peer rejected", "error", err)
		s.send(c, CtlReply{Status: http.StatusForbidden, Body: string(reply(false, "permission denied"))})
		return
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 0, 64<<10), maxCtlRequest(s.maxConf))
	for {
		// Under the lock so that Shutdown's wake-up deadline is not
		// overwritten by this one.
		s.mu.Lock()
		closing := s.closing
		if !closing {
			_ = c.SetReadDeadline(time.Now().Add(s.readTimeout))
		}
		s.mu.Unlock()
		if closing {
			return
		}
		// A line cut short by a read error (the deadline) is dropped; the
		// last line before EOF counts even without its newline.
		if !sc.Scan() || sc.Err() != nil {
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				s.send(c, CtlReply{Status: http.StatusBadRequest,
					Body: string(reply(false, fmt.Sprintf("put data size exceeds %d", s.maxConf)))})
			}
			return
		}
		var req CtlRequest
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			s.send(c, CtlReply{Status: http.StatusBadRequest, Body: string(reply(false, "invalid request"))})
			return
		}
		rep := s.handle(req)
		if req.Op == OpSet {
			lvl := slog.LevelInfo
			if rep.Status != http.StatusOK {
				lvl = slog.LevelWarn
			}
			s.log.Log(context.Background(), lvl, "control socket set", "feature", req.Name,
				"uid", cred.Uid, "pid", cred.Pid, "status", rep.Status, "reply", strings.TrimSpace(rep.Body))
		}
		if !s.send(c, rep) {
			return
		}
	}
}

func (s *CtlServer) handle(req CtlRequest) CtlReply {
	var status int
	var body []byte
	switch req.Op {
	case OpGet:
		status, body = get(s.ctl, req.Name)
	case OpSet:
		if int64(len(req.Conf)) > s.maxConf {
			status, body = http.StatusBadRequest, reply(false, fmt.Sprintf("put data size exceeds %d", s.maxConf))
		} else if conf, err := normalizeJSON([]byte(req.Conf)); err != nil {
			status, body = http.StatusBadRequest, reply(false, invalidJSON(err).Error())
		} else {
			status, body = put(s.ctl, req.Name, conf)
		}
	case OpList:
		status, body = http.StatusOK, s.list()
	default:
		status, body = http.StatusBadRequest, reply(false, fmt.Sprintf("unknown operation %q", req.Op))
	}
	return CtlReply{Status: status, Body: string(body)}
}

// list renders "name\tstate" lines: the state GET reports (running,
// stopped), "unconfigured" for a feature never configured.
func (s *CtlServer) list() []byte {
	var names []string
	if n, ok := s.ctl.(Namer); ok {
		names = n.Names()
	} else {
		for _, f := range probe.Builtin {
			names = append(names, f.Name)
		}
	}
	var b strings.Builder
	for _, name := range names {
		state := "unconfigured"
		if raw, err := s.ctl.Get(name); err != nil {
			state = "error: " + err.Error()
		} else {
			var v struct {
				State string `json:"state"`
			}
			if json.Unmarshal(raw, &v) == nil && v.State != "" {
				state = v.State
			}
		}
		fmt.Fprintf(&b, "%s\t%s\n", name, state)
	}
	return []byte(b.String())
}

func (s *CtlServer) send(c net.Conn, rep CtlReply) bool {
	b, err := json.Marshal(rep)
	if err != nil {
		return false
	}
	_ = c.SetWriteDeadline(time.Now().Add(ctlWriteTimeout))
	if _, err := c.Write(append(b, '\n')); err != nil {
		s.log.Debug("control socket: writing reply", "error", err)
		return false
	}
	return true
}

// peerCred returns the credentials of the process at the other end.
func peerCred(c *net.UnixConn) (*unix.Ucred, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	if credErr != nil {
		return nil, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return cred, nil
}

// checkPeer accepts a peer whose uid is in allowed.
func checkPeer(cred *unix.Ucred, allowed []uint32) error {
	if cred == nil {
		return errors.New("no peer credentials")
	}
	for _, uid := range allowed {
		if cred.Uid == uid {
			return nil
		}
	}
	return fmt.Errorf("peer uid %d (pid %d) is not root", cred.Uid, cred.Pid)
}
