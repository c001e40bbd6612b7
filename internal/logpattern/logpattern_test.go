package logpattern

import (
	"fmt"
	"strings"
	"testing"
)

func TestDetectLevel(t *testing.T) {
	for line, want := range map[string]Level{
		"2024-05-01 12:00:00.123 INFO  [main] server started":         LevelInfo,
		"2024-05-01T12:00:00Z [WARN] disk 91% full":                   LevelWarning,
		"level=error msg=\"connect failed\" addr=10.0.0.1:5432":       LevelError,
		`{"ts":1714564800,"level":"debug","msg":"tick"}`:              LevelDebug,
		"E1127 03:04:05.123456   12345 controller.go:12] sync failed": LevelError,
		"W1127 03:04:05.123456   12345 controller.go:12] slow":        LevelWarning,
		"I1127 03:04:05.123456   12345 controller.go:12] ok":          LevelInfo,
		"F1127 03:04:05.123456   12345 main.go:1] dead":               LevelCritical,
		"FATAL: the database system is shutting down":                 LevelCritical,
		"panic: runtime error: index out of range [3] with length 3":  LevelCritical,
		"Traceback (most recent call last):":                          LevelError,
		"Exception in thread \"main\" java.lang.NullPointerException": LevelError,
		"java.lang.IllegalStateException: boom":                       LevelError,
		"<notice> reloading":                                          LevelInfo,
		"TRACE entering handler":                                      LevelDebug,
		"GET /index.html 200 12ms":                                    LevelUnknown,
		"user info_cache refreshed":                                   LevelUnknown, // info_cache is an identifier
		"err2 is a variable name, not a level":                        LevelUnknown,
		"":                                                            LevelUnknown,
		strings.Repeat("x ", 100) + "ERROR after the scanned prefix":  LevelUnknown,
	} {
		if got := DetectLevel(line); got != want {
			t.Errorf("DetectLevel(%q) = %s, want %s", line, got, want)
		}
	}
}

func TestMask(t *testing.T) {
	for line, want := range map[string]string{
		"user 1234 logged in from 10.1.2.3:55012":                                                    "user <*> logged in from <*>",
		"2024-05-01T12:00:00.123456789Z request id=550e8400-e29b-41d4-a716-446655440000 took 12.5ms": "<*> request id=<*> took <*>",
		`opening file "/tmp/a b c.txt" for 'bob'`:                                                    "opening file <*> for <*>",
		"GET /api/users/42/orders?limit=10 HTTP/1.1":                                                 "GET /api/users/<*>/orders?limit=<*> HTTP/<*>",
		"don't panic": "don't panic",
		"addr fe80::1%eth0 and [2001:db8::1]:443":     "addr <*> and [<*>]:<*>",
		"hash deadbeefdeadbeefdeadbeef done":          "hash <*> done",
		"  spaced\t\tout   words ":                    "spaced out words",
		"nul\x00byte":                                 "nulbyte",
		`{"level":"error","msg":"x","n":3}`:           `{"level":"error","msg":"x","n":<*>}`,
		`{"msg":"user 42 said 'hi'","ip":"10.0.0.1"}`: `{"msg":"user <*> said <*>","ip":"<*>"}`,
		`Get "https://x/y?limit=500": dial tcp`:       "Get <*>: dial tcp",
	} {
		if got := strings.Join(Mask(line), " "); got != want {
			t.Errorf("Mask(%q) = %q, want %q", line, got, want)
		}
	}
	if n := len(Mask(strings.Repeat("w ", 500))); n != MaxWords {
		t.Errorf("words = %d, want %d", n, MaxWords)
	}
}

