package main

import (
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// startProfiler serves Go's pprof endpoints on GALAGO_PPROF_ADDR (for
// example 127.0.0.1:6060) when that variable is set: how galago's own CPU
// and memory are measured and kept near zero. Off by default.
func startProfiler(log *slog.Logger) {
	addr := os.Getenv("GALAGO_PPROF_ADDR")
	if addr == "" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		log.Info("pprof listening", "addr", addr)
		if err := srv.ListenAndServe(); err != nil {
			log.Error("pprof server", "err", err)
		}
	}()
}
