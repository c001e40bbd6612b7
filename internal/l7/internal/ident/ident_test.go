package ident

import "testing"

func TestAppendCollapsed(t *testing.T) {
	for in, want := range map[string]string{
		"orders":                      "orders",
		"orders-v2":                   "orders-v2",
		"logs_2024":                   "logs_2024",
		"logs_20241123":               "logs_{n}",
		"tenant_5f2b9c0e4a1d3e7f90ab": "tenant_{id}",
		"cache-0b9e3f6a-2c1d-4e5f-8a7b-9c0d1e2f3a4b": "cache-{id}",
		"0b9e3f6a-2c1d-4e5f-8a7b-9c0d1e2f3a4b.x":     "{id}.x",
		"deadbeefdeadbeefdeadbeef":                   "deadbeefdeadbeefdeadbeef", // no decimal digit: a word
		"a1234567":                                   "a{n}",
		"user.12345.events":                          "user.{n}.events",
		"":                                           "",
	} {
		if got := string(AppendCollapsed(nil, []byte(in))); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { AppendCollapsed(make([]byte, 0, 64)[:0], []byte("logs_20241123")) }); n > 1 {
		t.Errorf("%v allocs", n)
	}
}
