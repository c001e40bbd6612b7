package probe

import (
	"bytes"
	"testing"
)

// FuzzRequestRoundTrip: any body is answered without a panic, and a body
// that is accepted leaves a configuration whose probes.init form (Saved)
// applies again to a fresh feature and gives back the same form: what a
// clean stop writes is what the next start runs.
func FuzzRequestRoundTrip(f *testing.F) {
	for _, body := range []string{
		`{"cmd":{"probe":["tcp_rtt","tcp_stats"]},"snoopers":{"proc_id":[101],"proc_name":[{"comm":"^java$","cmdline":"x","label":{"app":"a"}}],"custom_labels":{"env":"prod"},"pod_labels":["team"]},"params":{"report_period":5,"drops_thr":10},"state":"running"}`,
		`{"cmd":{"probe":["tcp_rtt"]},"snoopers":{"custom_labels":{"env":"prod"}},"blacklist":{"proc_id":[7],"container_name":["web"]},"state":"running"}`,
		`{"cmd":{"bin":"system_infos","probe":["cpu","fs","host","proc"]},"state":"running"}`,
		`{"snoopers":{"proc_name":[{"comm":"^データ\ud83d\ude00$","cmdline":"é"}],"pod_id":["0f9c2a3e-1111-2222-3333-444455556666"],"container_id":["9f86d081884c"]}}`,
		"{\"snoopers\":{\"proc_name\":[{\"comm\":\"\xff\"}]}}",
		`{"params":{"report_period":5.5}}`,
		`{"blacklist":{}}`,
	} {
		f.Add(uint8(0), []byte(body))
		f.Add(uint8(1), []byte(body))
	}
	features := []*Feature{LookupBuiltin("tcp"), LookupBuiltin("baseinfo")}
	fresh := func() Desired { return Desired{Params: DefaultParams()} }
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		feat := features[int(which)%len(features)]
		d, err := applyRequest(feat, fresh(), body, false)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error message")
			}
			return
		}
		saved := encodeDesired(feat, d, true)
		d2, err := applyRequest(feat, fresh(), saved, false)
		if err != nil {
			t.Fatalf("saved form %s of %q refused: %v", saved, body, err)
		}
		if again := encodeDesired(feat, d2, true); !bytes.Equal(again, saved) {
			t.Fatalf("round trip of %q:\n%s\n%s", body, saved, again)
		}
	})
}
