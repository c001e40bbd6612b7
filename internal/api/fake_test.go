package api

import (
	"fmt"
	"sync"

	"github.com/galago-project/galago/internal/probe"
)

// call is one Controller call the fake saw.
type call struct {
	Op, Feature, Body string
}

// fakeController records calls. Features in get are known; putErr makes
// Put fail for a feature.
type fakeController struct {
	mu     sync.Mutex
	calls  []call
	get    map[string][]byte
	getErr map[string]error
	putErr map[string]error
	// block, when set, is waited on inside Put (to hold a request in flight).
	block chan struct{}
}

func newFake() *fakeController {
	return &fakeController{
		get: map[string][]byte{
			"flamegraph": []byte(`{"cmd":{"bin":"","probe":["oncpu","offcpu"]},"params":{"report_period":60},"snoopers":{"proc_name":[{"cmdline":"","comm":"java"}]},"state":"running"}` + "\n"),
			"tcp":        []byte("{}\n"),
			"tprofiling": []byte("{}\n"),
			"sli":        []byte("{}\n"),
			"flowtracer": []byte(`{"state":"stopped"}` + "\n"),
		},
		getErr: map[string]error{},
		putErr: map[string]error{},
	}
}

func (f *fakeController) Put(feature string, body []byte) error {
	f.mu.Lock()
	f.calls = append(f.calls, call{"put", feature, string(body)})
	_, known := f.get[feature]
	err := f.putErr[feature]
	block := f.block
	f.mu.Unlock()
	if block != nil {
		<-block
	}
	if !known {
		return fmt.Errorf("feature %s: %w", feature, probe.ErrUnknownFeature)
	}
	return err
}

func (f *fakeController) Get(feature string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{"get", feature, ""})
	if err := f.getErr[feature]; err != nil {
		return nil, err
	}
	b, ok := f.get[feature]
	if !ok {
		return nil, fmt.Errorf("get %s: %w", feature, probe.ErrUnknownFeature)
	}
	return b, nil
}

func (f *fakeController) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func (f *fakeController) puts() []call {
	var out []call
	for _, c := range f.Calls() {
		if c.Op == "put" {
			out = append(out, c)
		}
	}
	return out
}