func TestClusterer(t *testing.T) {
	c := NewClusterer(10)
	a := c.Add("user 1 logged in from 10.0.0.1")
	b := c.Add("user 2 logged in from 10.0.0.2")
	if a == nil || a != b || a.Template != "user <*> logged in from <*>" || a.Sample != "user 1 logged in from 10.0.0.1" {
		t.Fatalf("a=%+v b=%+v", a, b)
	}
	x := c.Add("worker alice started job")
	y := c.Add("worker bob started job")
	if x != y || x.Template != "worker <*> started job" {
		t.Fatalf("x=%+v y=%+v", x, y)
	}
	if x.ID == a.ID || len(x.ID) != 16 {
		t.Errorf("ids %s %s", x.ID, a.ID)
	}
	// The ID stays that of the first template after generalising.
	if want := NewClusterer(1).Add("worker alice started job").ID; x.ID != want {
		t.Errorf("ID changed: %s, want %s", x.ID, want)
	}
	// Two words of two differ by half: separate patterns.
	if c.Add("disk full") == c.Add("disk ok") {
		t.Error("disk full and disk ok merged")
	}
	// Different lengths never merge.
	if c.Add("worker carol started job now") == x {
		t.Error("different lengths merged")
	}
	if c.Len() != 5 {
		t.Errorf("Len = %d, want 5", c.Len())
	}
}

func TestClustererCap(t *testing.T) {
	c := NewClusterer(3)
	words := []string{"alpha", "bravo", "charlie", "delta", "echo"}
	var nils int
	for _, w := range words {
		if c.Add(w+" happened") == nil {
			nils++
		}
	}
	// "alpha happened" and "bravo happened" share one word of two: no
	// merge, so three patterns fill the cap and two messages overflow.
	if c.Len() != 3 || nils != 2 {
		t.Errorf("Len %d, overflow %d; want 3, 2", c.Len(), nils)
	}
	if c.Add("alpha happened") == nil {
		t.Error("a known pattern overflowed")
	}
	// The template cache stays bounded whatever comes in.
	for i := 0; i < 1000; i++ {
		c.Add(fmt.Sprintf("alpha happened %c%c", 'a'+i%26, 'a'+i/26%26))
	}
	if len(c.cache) > cacheFactor*3 {
		t.Errorf("cache %d entries", len(c.cache))
	}
}

func group(lines ...string) []Message {
	var g Grouper
	var out []Message
	for i, l := range lines {
		if m, ok := g.Add([]byte(l), int64(i)); ok {
			out = append(out, m)
		}
	}
	if m, ok := g.Flush(); ok {
		out = append(out, m)
	}
	return out
}

func TestGrouper(t *testing.T) {
	java := []string{
		"2024-05-01 12:00:00 ERROR [main] c.e.App - request failed",
		"java.lang.IllegalStateException: boom",
		"\tat com.example.App.handle(App.java:10)",
		"\tat com.example.App.main(App.java:3)",
		"Caused by: java.io.IOException: broken pipe",
		"\t... 2 more",
	}
	python := []string{
		"Traceback (most recent call last):",
		`  File "/app/x.py", line 3, in <module>`,
		"    f()",
		"ValueError: bad value",
	}
	gopanic := []string{
		"panic: boom",
		"",
		"goroutine 1 [running]:",
		"main.main()",
		"\t/app/main.go:5 +0x25",
		"exit status 2",
	}
	lines := append([]string{"INFO start"}, java...)
	lines = append(lines, python...)
	lines = append(lines, "WARN after python", "")
	lines = append(lines, gopanic...)
	lines = append(lines, "INFO done", "RuntimeError: not dotted, not in a traceback")
	msgs := group(lines...)
	want := []struct {
		first string
		lines int
		start int64
	}{
		{"INFO start", 1, 0},
		{java[0], 6, 1},
		{python[0], 4, 7},
		{"WARN after python", 1, 11},
		{"panic: boom", 5, 13},
		{"INFO done", 1, 19},
		{"RuntimeError: not dotted, not in a traceback", 1, 20},
	}
	if len(msgs) != len(want) {
		t.Fatalf("got %d messages: %+v", len(msgs), msgs)
	}
	for i, w := range want {
		if m := msgs[i]; m.First != w.first || m.Lines != w.lines || m.Start != w.start {
			t.Errorf("message %d = %+v, want %+v", i, m, w)
		}
	}
	// A Python traceback takes one exception line only.
	if got := group(append(python, "KeyError: next")...); len(got) != 2 {
		t.Errorf("python + next exception: %+v", got)
	}
	var g Grouper
	if _, ok := g.Pending(); ok {
		t.Error("empty grouper pending")
	}
	g.Add([]byte("x"), 42)
	if off, ok := g.Pending(); !ok || off != 42 {
		t.Errorf("Pending = %d %v", off, ok)
	}
}

