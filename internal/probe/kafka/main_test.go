package kafkaprobe

import (
	"fmt"
	"os"
	"testing"

	"github.com/galago-project/galago/internal/probe/probetest"
	"github.com/galago-project/galago/internal/syscap"
)

// helperEnv names the helper a re-executed test binary runs instead of
// the tests (kafkabroker, kafkaclient).
const helperEnv = "GALAGO_KAFKAPROBE_HELPER"

// testShared is the capture the privileged tests share, as the daemon's
// features do.
var testShared = syscap.NewShared(syscap.Options{})

type nopHandler struct{}

func (nopHandler) Conn(*syscap.Conn)   {}
func (nopHandler) Data(*syscap.Data)   {}
func (nopHandler) Close(*syscap.Close) {}

func TestMain(m *testing.M) {
	if h := os.Getenv(helperEnv); h != "" {
		var err error
		switch h {
		case "kafkabroker":
			err = kafkaBroker()
		case "kafkaclient":
			err = kafkaClient()
		default:
			err = fmt.Errorf("unknown helper %q", h)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, h+":", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	var hold *syscap.Sub
	if probetest.Privileged() && os.Geteuid() == 0 {
		// A failure here shows again, as a test failure, in the test's own
		// Subscribe.
		hold, _ = testShared.Subscribe(nopHandler{}, nil)
	}
	code := m.Run()
	if hold != nil {
		_ = hold.Close()
	}
	os.Exit(code)
}
