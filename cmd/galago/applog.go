package main

import (
	"path/filepath"

	"github.com/galago-project/galago/internal/config"
	"github.com/galago-project/galago/internal/identity"
	"github.com/galago-project/galago/internal/probe/applog"
)

// applogOptions wires the applog probe: host root, container names, and
// its offsets file next to the pid file (galago's run directory), so a
// restart resumes where the last report stopped.
func applogOptions(cfg *config.Config, ids identity.Resolver) []applog.Option {
	return []applog.Option{
		applog.WithHostPath(cfg.HostPath),
		applog.WithIdentity(ids),
		applog.WithStateFile(filepath.Join(filepath.Dir(cfg.PIDFile), "applog-offsets.json")),
	}
}
