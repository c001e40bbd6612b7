package output

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server is an HTTP(S) server already listening: binding happens in
// StartServer, so a busy port fails the caller at once.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// StartServer listens on addr and serves h in the background, over TLS when
// tlsCfg is set (see ServerTLSConfig). Timeouts bound slow or idle clients.
func StartServer(addr string, h http.Handler, tlsCfg *tls.Config, log *slog.Logger) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{
		srv: &http.Server{
			Handler:           h,
			TLSConfig:         tlsCfg,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
		ln:   ln,
		done: make(chan error, 1),
	}
	go func() {
		var err error
		if tlsCfg != nil {
			err = s.srv.ServeTLS(ln, "", "")
		} else {
			err = s.srv.Serve(ln)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return s, nil
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Done delivers the serve loop's error (nil after Shutdown).
func (s *Server) Done() <-chan error { return s.done }

// Shutdown stops accepting, waits for requests in flight until ctx ends,
// then closes what is left.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		s.srv.Close()
	}
	return err
}
