package syscap

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/galago-project/galago/internal/probe/probetest"
)

// TestVerifierComplexity loads the programs with verifier statistics and
// logs how many instructions the verifier processed for each, so that a
// change that brings a program near the kernel's limit (1M) shows.
func TestVerifierComplexity(t *testing.T) {
	probetest.RequirePrivileged(t)
	spec, err := loadSyscap()
	if err != nil {
		t.Fatal(err)
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{LogLevel: ebpf.LogLevelStats}})
	if err != nil {
		t.Fatal(err)
	}
	defer coll.Close()
	for name, p := range coll.Programs {
		vl := p.VerifierLog
		i := strings.Index(vl, "processed ")
		if i < 0 {
			t.Errorf("%s: no statistics in %q", name, vl)
			continue
		}
		t.Logf("%s: %s", name, strings.TrimSpace(vl[i:]))
	}
}
