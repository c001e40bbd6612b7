package custom

import (
	"os"
	"testing"

	"github.com/galago-project/galago/internal/output/kafkatest"
)

// TestMain lets the test binary serve as the Kafka broker process of
// TestLogLinesToKafka.
func TestMain(m *testing.M) {
	kafkatest.ServeIfBroker()
	os.Exit(m.Run())
}
