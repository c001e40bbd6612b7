package output

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/output/kafkatest"
)

// The Kafka tests run franz-go's kfake broker as its own process (this test
// binary re-executed: kafkatest).
func TestMain(m *testing.M) {
	kafkatest.ServeIfBroker()
	os.Exit(m.Run())
}
