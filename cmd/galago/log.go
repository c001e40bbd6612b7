package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/galago-project/galago/internal/config"
	"github.com/galago-project/galago/internal/output"
)

// debugLogMax is gala-gopher's debug log size before it rotates to .1.
const debugLogMax = 100 * output.MB

// newLogger logs to stderr (journald, kubectl logs) and, like gala-gopher,
// to <debug_dir>/<log_file_name> with one .1 backup.
func newLogger(cfg *config.Config) (*slog.Logger, func(), error) {
	opts := &slog.HandlerOptions{Level: cfg.SlogLevel()}
	stderr := slog.NewTextHandler(os.Stderr, opts)
	f, err := output.OpenRotating(cfg.DebugLogPath(), debugLogMax)
	if err != nil {
		return nil, nil, fmt.Errorf("debug log: %w", err)
	}
	log := slog.New(slog.NewMultiHandler(stderr, slog.NewTextHandler(f, opts)))
	return log, func() { f.Close() }, nil
}
