package logpattern

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzLogLine(f *testing.F) {
	for _, s := range []string{
		"2024-05-01T12:00:00.123456789Z stdout F hello 1 world",
		"2024-05-01T12:00:00.123456789Z stderr P part",
		`{"log":"hello\n","stream":"stdout","time":"t"}`,
		"E1127 03:04:05.123456 1 x.go:1] failed 'q' \"z\"",
		"Traceback (most recent call last):\n  File \"x\"\nValueError: v",
		"panic: x\n\ngoroutine 1 [running]:\nmain.main()\n\t/x.go:1",
		"\x00\xff\"unterminated 'q",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if msg, _, _, ok := ParseCRI(data); ok && len(msg) > len(data) {
			t.Fatal("CRI message longer than its line")
		}
		_, _, _, _ = ParseDockerJSON(data)
		_ = DetectLevel(string(data))
		words := Mask(string(data))
		if len(words) > MaxWords {
			t.Fatalf("%d words", len(words))
		}
		for _, w := range words {
			if w == "" || strings.ContainsAny(w, " \t\n\x00") || !utf8.ValidString(w) {
				t.Fatalf("bad word %q", w)
			}
		}
		c := NewClusterer(4)
		var g Grouper
		var j Joiner
		n := 0
		for i, line := range bytes.Split(data, []byte("\n")) {
			if full, _, done := j.Add(line, i%3 == 1, int64(i)); done {
				if m, ok := g.Add(full, int64(i)); ok {
					n += m.Lines
					if p := c.Add(m.First); p != nil && (len(p.Sample) > MaxSample || !utf8.ValidString(p.Sample)) {
						t.Fatalf("sample %q", p.Sample)
					}
				}
			}
		}
		if m, ok := g.Flush(); ok {
			n += m.Lines
			c.Add(m.First)
		}
		if c.Len() > 4 {
			t.Fatalf("%d patterns over the cap", c.Len())
		}
		if n > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("%d lines from %d", n, bytes.Count(data, []byte("\n"))+1)
		}
	})
}
