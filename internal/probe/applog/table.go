package applog

import (
	_ "embed"

	"github.com/galago-project/galago/internal/table"
)

//go:embed app_log.meta
var appLogMeta []byte

// AppLog is the app_log table (entity app_log): galago's own, so it is
// declared next to its probe rather than among gala-gopher's generated
// tables, from a .meta file like theirs.
var AppLog = mustTable()

func mustTable() *table.Table {
	ts, err := table.ParseMeta("app_log.meta", appLogMeta)
	if err != nil || len(ts) != 1 {
		panic("applog: app_log.meta: " + errString(err))
	}
	return ts[0]
}

func errString(err error) string {
	if err == nil {
		return "want one table"
	}
	return err.Error()
}

var (
	fContainer = AppLog.MustIndex("container_id")
	fUnit      = AppLog.MustIndex("unit")
	fTgid      = AppLog.MustIndex("tgid")
	fLevel     = AppLog.MustIndex("level")
	fPattern   = AppLog.MustIndex("pattern")
	fTemplate  = AppLog.MustIndex("template")
	fSample    = AppLog.MustIndex("sample")
	fMessages  = AppLog.MustIndex("messages")
	fLines     = AppLog.MustIndex("lines")
)
