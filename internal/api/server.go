package api

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServerConfig configures the REST server.
type ServerConfig struct {
	// Addr is the listen address for ListenAndServe (rest_api_server
	// bind_addr:port, gala-gopher's default 127.0.0.1:9999).
	Addr string
	// TLS, when set, serves HTTPS with this configuration; set ClientAuth
	// and ClientCAs in it for mTLS (gala-gopher's ca_file).
	TLS *tls.Config
	// MaxBody is the largest accepted PUT body; 0 means DefaultMaxBody.
	MaxBody int64
	// Extra are handlers served beside the control plane at exact paths
	// (e.g. the flamegraph probe's live pprof profiles); they answer
	// their own methods.
	Extra map[string]http.Handler
}

// Timeouts of the REST server: a control plane answers small requests, so a
// client that dribbles its request is cut off rather than holding a
// connection. WriteTimeout leaves room for a PUT that starts a probe.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 2 * time.Minute
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
)

// Server is the REST control plane.
type Server struct {
	cfg ServerConfig
	ctl Controller
	log *slog.Logger
	srv *http.Server
}

// NewServer builds the REST server; nothing listens until Serve or
// ListenAndServe.
func NewServer(cfg ServerConfig, ctl Controller, log *slog.Logger) *Server {
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, ctl: ctl, log: log}
	s.srv = &http.Server{
		Addr:              cfg.Addr,
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	if cfg.TLS != nil {
		s.srv.TLSConfig = cfg.TLS.Clone()
	}
	return s
}

// Handler returns the HTTP handler, for embedding or tests.
func (s *Server) Handler() http.Handler { return s }

// ListenAndServe listens on cfg.Addr and serves until Shutdown.
func (s *Server) ListenAndServe() error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("rest api: %w", err)
	}
	return s.Serve(ln)
}

// Serve serves on ln (over TLS when configured) until Shutdown, after which
// it returns nil.
func (s *Server) Serve(ln net.Listener) error {
	s.log.Info("rest api listening", "addr", ln.Addr().String(), "tls", s.cfg.TLS != nil)
	var err error
	if s.cfg.TLS != nil {
		err = s.srv.ServeTLS(ln, "", "")
	} else {
		err = s.srv.Serve(ln)
	}
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting and waits for requests in flight, up to ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.srv.Shutdown(ctx)
}

// ServeHTTP answers GET and PUT /<feature>.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h, ok := s.cfg.Extra[r.URL.Path]; ok {
		h.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		w.Header().Set("Allow", "GET, PUT")
		write(w, http.StatusMethodNotAllowed, reply(false, "method not allowed"))
		return
	}
	// The query is ignored, as gala-gopher does.
	feature := strings.TrimPrefix(r.URL.Path, "/")
	var status int
	var body []byte
	if r.Method == http.MethodGet {
		status, body = get(s.ctl, feature)
	} else {
		status, body = s.put(r, feature)
		lvl := slog.LevelInfo
		if status != http.StatusOK {
			lvl = slog.LevelWarn
		}
		s.log.Log(r.Context(), lvl, "rest api put", "feature", feature, "remote", r.RemoteAddr,
			"status", status, "reply", strings.TrimSpace(string(body)))
	}
	write(w, status, body)
}

func (s *Server) put(r *http.Request, feature string) (int, []byte) {
	if feature == "" {
		return http.StatusNotFound, reply(false, notFoundMessage)
	}
	tooLarge := reply(false, fmt.Sprintf("put data size exceeds %d", s.cfg.MaxBody))
	if r.ContentLength > s.cfg.MaxBody {
		return http.StatusBadRequest, tooLarge
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, s.cfg.MaxBody+1))
	if err != nil {
		return http.StatusBadRequest, reply(false, "failed to read request body")
	}
	if int64(len(raw)) > s.cfg.MaxBody {
		return http.StatusBadRequest, tooLarge
	}
	conf, err := parseBody(r.Header.Get("Content-Type"), raw)
	if err != nil {
		return http.StatusBadRequest, reply(false, err.Error())
	}
	return put(s.ctl, feature, conf)
}

func write(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
