package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/galago-project/galago/internal/identity"
)

// TestEventsChinese starts galago with event.desc_language = "zh_CN" and
// baseinfo's mem collector with a 1% threshold: the memory event in the
// event log carries gala-gopher's Chinese description, in the same JSON.
func TestEventsChinese(t *testing.T) {
	requireE2E(t)
	d := startDaemon(t, daemonOpts{
		descLanguage: "zh_CN",
		probesInit:   `baseinfo {"cmd":{"probe":["mem"]},"blacklist":{},"params":{"report_period":5,"res_upper_thr":1,"report_event":1},"state":"running"}` + "\n",
	})
	host, err := identity.Host("/")
	if err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(d.dir, "event", "gopher_event.log")
	var line string
	waitFor(t, 30*time.Second, "the mem util event in "+logPath, func() bool {
		b, _ := os.ReadFile(logPath)
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, `"gala_gopher_mem_util"`) {
				line = l
				return true
			}
		}
		return false
	})
	var ev struct {
		Attributes struct {
			EntityID string `json:"entity_id"`
		}
		Resource struct {
			Metric string
			Labels struct{ Host string }
		}
		SeverityText string
		Body         string
	}
	if err := json.Unmarshal([]byte(line), &ev); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	if ev.Attributes.EntityID != host.MachineID()+"_mem_:proc:meminfo" || ev.Resource.Labels.Host != host.MachineID() || ev.SeverityText != "WARN" {
		t.Errorf("event %s", line)
	}
	m := regexp.MustCompile(`^\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} WARN Entity\(/proc/meminfo\) 内存使用率过高\((\d+\.\d\d)%\)\.$`).FindStringSubmatch(ev.Body)
	if m == nil {
		t.Fatalf("Body %q: not gala-gopher's zh_CN memory description", ev.Body)
	}
	if util, _ := strconv.ParseFloat(m[1], 64); util <= 1 || util > 100 {
		t.Errorf("utilisation %s%% in %q, threshold 1%%", m[1], ev.Body)
	}
	if err := d.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
}