func TestParseCRI(t *testing.T) {
	for _, tc := range []struct {
		line    string
		msg     string
		stream  Stream
		partial bool
		ok      bool
	}{
		{"2024-05-01T12:00:00.123456789Z stdout F hello world", "hello world", Stdout, false, true},
		{"2024-05-01T12:00:00.123456789Z stderr P part one ", "part one ", Stderr, true, true},
		{"2024-05-01T12:00:00.123456789Z stdout F", "", Stdout, false, true},
		{"2024-05-01T12:00:00.123456789Z stdout F:x y", "y", Stdout, false, true},
		{"2024-05-01T12:00:00.123456789Z stdin F x", "", 0, false, false},
		{"2024-05-01T12:00:00Z stdout Q x", "", 0, false, false},
		{"garbage", "", 0, false, false},
	} {
		msg, stream, partial, ok := ParseCRI([]byte(tc.line))
		if string(msg) != tc.msg || stream != tc.stream || partial != tc.partial || ok != tc.ok {
			t.Errorf("ParseCRI(%q) = %q %d %v %v", tc.line, msg, stream, partial, ok)
		}
	}
}

func TestParseDockerJSON(t *testing.T) {
	for _, tc := range []struct {
		line    string
		msg     string
		stream  Stream
		partial bool
		ok      bool
	}{
		{`{"log":"hello \"x\"\n","stream":"stdout","time":"2024-05-01T12:00:00.1Z"}`, `hello "x"`, Stdout, false, true},
		{`{"log":"crlf\r\n","stream":"stderr","time":"t"}`, "crlf", Stderr, false, true},
		{`{"log":"part","stream":"stderr","time":"t"}`, "part", Stderr, true, true},
		{`{"log":"x\n","stream":"other"}`, "", 0, false, false},
		{`not json`, "", 0, false, false},
	} {
		msg, stream, partial, ok := ParseDockerJSON([]byte(tc.line))
		if string(msg) != tc.msg || stream != tc.stream || partial != tc.partial || ok != tc.ok {
			t.Errorf("ParseDockerJSON(%q) = %q %d %v %v", tc.line, msg, stream, partial, ok)
		}
	}
}

func TestJoiner(t *testing.T) {
	var j Joiner
	if _, _, done := j.Add([]byte("ab"), true, 10); done {
		t.Fatal("partial done")
	}
	if off, ok := j.Pending(); !ok || off != 10 {
		t.Errorf("Pending %d %v", off, ok)
	}
	msg, off, done := j.Add([]byte("cd"), false, 20)
	if !done || string(msg) != "abcd" || off != 10 {
		t.Errorf("got %q %d %v", msg, off, done)
	}
	big := make([]byte, MaxLine)
	j.Add(big, true, 0)
	msg, _, _ = j.Add([]byte("more"), false, 1)
	if len(msg) != MaxTemplate {
		t.Errorf("joined %d bytes, want %d", len(msg), MaxTemplate)
	}
}

// TestBenchMix checks what the benchmark measures: its mix of shapes
// clusters into one pattern per shape.
func TestBenchMix(t *testing.T) {
	c := NewClusterer(256)
	var g Grouper
	for i, l := range benchLines(5000) {
		if m, ok := g.Add(l, int64(i)); ok {
			c.Add(m.First)
		}
	}
	for _, p := range c.Patterns() {
		t.Logf("%s %s", p.ID, p.Template)
	}
	if c.Len() != 6 {
		t.Errorf("%d patterns, want 6 (one per shape)", c.Len())
	}
}
