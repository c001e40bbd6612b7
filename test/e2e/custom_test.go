package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCustomProbe: a third-party probe declared in gala-gopher-custom.json
// (root-owned 0640, its executable root-owned 0550, its .meta beside it) is
// started over REST; its |table|...| lines become gala_gopher_* series with
// the reported values, and stopping it ends the child process.
func TestCustomProbe(t *testing.T) {
	requireE2E(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "demo_probe.sh")
	script := `#!/bin/sh
# Reports two rows every second; the value comes from custom_param "v".
v=$(echo "$GALAGO_PROBE_CONFIG" | sed -n 's/.*"v":"\([0-9]*\)".*/\1/p')
while true; do
	echo "|custom_demo|alpha|${v:-0}|"
	echo "|custom_demo|beta|7|"
	sleep 1
done
`
	meta := `version = "1.0.0"
measurements:
(
    {
        table_name: "custom_demo",
        entity_name: "demo",
        fields:
        (
            { description: "row id", type: "key", name: "id" },
            { description: "a reported value", type: "gauge", name: "value" },
        )
    }
)
`
	if err := os.WriteFile(bin, []byte(script), 0o550); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(bin, 0o550); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo_probe.meta"), []byte(meta), 0o640); err != nil {
		t.Fatal(err)
	}
	d := startDaemonWithCustom(t, `{"demo":{"bin":"`+bin+`","probe":["all"],"custom_param":"v"}}`)
	code, body := d.put("demo", `{"cmd":{"bin":"`+bin+`","probe":["all"]},"snoopers":{"proc_id":[1]},"params":{"report_period":5,"custom_param":[{"v":"42"}]},"state":"running"}`)
	if code != http.StatusOK {
		t.Fatalf("PUT /demo: %d %s", code, body)
	}
	waitFor(t, 20*time.Second, "custom probe series", func() bool {
		return len(samples(d.scrape(), "gala_gopher_demo_value")) == 2
	})
	for _, l := range samples(d.scrape(), "gala_gopher_demo_value") {
		m := sampleLine.FindStringSubmatch(l)
		switch {
		case strings.Contains(m[2], `id="alpha"`) && m[3] == "42":
		case strings.Contains(m[2], `id="beta"`) && m[3] == "7":
		default:
			t.Errorf("unexpected sample %s", l)
		}
	}
	if _, got := d.get("demo"); !strings.Contains(got, `"custom_param":[{"v":"42"}]`) || !strings.Contains(got, `"bin":"`+bin+`"`) {
		t.Errorf("GET /demo: %s", got)
	}
	if code, body := d.put("demo", `{"cmd":{"bin":"/bin/false","probe":["all"]}}`); code != http.StatusBadRequest {
		t.Errorf("PUT with another bin: %d %s", code, body)
	}
	if code, body := d.put("demo", `{"state":"stopped"}`); code != http.StatusOK {
		t.Fatalf("stop: %d %s", code, body)
	}
	waitFor(t, 10*time.Second, "the custom probe process to exit", func() bool {
		return !processRunning(bin)
	})
}

// startDaemonWithCustom starts galago with a gala-gopher-custom.json.
func startDaemonWithCustom(t *testing.T, decls string) *daemon {
	t.Helper()
	return startDaemon(t, daemonOpts{customJSON: decls})
}

// processRunning reports whether a process runs the given script.
func processRunning(script string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), script) {
			return true
		}
	}
	return false
}
