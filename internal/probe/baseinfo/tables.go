package baseinfo

import (
	_ "embed"
	"fmt"

	"github.com/galago-project/galago/internal/table"
)

// galago's own baseinfo tables (gala-gopher has none of them) are declared
// next to the probe, from .meta files like gala-gopher's.
var (
	//go:embed proc_delay.meta
	procDelayMeta []byte

	// ProcDelay is the proc_delay table of the delay sub-item.
	ProcDelay = mustTable("proc_delay.meta", procDelayMeta)

	//go:embed proc_app.meta
	procAppMeta []byte

	// ProcApp is the proc_app table of the app sub-item.
	ProcApp = mustTable("proc_app.meta", procAppMeta)

	//go:embed host_instance.meta
	hostInstanceMeta []byte

	// HostInstance is the host sub-item's host_instance table.
	HostInstance = mustTable("host_instance.meta", hostInstanceMeta)
)

func mustTable(name string, b []byte) *table.Table {
	ts, err := table.ParseMeta(name, b)
	if err != nil {
		panic(fmt.Sprintf("baseinfo: %s: %v", name, err))
	}
	if len(ts) != 1 {
		panic(fmt.Sprintf("baseinfo: %s: %d tables, want 1", name, len(ts)))
	}
	return ts[0]
}
