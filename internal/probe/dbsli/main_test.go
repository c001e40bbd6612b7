package dbsli

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
)

// testShared is the capture the privileged tests' views share, as the
// daemon's do: loaded once for the package (a load is seconds of
// verifier time on a busy machine).
var testShared = syscap.NewShared(syscap.Options{})

type nopHandler struct{}

func (nopHandler) Conn(*syscap.Conn)   {}
func (nopHandler) Data(*syscap.Data)   {}
func (nopHandler) Close(*syscap.Close) {}

func TestMain(m *testing.M) {
	var hold *syscap.Sub
	if probetest.Privileged() && os.Geteuid() == 0 {
		// A failure here shows again, as a test failure, in each test's
		// own Subscribe.
		hold, _ = testShared.Subscribe(nopHandler{}, nil)
	}
	code := m.Run()
	if hold != nil {
		_ = hold.Close()
	}
	os.Exit(code)
}
